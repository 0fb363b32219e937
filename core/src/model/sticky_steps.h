// Steps with a sticky error: the ops of one forward pass are issued one
// after another without a check each; the first failure is kept, every op
// after it is skipped (none runs on the state a failed op left), and the
// pass checks status() once at its end.
//
// Host code inside a pass that reads what an op produced (router scores
// after a download, logits after the output product) asks failed() first:
// after a failure those values were never written.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "ferrox/expected.h"
#include "steps.h"

namespace ferrox::model {

class StickySteps {
  public:
    explicit StickySteps(Steps& steps) : steps_(steps) {}

    bool failed() const { return error_.has_value(); }
    // The first failure, or success.
    Expected<void> status() const {
        if (error_) return *error_;
        return {};
    }
    // Keeps `error` unless an earlier one is kept already.
    void fail(Error error) {
        if (!error_) error_ = std::move(error);
    }
    // Keeps r's error when it failed (host work that returns Expected).
    void check(const Expected<void>& r) {
        if (!r) fail(r.error());
    }

    bool resident() const { return steps_.resident(); }
    bool attends_over_cells() const { return steps_.attends_over_cells(); }

    void upload(std::span<const float> src, Act dst) {
        if (!failed()) check(steps_.upload(src, dst));
    }
    void download(Act src, std::span<float> dst) {
        if (!failed()) check(steps_.download(src, dst));
    }
    void upload_words(std::span<const uint32_t> src, Act dst) {
        if (!failed()) check(steps_.upload_words(src, dst));
    }
    void embed(std::span<const int32_t> ids, float scale, Act out) {
        if (!failed()) check(steps_.embed(ids, scale, out));
    }
    void project(const WeightMatrix& w, std::string_view role, Act x, uint32_t n, Act y) {
        if (!failed()) check(steps_.project(w, role, x, n, y));
    }
    void project_many(std::span<const Projection> products, std::string_view batch_role) {
        if (!failed()) check(steps_.project_many(products, batch_role));
    }
    void rms_norm(std::string_view role, Act x, Act gamma, uint64_t rows, uint32_t dim, float eps,
                  Act y) {
        if (!failed()) check(steps_.rms_norm(role, x, gamma, rows, dim, eps, y));
    }
    void rope(Act x, Act cos, Act sin, uint32_t n_pos, uint32_t n_heads, uint32_t head_dim,
              uint32_t n_rot, RopeStyle style) {
        if (!failed()) check(steps_.rope(x, cos, sin, n_pos, n_heads, head_dim, n_rot, style));
    }
    void add(std::string_view role, Act dst, Act src, uint64_t rows, uint32_t dim,
             uint64_t src_stride, float alpha) {
        if (!failed()) check(steps_.add(role, dst, src, rows, dim, src_stride, alpha));
    }
    void add_rms_norm(std::string_view norm_role, Act dst, Act src, uint64_t src_stride,
                      float alpha, Act gamma, uint64_t rows, uint32_t dim, float eps, Act y) {
        if (!failed())
            check(steps_.add_rms_norm(norm_role, dst, src, src_stride, alpha, gamma, rows, dim, eps,
                                      y));
    }
    void glu(FfnActivation act, Act gate, Act up, uint64_t count) {
        if (!failed()) check(steps_.glu(act, gate, up, count));
    }
    void store_kv(Act rows, Act cache, ferrox_kind kind, uint64_t count) {
        if (!failed()) check(steps_.store_kv(rows, cache, kind, count));
    }
    void attention(const ferrox_attention_desc& desc, Act q, Act keys, Act values, Act out,
                   const Act* sinks) {
        if (!failed()) check(steps_.attention(desc, q, keys, values, out, sinks));
    }
    void attention_cells(const ferrox_attention_cells_desc& desc, Act q, Act k_cache, Act v_cache,
                         Act cell_list, Act spans, Act out, const Act* sinks) {
        if (!failed())
            check(steps_.attention_cells(desc, q, k_cache, v_cache, cell_list, spans, out, sinks));
    }

    void delta_net(const ferrox_delta_net_desc& desc) {
        if (!failed()) check(steps_.delta_net(desc));
    }

  private:
    Steps& steps_;
    std::optional<Error> error_;
};

}  // namespace ferrox::model
