#include "ferrox/output/sequence_output.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::output {

const char* to_string(FinishReason reason) {
    switch (reason) {
        case FinishReason::None:
            return "none";
        case FinishReason::EndOfGeneration:
            return "eog";
        case FinishReason::StopString:
            return "stop";
        case FinishReason::Length:
            return "length";
        case FinishReason::Cancelled:
            return "cancelled";
        case FinishReason::Timeout:
            return "timeout";
        case FinishReason::NoRoom:
            return "no_room";
        case FinishReason::Failed:
            return "failed";
        case FinishReason::Shutdown:
            return "shutdown";
    }
    return "unknown";
}

bool is_complete(FinishReason reason) {
    return reason == FinishReason::EndOfGeneration || reason == FinishReason::StopString ||
           reason == FinishReason::Length;
}

SequenceOutput::SequenceOutput(const Tokenizer& tokenizer, OutputOptions options)
    : tok_(tokenizer), options_(std::move(options)), text_(options_.stop) {}

SequenceOutput::Step SequenceOutput::push(int32_t token, std::span<const float> logits) {
    Step step;
    if (finished_ != FinishReason::None) {
        step.finish = finished_;
        return step;
    }
    if (tok_.is_end_of_generation(token)) {
        step.text = text_.finish().emit;
        step.finish = finished_ = FinishReason::EndOfGeneration;
        return step;
    }
    ++tokens_;
    if (options_.logprobs && !logits.empty())
        step.logprob = token_logprob(tok_, logits, token, options_.top_logprobs);
    auto shown = text_.push(tok_.token_to_piece(token));
    step.text = std::move(shown.emit);
    if (shown.stopped) {
        step.finish = finished_ = FinishReason::StopString;
    } else if (tokens_ >= options_.max_tokens) {
        auto tail = text_.finish();
        step.text += tail.emit;
        step.finish = finished_ = tail.stopped ? FinishReason::StopString : FinishReason::Length;
    }
    return step;
}

SequenceOutput::Step SequenceOutput::finish(FinishReason why) {
    Step step;
    if (finished_ != FinishReason::None) {
        step.finish = finished_;
        return step;
    }
    auto tail = text_.finish();
    step.text = std::move(tail.emit);
    step.finish = finished_ = tail.stopped ? FinishReason::StopString : why;
    return step;
}

TokenLogprob token_logprob(const Tokenizer& tok, std::span<const float> logits, int32_t token,
                           uint32_t top) {
    // log-softmax in double: the sum of a vocabulary of exponentials.
    const double best = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float v : logits) sum += std::exp(double(v) - best);
    const double log_z = best + std::log(sum);
    TokenLogprob lp;
    lp.token = token;
    lp.piece = tok.token_to_piece(token);
    lp.logprob = static_cast<float>(double(logits[static_cast<size_t>(token)]) - log_z);
    if (top == 0) return lp;
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t k = std::min<size_t>(top, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                      [&](int32_t a, int32_t b) {
                          return logits[size_t(a)] > logits[size_t(b)] ||
                                 (logits[size_t(a)] == logits[size_t(b)] && a < b);
                      });
    for (size_t i = 0; i < k; ++i)
        lp.top.emplace_back(tok.token_to_piece(ids[i]),
                            static_cast<float>(double(logits[size_t(ids[i])]) - log_z));
    return lp;
}

}  // namespace ferrox::output
