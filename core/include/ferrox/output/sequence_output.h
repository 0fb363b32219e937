// One sequence's output stage: every token the sampler picks goes through
// here, and what comes out is what a front end shows -- `ferrox chat`, the
// server's scheduler, and (its text half, TextStream) the C API's detok
// stream that `ferrox run` reads. It decides when the sequence is finished,
// in engine terms (FinishReason); mapping those to a protocol's words
// ("stop", "length", an HTTP status) is the front end's job.
//
// Per token: an end-of-generation token finishes the sequence (its text is
// not shown); otherwise the token's piece goes through the TextStream (whole
// UTF-8 characters, stop strings by earliest end), its log-probability is
// taken when asked, and the max_tokens budget is counted. Later per-sequence
// stages (a grammar's state, tool-call or reasoning parsing) belong here too,
// so that every front end gets them at once.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/output/text_stream.h"

namespace ferrox {
class Tokenizer;
}

namespace ferrox::output {

enum class FinishReason {
    None,             // still going
    EndOfGeneration,  // the model chose an end-of-generation token (eos, eot, <end_of_turn>)
    StopString,       // a stop string completed
    Length,           // max_tokens reached, or the context has no room for more
    Cancelled,        // the caller stopped it (Ctrl-C, a client that went away)
    // Ends a scheduler gives a sequence from outside its text:
    Timeout,   // its deadline passed, while it waited or ran
    NoRoom,    // the KV cache cannot hold its prompt and nothing running will free cells
    Failed,    // a decode failed
    Shutdown,  // the engine stopped before it was done
};
FERROX_API const char* to_string(FinishReason reason);  // "eog", "stop", "length", ...
// EndOfGeneration, StopString and Length: the text is a whole answer (the
// other reasons cut it short).
FERROX_API bool is_complete(FinishReason reason);

struct TokenLogprob {
    int32_t token = 0;
    std::string piece;  // the token's bytes, as is (possibly part of a character)
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;  // piece, logprob; best first
};

struct OutputOptions {
    std::vector<std::string> stop;
    // Output tokens at most (an end-of-generation token does not count).
    uint32_t max_tokens = std::numeric_limits<uint32_t>::max();
    bool logprobs = false;      // report each token's log-probability
    uint32_t top_logprobs = 0;  // and this many of the most likely alternatives
};

class FERROX_API SequenceOutput {
  public:
    // `tokenizer` must outlive the stage.
    SequenceOutput(const Tokenizer& tokenizer, OutputOptions options);

    struct Step {
        std::string text;                     // to show now (may be empty: held back)
        std::optional<TokenLogprob> logprob;  // when asked; none for end of generation
        FinishReason finish = FinishReason::None;
    };
    // The token picked and the logits it was drawn from (the model's, before
    // any sampling stage; read only for logprobs). After the sequence
    // finished, a push gives nothing.
    Step push(int32_t token, std::span<const float> logits = {});
    // Ends the sequence for a reason outside its text (Length when the
    // context is full, Cancelled): the text still held back, unless a stop
    // string completes in it.
    Step finish(FinishReason why);

    FinishReason finished() const { return finished_; }
    // After FinishReason::StopString: which stop string it was.
    const std::string& stop_matched() const { return text_.stop_matched(); }
    uint32_t tokens() const { return tokens_; }  // output tokens so far

  private:
    const Tokenizer& tok_;
    OutputOptions options_;
    TextStream text_;
    uint32_t tokens_ = 0;
    FinishReason finished_ = FinishReason::None;
};

// The log-softmax of `logits` at `token`, and the `top` most likely tokens'
// (highest first, the lower id on ties), with their pieces.
FERROX_API TokenLogprob token_logprob(const Tokenizer& tokenizer, std::span<const float> logits,
                                      int32_t token, uint32_t top);

}  // namespace ferrox::output
