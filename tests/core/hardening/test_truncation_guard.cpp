// A model file truncated while it is mapped: the guard names it and exits 1
// instead of the process dying of SIGBUS. Run in a child, which is what dies.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ferrox/gguf/mapped_file.h"
#include "ferrox/gguf/truncation_guard.h"
#include "temp_dir.h"

namespace {

struct ChildResult {
    int exit_code = -1, signal = 0;
    std::string err;
};

// Maps a 1 MiB file, truncates it to 0 and reads its last page, in a child
// whose stderr goes to a file.
ChildResult touch_after_truncation(bool guard) {
    ferrox::test::TempDir dir;
    const auto path = dir / "model.gguf";
    {
        std::ofstream out(path, std::ios::binary);
        const std::vector<char> bytes(1 << 20, 'x');
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    const auto err_path = dir / "stderr";
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::FILE* err = std::freopen(err_path.c_str(), "w", stderr);
        (void)err;
        if (guard) ferrox::gguf::install_truncation_guard();
        auto file = ferrox::gguf::MappedFile::open(path);
        if (!file) ::_exit(3);
        std::filesystem::resize_file(path, 0);
        volatile const std::byte* last = file->bytes().data() + file->bytes().size() - 1;
        const std::byte b = *last;  // SIGBUS: the page is past the end of the file now
        ::_exit(static_cast<int>(b) == 'x' ? 4 : 5);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ChildResult r;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    std::ifstream in(err_path);
    r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return r;
}

}  // namespace

TEST_CASE("a mapped model truncated under ferrox is named and exits 1, not SIGBUS") {
    // What the guard exists for: SIGBUS (or, under ASan, its report and exit 1).
    const ChildResult unguarded = touch_after_truncation(false);
    CHECK((unguarded.signal == SIGBUS || unguarded.exit_code == 1));
    CHECK_THAT(unguarded.err, !Catch::Contains("model file changed on disk"));

    const ChildResult guarded = touch_after_truncation(true);
    CHECK(guarded.signal == 0);
    CHECK(guarded.exit_code == ferrox::gguf::kExitFileChanged);
    CHECK_THAT(guarded.err, Catch::Contains("model.gguf") &&
                                Catch::Contains("model file changed on disk (truncated)"));
}
