// The exit status of every command, decided here and nowhere else (README,
// "Exit status"; --help's footer):
//   0  success
//   1  the work failed at run time: a required backend or the weights' load
//      failed (memory planned for a -c this machine cannot hold included: the
//      engine reports it from the load), a decode failed, output could not be
//      written
//   2  usage: a flag's value, a missing or conflicting flag, and what the
//      flags name -- a --config, model, prompt or template file that is absent,
//      unreadable or malformed, a prompt that does not fit the context
//   130 generation stopped by Ctrl-C (signals.h)
// Model references and downloads (pull, models, run/chat/serve -m REF) keep the
// same split: what the user names that is not there -- a repo or file the hub
// answers 404 for, a reference not in the store -- or a token the hub refuses
// (401/403), or a model store folder failing the trust rule, is usage (2); the
// network failing, a checksum mismatch, a hostile or unreadable file from the
// hub, or the disk failing is a failure (1).
// CLI11's own parse errors are usage errors too (main.cpp).
#pragma once

#include <fmt/format.h>

#include <string>

#include "ferrox/engine.h"
#include "ferrox/ferrox.h"
#include "ferrox/hub/pull.h"
#include "ferrox/log.h"

namespace ferrox::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the run failed
inline constexpr int kExitBadInput = 2;  // usage: bad flags, or bad files they name

// Engine::open's refusal: the file, its tokenizer or the options (the user's
// to fix) are usage; a backend or the weights' load failing is a failure.
int exit_status(OpenFailure why);
// The same for ferrox_model_load's code (run and logits stand on ferrox.h).
int exit_status_of_load(ferrox_code code);
// A pull's, or a reference's lookup in the model store.
int exit_status(hub::PullFailure why);

// Logs "FLAG: why" and returns the usage status: a refusal found after
// parsing names its flag as CLI11's own refusals do.
template <class... Args>
int usage_error(std::string_view flag, fmt::format_string<Args...> why, Args&&... args) {
    logger().error("{}: {}", flag, fmt::format(why, std::forward<Args>(args)...));
    return kExitBadInput;
}

}  // namespace ferrox::cli
