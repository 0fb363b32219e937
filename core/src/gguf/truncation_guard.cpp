#include "ferrox/gguf/truncation_guard.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace ferrox::gguf {
namespace {

constexpr size_t kSlots = 64;
constexpr size_t kPathBytes = 512;

struct Slot {
    std::atomic<int> state{0};  // 0 free, 1 being written, 2 published
    std::atomic<uintptr_t> begin{0};
    std::atomic<size_t> size{0};
    char path[kPathBytes] = {};
};

Slot slots[kSlots];

void write_all(const char* text, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(STDERR_FILENO, text, n);
        if (w <= 0) return;
        text += w;
        n -= static_cast<size_t>(w);
    }
}

extern "C" void on_sigbus(int signal, siginfo_t* info, void*) {
    const auto address = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
    for (Slot& s : slots) {
        if (s.state.load(std::memory_order_acquire) != 2) continue;
        const uintptr_t b = s.begin.load(std::memory_order_relaxed);
        if (address < b || address - b >= s.size.load(std::memory_order_relaxed)) continue;
        // Async-signal-safe only: write(2) and _exit(2).
        static const char lead[] = "\nferrox: ";
        static const char tail[] =
            ": model file changed on disk (truncated) while in use; stopping\n";
        write_all(lead, sizeof lead - 1);
        write_all(s.path, strnlen(s.path, kPathBytes));
        write_all(tail, sizeof tail - 1);
        ::_exit(kExitFileChanged);
    }
    // Not ours: the default action (a core dump, as without the guard).
    ::signal(signal, SIG_DFL);
    ::raise(signal);
}

}  // namespace

void install_truncation_guard() {
    static const bool installed = [] {
        struct sigaction action {};
        action.sa_sigaction = on_sigbus;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_SIGINFO;
        return ::sigaction(SIGBUS, &action, nullptr) == 0;
    }();
    (void)installed;
}

void register_mapping(const void* begin, size_t size, const char* path) noexcept {
    for (Slot& s : slots) {
        int expected = 0;
        if (!s.state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) continue;
        const size_t n = strnlen(path, kPathBytes - 1);
        std::memcpy(s.path, path, n);
        s.path[n] = '\0';
        s.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_relaxed);
        s.size.store(size, std::memory_order_relaxed);
        s.state.store(2, std::memory_order_release);
        return;
    }
}

void unregister_mapping(const void* begin) noexcept {
    for (Slot& s : slots) {
        if (s.state.load(std::memory_order_acquire) != 2 ||
            s.begin.load(std::memory_order_relaxed) != reinterpret_cast<uintptr_t>(begin))
            continue;
        s.state.store(0, std::memory_order_release);
        return;
    }
}

}  // namespace ferrox::gguf
