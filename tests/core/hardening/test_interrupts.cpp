// The CLI's two-step Ctrl-C (cli/signals.cpp, compiled into this test): the
// first SIGINT only raises a flag the generation loop reads; the second ends
// the process with status 130. raise() delivers synchronously, so no timing.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "signals.h"

TEST_CASE("the first SIGINT asks to stop and the second exits with 130") {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ferrox::cli::catch_interrupts();
        if (ferrox::cli::interrupted()) ::_exit(2);
        std::raise(SIGINT);
        if (!ferrox::cli::interrupted()) ::_exit(3);  // the first one must not kill
        std::raise(SIGINT);
        ::_exit(4);  // unreachable when the second one exits
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == ferrox::cli::kExitInterrupted);
}
