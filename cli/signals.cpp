#include "signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace ferrox::cli {
namespace {

std::atomic<bool> interrupt_seen{false};
static_assert(std::atomic<bool>::is_always_lock_free,
              "a signal handler may only touch lock-free atomics");

extern "C" void on_sigint(int) {
    if (interrupt_seen.exchange(true)) {
        // Only async-signal-safe calls here: no stdio, no allocation.
        static const char message[] = "\ninterrupted again: exiting now\n";
        [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message, sizeof message - 1);
        ::_exit(kExitInterrupted);
    }
}

}  // namespace

void catch_interrupts() {
    static const bool installed = [] {
        struct sigaction action {};
        action.sa_handler = on_sigint;
        sigemptyset(&action.sa_mask);
        action.sa_flags = 0;  // no SA_RESTART: a blocking write returns to the loop
        return ::sigaction(SIGINT, &action, nullptr) == 0;
    }();
    (void)installed;
}

bool interrupted() { return interrupt_seen.load(); }

}  // namespace ferrox::cli
