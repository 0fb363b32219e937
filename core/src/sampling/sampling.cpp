#include "ferrox/sampling.h"

#include <algorithm>
#include <cmath>

namespace ferrox {

Sampler::Sampler(SamplerParams params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() {
    // 53 random bits: the same doubles for a seed whatever the standard library.
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void Sampler::apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> history,
                                   float penalty, uint32_t last_n) {
    if (penalty == 1.0f || last_n == 0) return;
    const size_t from = history.size() > last_n ? history.size() - last_n : 0;
    std::vector<int32_t> seen(history.begin() + static_cast<std::ptrdiff_t>(from), history.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
        if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
        float& l = logits[static_cast<size_t>(id)];
        l = l > 0 ? l / penalty : l * penalty;
    }
}

void Sampler::keep_top_k(std::vector<Candidate>& c, uint32_t k) {
    if (k == 0 || k >= c.size()) return;
    c.resize(k);
}

void Sampler::softmax(std::vector<Candidate>& c) {
    if (c.empty()) return;
    const float max = c.front().logit;
    double sum = 0;
    for (auto& x : c) sum += static_cast<double>(x.p = std::exp(x.logit - max));
    for (auto& x : c) x.p = static_cast<float>(static_cast<double>(x.p) / sum);
}

void Sampler::keep_top_p(std::vector<Candidate>& c, float p) {
    if (p >= 1.0f) return;
    double cum = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        cum += static_cast<double>(c[i].p);
        if (cum >= static_cast<double>(p)) {
            c.resize(i + 1);  // the smallest prefix whose mass reaches p
            return;
        }
    }
}

void Sampler::keep_min_p(std::vector<Candidate>& c, float min_p) {
    if (min_p <= 0.0f || c.empty()) return;
    const float floor = min_p * c.front().p;
    size_t keep = 1;
    while (keep < c.size() && c[keep].p >= floor) ++keep;
    c.resize(keep);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
    work_.assign(logits.begin(), logits.end());
    apply_repeat_penalty(work_, history, params_.repeat_penalty, params_.repeat_last_n);
    if (params_.temperature <= 0.0f) return argmax(work_);

    candidates_.resize(work_.size());
    for (size_t i = 0; i < work_.size(); ++i)
        candidates_[i] = {static_cast<int32_t>(i), work_[i], 0.0f};
    // Highest first; ties by id so the order (and the draw) is deterministic.
    auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    };
    const size_t k =
        params_.top_k ? std::min<size_t>(params_.top_k, candidates_.size()) : candidates_.size();
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k),
                      candidates_.end(), by_logit);
    keep_top_k(candidates_, static_cast<uint32_t>(k));
    for (auto& c : candidates_) c.logit /= params_.temperature;
    softmax(candidates_);
    keep_top_p(candidates_, params_.top_p);
    keep_min_p(candidates_, params_.min_p);

    double total = 0;
    for (const auto& c : candidates_) total += static_cast<double>(c.p);
    double r = uniform() * total;
    for (const auto& c : candidates_) {
        r -= static_cast<double>(c.p);
        if (r < 0) return c.id;
    }
    return candidates_.back().id;
}

StopMatch find_stop(std::string_view text, std::span<const std::string> stops) {
    StopMatch m;
    for (const auto& stop : stops) {
        if (stop.empty()) continue;
        const size_t at = text.find(stop);
        if (at != std::string_view::npos) m.found = std::min(m.found, at);
        // A suffix of text that is a proper prefix of the stop might still complete it.
        for (size_t len = std::min(stop.size() - 1, text.size()); len > 0; --len)
            if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
                m.hold = std::max(m.hold, len);
                break;
            }
    }
    return m;
}

}  // namespace ferrox
