#include "kernels/products.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferrox/quant_kind.h"

namespace ferrox::cpu {
namespace {

constexpr int kTileRows = 4;        // rows per micro-tile
constexpr int kTileActs = 4;        // activations per micro-tile
constexpr uint64_t kGemmRows = 16;  // rows decoded once and reused over all activations
// Below this many activations the panel's interleave costs more than it
// saves (measured: level at 4, 2x faster at 16, slower at 2).
constexpr uint64_t kPanelMinActs = 4;
// Up to this many activations, kinds with a fused MATVEC kernel take it for
// GEMM too (faster than decoding rows first at decode batch sizes; measured
// in docs/cpu.md), and their results equal MATVEC's bit for bit.
constexpr uint64_t kFusedMaxGemmActs = 16;
// The lanes GEMM costs the same for any count up to 16 (its work is per
// weight block); for 2 the per-row fused path is cheaper (Q8_0 262144x640,
// cold, 2 threads: 12.5 vs 13.9 ms), from 3 the lanes (14.2 vs 16.4 ms).
constexpr uint64_t kLaneMinActs = 3;

// Decoded int8 rows for one thread, reused across calls.
class Int8Rows {
  public:
    void reserve(uint64_t count, uint64_t cols) {
        cols_ = cols;
        if (q_.size() < count * cols) q_.resize(count * cols);
        if (scale_.size() < count * cols / 16) {
            scale_.resize(count * cols / 16);
            offset_.resize(count * cols / 16);
        }
    }
    DecodedRow row(uint64_t i) {
        return {q_.data() + i * cols_, scale_.data() + i * cols_ / 16,
                offset_.data() + i * cols_ / 16};
    }

  private:
    uint64_t cols_ = 0;
    std::vector<int8_t> q_;
    std::vector<float> scale_, offset_;
};

// Activations quantized once per call, shared read-only by every thread.
class QuantizedBatch {
  public:
    // `fused`: for w.fused_matvec, whose Q8_K kernels also read the code sums
    // and the nibble-order copy; the other paths go without both (a prefill
    // batch would carry another n * cols bytes for nothing).
    QuantizedBatch(uint64_t n, uint64_t cols, ActFormat format, bool fused)
        : cols_(cols),
          q_(n * cols),
          scale_(n * cols / 16),
          sums_(n * cols / 16),
          code_sum_(fused && format == ActFormat::Q8_K ? n * cols / 16 : 0),
          nibble_order_(fused && format == ActFormat::Q8_K ? n * cols : 0) {}
    QuantizedActs at(uint64_t c) {
        const bool k = !nibble_order_.empty();
        return {q_.data() + c * cols_,
                scale_.data() + c * cols_ / 16,
                sums_.data() + c * cols_ / 16,
                k ? code_sum_.data() + c * cols_ / 16 : nullptr,
                k ? nibble_order_.data() + c * cols_ : nullptr,
                nullptr};
    }

  private:
    uint64_t cols_;
    std::vector<int8_t> q_;
    std::vector<float> scale_, sums_;
    std::vector<int16_t> code_sum_;
    std::vector<int8_t> nibble_order_;
};

// The sum of `count` activation codes: what a weight code offset costs a dot.
int32_t code_sum(const int8_t* q, uint64_t count) {
    int32_t sum = 0;
    for (uint64_t k = 0; k < count; ++k) sum += q[k];
    return sum;
}

// Up to kLaneActs quantized activations in the lanes GEMM's layout. One per
// thread, refilled by each product (a decode step runs hundreds): lanes past
// the call's count are zero, so they add nothing to the lanes in use.
class LaneBatch {
  public:
    static const LaneBatch& of(const QuantizedActs* acts, uint64_t n, uint64_t cols, int offset) {
        thread_local LaneBatch batch;
        batch.fill(acts, n, cols, offset);
        return batch;
    }
    LaneActs view() const { return {codes_.data(), start_.data(), scale_.data()}; }

  private:
    void fill(const QuantizedActs* acts, uint64_t n, uint64_t cols, int offset) {
        codes_.assign(cols / 4 * kLaneActs * 4, 0);
        start_.assign(cols / 32 * kLaneActs, 0);
        scale_.assign(cols / 32 * kLaneActs, 0.0f);
        for (uint64_t a = 0; a < n; ++a) {
            for (uint64_t g = 0; g < cols / 4; ++g)
                for (uint64_t k = 0; k < 4; ++k)
                    codes_[(g * kLaneActs + a) * 4 + k] = acts[a].q[4 * g + k];
            for (uint64_t b = 0; b < cols / 32; ++b) {
                start_[b * kLaneActs + a] = -offset * code_sum(acts[a].q + 32 * b, 32);
                scale_[b * kLaneActs + a] = acts[a].scale[2 * b];
            }
        }
    }

    std::vector<int8_t> codes_;
    std::vector<int32_t> start_;
    std::vector<float> scale_;
};

// One activation's codes regrouped for the pairs MATVEC (PairGroup), whole
// groups of 256 columns, into `groups`; a row's last cols % 256 are read
// from acts.q.
const PairGroup* pair_groups(const QuantizedActs& acts, uint64_t cols, int offset,
                             std::vector<PairGroup>& groups) {
    groups.resize(cols / 256);  // every field is overwritten below
    for (uint64_t g = 0; g < groups.size(); ++g)
        for (uint64_t j = 0; j < 4; ++j)
            for (uint64_t parity = 0; parity < 2; ++parity) {
                const uint64_t blk = 8 * g + 2 * j + parity;
                const int8_t* x = acts.q + 32 * blk;
                PairGroup& to = groups[g];
                std::copy_n(x, 16, (parity ? to.low_odd : to.low_even) + 16 * j);
                std::copy_n(x + 16, 16, (parity ? to.high_odd : to.high_even) + 16 * j);
                const int32_t start = -offset * code_sum(x, 32);
                for (uint64_t twice = 0; twice < 2; ++twice) {
                    to.start[4 * j + 2 * twice + parity] = start;
                    to.scale[4 * j + 2 * twice + parity] = acts.scale[2 * blk];
                }
            }
    return groups.data();
}

// Activations regrouped for the panel GEMM: per `group` columns, the int32
// dot's start value, the scale and the scaled sum.
class PanelBatch {
  public:
    PanelBatch(uint64_t n, uint64_t cols, int group)
        : per_(cols / static_cast<uint64_t>(group)),
          group_(group),
          start_(n * per_),
          scale_(n * per_),
          sums_(n * per_) {}
    // Fills activation c from its quantized form.
    void fill(uint64_t c, const QuantizedActs& a, int code_bias) {
        const uint64_t step = static_cast<uint64_t>(group_ / 16);
        for (uint64_t g = 0; g < per_; ++g) {
            const int32_t codes =
                code_sum(a.q + g * static_cast<uint64_t>(group_), static_cast<uint64_t>(group_));
            float sum = 0.0f;
            for (uint64_t h = 0; h < step; ++h) sum += a.scaled_sum[g * step + h];
            start_[c * per_ + g] = -code_bias * codes;
            scale_[c * per_ + g] = a.scale[g * step];
            sums_[c * per_ + g] = sum;
        }
    }
    PanelActs at(uint64_t c, const QuantizedActs& a) const {
        return {a.q, start_.data() + c * per_, scale_.data() + c * per_, sums_.data() + c * per_};
    }

  private:
    uint64_t per_;
    int group_;
    std::vector<int32_t> start_;
    std::vector<float> scale_, sums_;
};

// One thread's panel, reused across calls.
PanelBuffer panel_scratch(uint64_t cols) {
    thread_local std::vector<uint8_t> q;
    thread_local std::vector<float> scale, offset;
    if (q.size() < kPanelRows * cols) q.resize(kPanelRows * cols);
    if (scale.size() < kPanelRows * cols / 16) {
        scale.resize(kPanelRows * cols / 16);
        offset.resize(kPanelRows * cols / 16);
    }
    return {q.data(), scale.data(), offset.data()};
}

std::vector<float>& float_scratch(uint64_t floats) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    return buffer;
}

Int8Rows& int8_scratch(uint64_t count, uint64_t cols) {
    thread_local Int8Rows rows;
    rows.reserve(count, cols);
    return rows;
}

// Rows per task: enough work to amortise a claim, enough tasks to balance
// (and to let the caller absorb a descheduled worker's share).
uint64_t grain_for(const ThreadPool& pool, uint64_t rows) {
    const uint64_t per_thread = rows / (uint64_t{pool.size()} * 16);
    return (std::clamp<uint64_t>(per_thread, 4, 256) + 3) / 4 * 4;
}

const std::byte* row_bytes_at(const WeightView& w, uint64_t r) { return w.data + r * w.row_bytes; }

// Float rows [r0, r0+count) as pointers: F32 in place, others decoded.
void float_rows(const WeightView& w, uint64_t r0, uint64_t count, float* buffer,
                const float** out) {
    for (uint64_t i = 0; i < count; ++i) {
        const std::byte* src = row_bytes_at(w, r0 + i);
        if (w.kind == FERROX_KIND_F32) {
            out[i] = reinterpret_cast<const float*>(src);
            continue;
        }
        float* dst = buffer + i * w.cols;
        w.float_decode(src, w.blocks_per_row, dst);
        out[i] = dst;
    }
}

bool uses_int8(const WeightView& w) { return w.int8_decode != nullptr; }

// One activation as w's MATVEC reads it: quantized (and regrouped for the
// pairs kernel) on the int8 path, the f32 values themselves otherwise.
struct MatvecAct {
    const float* x = nullptr;
    std::unique_ptr<QuantizedBatch> codes;
    QuantizedActs a{};
    std::vector<PairGroup> groups;
    // What the quantized form depends on besides x: another weight with
    // the same reads the same codes.
    ActFormat format{};
    uint64_t cols = 0;
    bool fused = false, paired = false;
    int offset = 0;

    MatvecAct(const IsaKernels& isa, const WeightView& w, const float* in)
        : x(in), format(w.kernel->acts), cols(w.cols), fused(w.fused_matvec != nullptr) {
        if (!uses_int8(w)) return;
        paired = fused && w.lanes_gemm.pair_groups;
        offset = paired ? w.lanes_gemm.offset : 0;
        codes = std::make_unique<QuantizedBatch>(1, w.cols, format, fused);
        a = codes->at(0);
        isa.quantize_acts(format, x, w.cols, a);
        if (paired) a.pair_groups = pair_groups(a, w.cols, offset, groups);
    }
    bool serves(const WeightView& w, const float* in) const {
        return in == x && uses_int8(w) && codes && w.kernel->acts == format && w.cols == cols &&
               (w.fused_matvec != nullptr) == fused &&
               (fused && w.lanes_gemm.pair_groups) == paired &&
               (paired ? w.lanes_gemm.offset : 0) == offset;
    }
};

// Rows [begin, end) of y = W x, begin a multiple of kTileRows: the one
// place MATVEC's arithmetic is chosen, so a row's bits are the same
// whichever call (matvec, matvec_many) and whichever split ran it.
void matvec_rows(const IsaKernels& isa, const WeightView& w, const MatvecAct& act, float* y,
                 uint64_t begin, uint64_t end) {
    if (w.fused_matvec) {
        // One row per call, so a thread reads one sequential stream
        // (interleaving 4 short rows left the hardware prefetchers behind).
        for (uint64_t r = begin; r < end; ++r)
            w.fused_matvec(row_bytes_at(w, r), w.cols, &act.a, 1, y + r, 0);
        return;
    }
    if (uses_int8(w)) {
        Int8Rows& buf = int8_scratch(kTileRows, w.cols);
        for (uint64_t r = begin; r < end; r += kTileRows) {
            const uint64_t count = std::min<uint64_t>(kTileRows, end - r);
            DecodedRow rows[kTileRows];
            for (uint64_t i = 0; i < count; ++i) {
                rows[i] = buf.row(i);
                w.int8_decode(row_bytes_at(w, r + i), w.blocks_per_row, rows[i]);
            }
            isa.int8_tile(rows, static_cast<int>(count), &act.a, 1, w.cols, y + r, 1);
        }
        return;
    }
    float* buffer = float_scratch(kTileRows * w.cols).data();
    for (uint64_t r = begin; r < end; r += kTileRows) {
        const uint64_t count = std::min<uint64_t>(kTileRows, end - r);
        const float* rows[kTileRows];
        float_rows(w, r, count, buffer, rows);
        isa.float_tile(rows, static_cast<int>(count), act.x, 1, w.cols, y + r, 1);
    }
}

// The n activations at x quantized for w's kernel into `acts`, one view each.
std::vector<QuantizedActs> quantize_each(const IsaKernels& isa, const WeightView& w, const float* x,
                                         uint64_t n, QuantizedBatch& acts) {
    std::vector<QuantizedActs> views(n);
    for (uint64_t c = 0; c < n; ++c) {
        views[c] = acts.at(c);
        isa.quantize_acts(w.kernel->acts, x + c * w.cols, w.cols, views[c]);
    }
    return views;
}

}  // namespace

WeightView make_view(const IsaKernels& isa, ferrox_kind kind, uint64_t rows, uint64_t cols,
                     uint64_t row_bytes, const std::byte* data) {
    // The kernel kernel_for() names is the one that runs: every kind the core
    // knows has a row, and every row its decoder on every ISA (static_asserts
    // in kernel_table.h and isa_kernels_impl.inc). An id without a row never
    // gets here (weight_prepare refuses it); were it to, it is an error, not
    // a quiet slow path.
    const CpuKernel* kernel = find_kernel(kind);
    if (!kernel)
        throw std::invalid_argument("cpu: no kernel for GGML kind " +
                                    std::to_string(static_cast<unsigned>(kind)));
    WeightView v{kind, rows, cols, row_bytes, data, kernel, 0};
    v.blocks_per_row = cols / kind_traits(static_cast<uint32_t>(kind))->block_elements;
    if (kernel->path == DataPath::Int8) {
        v.int8_decode = isa.int8_decoder(kind);
        v.fused_matvec = isa.fused_matvec(kind);
        if (v.fused_matvec) v.lanes_gemm = isa.lanes_gemm(kind);
    } else {
        v.float_decode = isa.float_decoder(kind);
    }
    return v;
}

void matvec(ThreadPool& pool, const IsaKernels& isa, const WeightView& w, const float* x,
            float* y) {
    const MatvecAct act(isa, w, x);
    pool.parallel_for(w.rows, grain_for(pool, w.rows), [&](uint64_t begin, uint64_t end) {
        matvec_rows(isa, w, act, y, begin, end);
    });
}

void matvec_many(ThreadPool& pool, const IsaKernels& isa, std::span<const MatvecTask> tasks) {
    // Each activation quantized once, however many weights read it alike
    // (a token's gate and up products of every expert read one row).
    std::vector<std::unique_ptr<MatvecAct>> prepared;
    std::vector<const MatvecAct*> act(tasks.size());
    uint64_t rows = 0;
    for (size_t t = 0; t < tasks.size(); ++t) {
        const MatvecTask& task = tasks[t];
        rows += task.w->rows;
        for (const auto& p : prepared)
            if (p->serves(*task.w, task.x)) act[t] = p.get();
        if (act[t]) continue;
        prepared.push_back(std::make_unique<MatvecAct>(isa, *task.w, task.x));
        act[t] = prepared.back().get();
    }
    // All the rows as one job of chunks, `grain` rows of one task each
    // (grain_for's multiple of kTileRows, so tiles start where matvec's do):
    // chunk c belongs to the task whose first chunk is the last <= c.
    const uint64_t grain = grain_for(pool, rows);
    std::vector<uint64_t> first(tasks.size() + 1, 0);
    for (size_t t = 0; t < tasks.size(); ++t)
        first[t + 1] = first[t] + (tasks[t].w->rows + grain - 1) / grain;
    pool.parallel_for(first.back(), 1, [&](uint64_t begin, uint64_t end) {
        for (uint64_t c = begin; c < end; ++c) {
            const auto t = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), c) -
                                               first.begin() - 1);
            const WeightView& w = *tasks[t].w;
            const uint64_t r0 = (c - first[t]) * grain;
            matvec_rows(isa, w, *act[t], tasks[t].y, r0, std::min(w.rows, r0 + grain));
        }
    });
}

void gemm(ThreadPool& pool, const IsaKernels& isa, const WeightView& w, const float* x, uint64_t n,
          float* y) {
    if (n == 0) return;
    if (w.lanes_gemm.gemm && n >= kLaneMinActs && n <= static_cast<uint64_t>(kLaneActs)) {
        // Decode-sized batches of the 32-weight kinds: all activations in the
        // lanes of one vector, each weight block read once for all of them;
        // every result is the MATVEC's to the bit (batch invariance).
        QuantizedBatch acts(n, w.cols, w.kernel->acts, false);
        const std::vector<QuantizedActs> views = quantize_each(isa, w, x, n, acts);
        const LaneBatch& lanes = LaneBatch::of(views.data(), n, w.cols, w.lanes_gemm.offset);
        pool.parallel_for(w.rows, grain_for(pool, w.rows), [&](uint64_t begin, uint64_t end) {
            w.lanes_gemm.gemm(row_bytes_at(w, begin), w.row_bytes, end - begin, w.cols,
                              lanes.view(), static_cast<int>(n), y + begin, w.rows);
        });
        return;
    }
    if (w.fused_matvec && n <= kFusedMaxGemmActs) {
        // Decode-sized batches: each row is read once for up to kFusedMaxActs
        // activations (again, from cache, for the next ones), and every
        // result is the MATVEC's to the bit, so a sequence's step does not
        // depend on how many others share the batch.
        QuantizedBatch acts(n, w.cols, w.kernel->acts, true);
        const std::vector<QuantizedActs> views = quantize_each(isa, w, x, n, acts);
        pool.parallel_for(w.rows, grain_for(pool, w.rows), [&](uint64_t begin, uint64_t end) {
            for (uint64_t r = begin; r < end; ++r)
                for (uint64_t c = 0; c < n; c += kFusedMaxActs) {
                    const int count = static_cast<int>(std::min<uint64_t>(kFusedMaxActs, n - c));
                    w.fused_matvec(row_bytes_at(w, r), w.cols, views.data() + c, count,
                                   y + c * w.rows + r, w.rows);
                }
        });
        return;
    }
    const uint64_t tiles = (w.rows + kGemmRows - 1) / kGemmRows;
    const PanelGemmInfo panel =
        uses_int8(w) && n >= kPanelMinActs ? isa.panel_gemm(w.kind) : PanelGemmInfo{};
    if (panel.gemm) {
        QuantizedBatch acts(n, w.cols, w.kernel->acts, false);
        PanelBatch regrouped(n, w.cols, panel.group);
        pool.parallel_for(n, 8, [&](uint64_t begin, uint64_t end) {
            for (uint64_t c = begin; c < end; ++c) {
                isa.quantize_acts(w.kernel->acts, x + c * w.cols, w.cols, acts.at(c));
                regrouped.fill(c, acts.at(c), panel.code_bias);
            }
        });
        std::vector<PanelActs> views(n);
        for (uint64_t c = 0; c < n; ++c) views[c] = regrouped.at(c, acts.at(c));
        const uint64_t panels = (w.rows + kPanelRows - 1) / kPanelRows;
        const PanelGemm run = w.kernel->acts == ActFormat::Q8_K && panel.gemm_scale256
                                  ? panel.gemm_scale256
                                  : panel.gemm;
        pool.parallel_for(panels, 1, [&](uint64_t begin, uint64_t end) {
            Int8Rows& buf = int8_scratch(kPanelRows, w.cols);
            const PanelBuffer scratch = panel_scratch(w.cols);
            for (uint64_t t = begin; t < end; ++t) {
                const uint64_t r0 = t * kPanelRows;
                const uint64_t count = std::min<uint64_t>(kPanelRows, w.rows - r0);
                DecodedRow rows[kPanelRows];
                for (uint64_t i = 0; i < count; ++i) {
                    rows[i] = buf.row(i);
                    w.int8_decode(row_bytes_at(w, r0 + i), w.blocks_per_row, rows[i]);
                }
                run(rows, static_cast<int>(count), views.data(), n, w.cols, y + r0, w.rows,
                    scratch);
            }
        });
        return;
    }
    if (uses_int8(w)) {
        QuantizedBatch acts(n, w.cols, w.kernel->acts, false);
        pool.parallel_for(n, 8, [&](uint64_t begin, uint64_t end) {
            for (uint64_t c = begin; c < end; ++c)
                isa.quantize_acts(w.kernel->acts, x + c * w.cols, w.cols, acts.at(c));
        });
        pool.parallel_for(tiles, 1, [&](uint64_t begin, uint64_t end) {
            Int8Rows& buf = int8_scratch(kGemmRows, w.cols);
            for (uint64_t t = begin; t < end; ++t) {
                const uint64_t r0 = t * kGemmRows;
                const uint64_t count = std::min(kGemmRows, w.rows - r0);
                DecodedRow rows[kGemmRows];
                for (uint64_t i = 0; i < count; ++i) {
                    rows[i] = buf.row(i);
                    w.int8_decode(row_bytes_at(w, r0 + i), w.blocks_per_row, rows[i]);
                }
                for (uint64_t c = 0; c < n; c += kTileActs) {
                    QuantizedActs a[kTileActs];
                    const uint64_t nc = std::min<uint64_t>(kTileActs, n - c);
                    for (uint64_t j = 0; j < nc; ++j) a[j] = acts.at(c + j);
                    for (uint64_t r = 0; r < count; r += kTileRows) {
                        const uint64_t nr = std::min<uint64_t>(kTileRows, count - r);
                        isa.int8_tile(rows + r, static_cast<int>(nr), a, static_cast<int>(nc),
                                      w.cols, y + c * w.rows + r0 + r, w.rows);
                    }
                }
            }
        });
        return;
    }
    pool.parallel_for(tiles, 1, [&](uint64_t begin, uint64_t end) {
        float* buffer = float_scratch(kGemmRows * w.cols).data();
        for (uint64_t t = begin; t < end; ++t) {
            const uint64_t r0 = t * kGemmRows;
            const uint64_t count = std::min(kGemmRows, w.rows - r0);
            const float* rows[kGemmRows];
            float_rows(w, r0, count, buffer, rows);
            for (uint64_t c = 0; c < n; c += kTileActs) {
                const uint64_t nc = std::min<uint64_t>(kTileActs, n - c);
                for (uint64_t r = 0; r < count; r += kTileRows) {
                    const uint64_t nr = std::min<uint64_t>(kTileRows, count - r);
                    isa.float_tile(rows + r, static_cast<int>(nr), x + c * w.cols,
                                   static_cast<int>(nc), w.cols, y + c * w.rows + r0 + r, w.rows);
                }
            }
        }
    });
}

}  // namespace ferrox::cpu
