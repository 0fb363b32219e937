// Runs a command through the shell and captures its exit code, stdout and
// stderr separately (the CLI's contract: text on stdout, logs on stderr).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace ferrox::test {

struct ProcessResult {
    int exit_code = -1;
    std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

inline ProcessResult run_process(const std::string& command) {
    TempDir io;
    const auto out = io / "stdout", err = io / "stderr";
    const std::string full =
        command + " >'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
    const int status = std::system(full.c_str());
    ProcessResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

}  // namespace ferrox::test
