// The CLI as a user of ferrox.h: handles owned by unique_ptrs, the model's
// parameters from the common flags and a command's model choices, and the
// API's status turned into a log line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ferrox/ferrox.h"
#include "model_session.h"
#include "session.h"

namespace ferrox::cli {

using ModelHandle = std::unique_ptr<ferrox_model, decltype(&ferrox_model_free)>;
using ContextHandle = std::unique_ptr<ferrox_context, decltype(&ferrox_context_free)>;
using SamplerHandle = std::unique_ptr<ferrox_sampler, decltype(&ferrox_sampler_free)>;
using DetokHandle = std::unique_ptr<ferrox_detok_stream, decltype(&ferrox_detok_stream_free)>;
using ChatPromptHandle = std::unique_ptr<ferrox_chat_prompt, decltype(&ferrox_chat_prompt_free)>;

// A zeroed ferrox_call_status of this header's size.
ferrox_call_status fresh_status();

// The C API's status, turned into a log line; true when the call succeeded.
bool succeeded(ferrox_code code, const ferrox_call_status& st);

// Which tokens of a decode want their logits.
enum class LogitsFor { None, Last, All };

// One decode of tokens [first, first + n) of `tokens`, sequence 0, each at its
// own index as position (a single sequence's prompt or step).
ferrox_code decode_one_sequence(ferrox_context* ctx, const std::vector<int32_t>& tokens,
                                size_t first, size_t n, LogitsFor logits, ferrox_call_status& st);

// ferrox_model_params for --config, --plugin-dir, -t, -c, --kv-type and
// --resident. It holds the strings the params point into: keep it until the
// load returns (not copyable, not movable).
class ApiModelParams {
  public:
    ApiModelParams(const CommonOptions& common, const ModelChoices& choices);
    ApiModelParams(const ApiModelParams&) = delete;
    ApiModelParams& operator=(const ApiModelParams&) = delete;

    // Logs each tenth of the load (weights uploading to a resident backend)
    // at info level, as a command that loads for a while does.
    void log_progress();
    const ferrox_model_params* get() const { return &params_; }

  private:
    std::string config_path_;
    std::vector<std::string> dir_strings_;
    std::vector<const char*> dirs_;
    int last_tenth_ = -1;
    ferrox_model_params params_;
};

}  // namespace ferrox::cli
