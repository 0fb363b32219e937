// Ctrl-C during generation: the first SIGINT asks the loop to stop after the
// token it is computing (so the summary and the JSON so far are printed); a
// second one ends the process at once, with the shell's status for SIGINT.
#pragma once

namespace ferrox::cli {

inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as a shell reports it

// Installs the two-step handler (once; later calls do nothing).
void catch_interrupts();
// True once a SIGINT arrived after catch_interrupts().
bool interrupted();

}  // namespace ferrox::cli
