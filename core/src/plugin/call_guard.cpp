#include "call_guard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstring>
#include <mutex>

#include "ferrox/escape.h"

namespace ferrox::plugin {
namespace {

constexpr std::array<int, 5> kFatalSignals{SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

std::mutex g_scope;  // one scope at a time: the buffers below are the scope's
// Written before the handlers are installed and only read by them: the
// handler may use write() alone (async-signal-safe), so the text is ready.
char g_who[1024];
size_t g_who_len = 0;
char g_phase[64];
size_t g_phase_len = 0;
std::array<struct sigaction, kFatalSignals.size()> g_previous{};

void write_all(const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(STDERR_FILENO, p, n);
        if (w <= 0) return;
        p += w;
        n -= static_cast<size_t>(w);
    }
}

void on_fatal_signal(int sig) {
    write_all(g_who, g_who_len);
    write_all(g_phase, g_phase_len);
    char tail[32];
    // Digits by hand: snprintf is not async-signal-safe.
    const char prefix[] = ": signal ";
    std::memcpy(tail, prefix, sizeof prefix - 1);
    size_t n = sizeof prefix - 1;
    char digits[8];
    size_t d = 0;
    for (int v = sig; v > 0 && d < sizeof digits; v /= 10)
        digits[d++] = static_cast<char>('0' + v % 10);
    while (d > 0) tail[n++] = digits[--d];
    tail[n++] = '\n';
    write_all(tail, n);
    // The action this signal had before; raised again, it runs once this returns.
    for (size_t i = 0; i < kFatalSignals.size(); ++i)
        if (kFatalSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
    ::raise(sig);
}

}  // namespace

PluginCallScope::PluginCallScope(std::string_view backend, const std::filesystem::path& file,
                                 std::string_view phase) {
    g_scope.lock();
    const std::string who = fmt::format("ferrox: backend {} ({}) died in ", escape_text(backend),
                                        escape_text(file.native()));
    g_who_len = std::min(who.size(), sizeof g_who);
    std::memcpy(g_who, who.data(), g_who_len);
    g_phase_len = std::min(phase.size(), sizeof g_phase);
    std::memcpy(g_phase, phase.data(), g_phase_len);
    struct sigaction action {};
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    for (size_t i = 0; i < kFatalSignals.size(); ++i)
        ::sigaction(kFatalSignals[i], &action, &g_previous[i]);
}

PluginCallScope::~PluginCallScope() {
    for (size_t i = 0; i < kFatalSignals.size(); ++i)
        ::sigaction(kFatalSignals[i], &g_previous[i], nullptr);
    g_scope.unlock();
}

}  // namespace ferrox::plugin
