// The resident fixture (libferrox_resident.so), loaded through the real
// loader: every ABI 1.2 entry against model::ops and the quant reference, its
// bounds checks, and its fault option, which must really change each op's
// result (model tests rely on it to prove a parity check can fail).
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>

#include "ferrox/model/ops.h"
#include "ferrox/model/rope_tables.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "plugin_env.h"
#include "random_data.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

constexpr uint64_t kSlack = 64;  // bytes before and after each tensor in its buffer

// The fixture loaded alone, with `options` as its YAML section; the tensors
// and weights a test makes are freed before the backend.
struct Rig {
    TempDir dir;
    PluginSet plugins;
    std::shared_ptr<Backend> backend;
    ferrox_backend* b = nullptr;
    std::vector<ferrox_buffer*> buffers;
    std::vector<ferrox_weight*> weights;

    explicit Rig(std::string_view options = "") {
        install_plugin(fixture("resident"), dir.path());
        plugins = PluginSet::load(
            config_from(fmt::format("backends: {{order: [resident]}}\nresident: {{{}}}", options)),
            only_folder(dir.path()));
        INFO(record_of(plugins, "resident").reason);
        REQUIRE(plugins.selected().size() == 1);
        backend = plugins.selected()[0];
        // The core owns the table; the entries take it non-const.
        b = const_cast<ferrox_backend*>(&backend->raw());
    }
    ~Rig() {
        for (auto* w : weights) b->weight_release(b, w);
        for (auto* p : buffers) b->buffer_free(b, p);
    }
    Rig(const Rig&) = delete;
    Rig& operator=(const Rig&) = delete;

    ferrox_buffer* alloc(uint64_t bytes) {
        ferrox_buffer* p = nullptr;
        ferrox_message m{};
        REQUIRE(b->buffer_alloc(b, bytes, &p, &m) == FERROX_OK);
        buffers.push_back(p);
        return p;
    }
    // `bytes` of room at offset kSlack, never written: the fixture poisons it.
    ferrox_tensor room(uint64_t bytes) { return {alloc(kSlack + bytes + kSlack), kSlack}; }
    template <class T>
    ferrox_tensor put(const std::vector<T>& v) {
        const ferrox_tensor t = room(v.size() * sizeof(T));
        ferrox_message m{};
        REQUIRE(b->buffer_upload(b, t.buffer, t.offset, v.data(), v.size() * sizeof(T), &m) ==
                FERROX_OK);
        return t;
    }
    template <class T = float>
    std::vector<T> get(ferrox_tensor t, size_t n) {
        std::vector<T> v(n);
        ferrox_message m{};
        REQUIRE(b->buffer_download(b, t.buffer, t.offset, v.data(), n * sizeof(T), &m) ==
                FERROX_OK);
        return v;
    }
    ferrox_weight* weight(ferrox_kind kind, uint64_t rows, uint64_t cols,
                          const std::vector<std::byte>& bytes, bool borrow) {
        ferrox_weight_desc d{};
        d.struct_size = sizeof d;
        d.abi_version = FERROX_ABI_VERSION;
        d.kind = kind;
        d.rows = rows;
        d.cols = cols;
        d.row_bytes = *ferrox::row_bytes(kind, cols);
        d.data = bytes.data();
        ferrox_weight* w = nullptr;
        ferrox_message m{};
        INFO(m.text);
        REQUIRE(b->weight_prepare(b, &d, borrow ? 1 : 0, &w, &m) == FERROX_OK);
        weights.push_back(w);
        return w;
    }
};

void require_ok(ferrox_status s, const ferrox_message& m) {
    INFO(m.text);
    REQUIRE(s == FERROX_OK);
}

// Random rows of `kind` (quantized from Gaussian floats).
std::vector<std::byte> random_rows(ferrox_kind kind, uint64_t rows, uint64_t cols,
                                   std::mt19937_64& rng) {
    const uint64_t rb = *ferrox::row_bytes(kind, cols);
    std::vector<std::byte> bytes(rows * rb);
    const auto values = gaussian(rows * cols, rng);
    for (uint64_t r = 0; r < rows; ++r)
        REQUIRE(quant::quantize_row(kind, values.data() + r * cols, bytes.data() + r * rb, cols));
    return bytes;
}

struct Result {
    std::vector<float> got, want;
};

Result case_rms_norm(Rig& rig, bool in_place) {
    std::mt19937_64 rng(test_seed(11));
    const uint64_t rows = 3;
    const uint32_t dim = 64;
    const auto x = gaussian(rows * dim, rng, 3.0f);
    const auto gamma = gaussian(dim, rng);
    const ferrox_tensor tx = rig.put(x), tg = rig.put(gamma);
    const ferrox_tensor ty = in_place ? tx : rig.room(rows * dim * 4);
    ferrox_message m{};
    require_ok(rig.b->rms_norm(rig.b, tx, tg, rows, dim, 1e-5f, ty, &m), m);
    Result r{rig.get(ty, rows * dim), std::vector<float>(rows * dim)};
    for (uint64_t i = 0; i < rows; ++i)
        model::ops::rms_norm({x.data() + i * dim, dim}, gamma, 1e-5f,
                             {r.want.data() + i * dim, dim});
    return r;
}

Result case_rope(Rig& rig, bool neox) {
    std::mt19937_64 rng(test_seed(12));
    const uint32_t n_pos = 3, n_heads = 4, head_dim = 16, half = head_dim / 2;
    auto x = gaussian(size_t{n_pos} * n_heads * head_dim, rng);
    std::vector<float> cos(n_pos * half), sin(n_pos * half);
    for (uint32_t p = 0; p < n_pos; ++p)
        model::ops::rope_angles(7 + p, 10000.0f, 1.0f, {cos.data() + p * half, half},
                                {sin.data() + p * half, half});
    const ferrox_tensor tx = rig.put(x), tc = rig.put(cos), ts = rig.put(sin);
    ferrox_message m{};
    require_ok(rig.b->rope(rig.b, tx, tc, ts, n_pos, n_heads, head_dim, neox ? 1 : 0, &m), m);
    Result r{rig.get(tx, x.size()), x};
    const auto style = neox ? model::RopeStyle::Neox : model::RopeStyle::Normal;
    for (uint32_t p = 0; p < n_pos; ++p)
        for (uint32_t h = 0; h < n_heads; ++h)
            model::ops::rope_rotate({r.want.data() + (p * n_heads + h) * head_dim, head_dim},
                                    {cos.data() + p * half, half}, {sin.data() + p * half, half},
                                    style);
    return r;
}

// Partial rotary through the whole-head entry: n_rot = 6 of head_dim 16, adjacent
// pairs, with the core's angle tables (cos 1, sin 0 past n_rot / 2). The want is
// the formula itself: dims 0..5 rotate by pos * 10000^(-2i / 6), the rest stay.
Result case_rope_prefix(Rig& rig) {
    std::mt19937_64 rng(test_seed(19));
    const uint32_t n_pos = 3, n_heads = 2, head_dim = 16, half = head_dim / 2, n_rot = 6;
    auto x = gaussian(size_t{n_pos} * n_heads * head_dim, rng);
    model::Hparams hp;
    hp.n_rot = n_rot;
    hp.head_dim_k = head_dim;
    std::vector<float> cos(n_pos * half), sin(n_pos * half);
    model::rope_table(model::rope_spec(hp, {}, false), 40, n_pos, half, cos, sin);
    const ferrox_tensor tx = rig.put(x), tc = rig.put(cos), ts = rig.put(sin);
    ferrox_message m{};
    require_ok(rig.b->rope(rig.b, tx, tc, ts, n_pos, n_heads, head_dim, 0, &m), m);
    Result r{rig.get(tx, x.size()), x};
    for (uint32_t p = 0; p < n_pos; ++p)
        for (uint32_t h = 0; h < n_heads; ++h) {
            float* head = r.want.data() + (p * n_heads + h) * head_dim;
            for (uint32_t i = 0; i < n_rot / 2; ++i) {
                const double theta = (40.0 + p) * std::pow(10000.0, -2.0 * i / n_rot);
                const double a = head[2 * i], b = head[2 * i + 1];
                head[2 * i] = static_cast<float>(a * std::cos(theta) - b * std::sin(theta));
                head[2 * i + 1] = static_cast<float>(a * std::sin(theta) + b * std::cos(theta));
            }
        }
    return r;
}

// stride_pad 0: a broadcast bias (src_stride 0); else rows of dim + pad.
Result case_add(Rig& rig, uint64_t stride_pad) {
    std::mt19937_64 rng(test_seed(13));
    const uint64_t rows = 3;
    const uint32_t dim = 48;
    const uint64_t stride = stride_pad ? dim + stride_pad : 0;
    const float alpha = stride_pad ? 1.0f : 0.5f;
    const auto dst = gaussian(rows * dim, rng);
    const auto src = gaussian(stride ? rows * stride : dim, rng);
    const ferrox_tensor td = rig.put(dst), ts = rig.put(src);
    ferrox_message m{};
    require_ok(rig.b->add(rig.b, td, ts, rows, dim, stride, alpha, &m), m);
    Result r{rig.get(td, dst.size()), dst};
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t j = 0; j < dim; ++j) r.want[i * dim + j] += alpha * src[i * stride + j];
    return r;
}

Result case_glu(Rig& rig, ferrox_glu_kind kind) {
    std::mt19937_64 rng(test_seed(14));
    const uint64_t count = 300;
    const auto gate = gaussian(count, rng, 4.0f);  // wide enough to reach GEGLU's +-10 limits
    const auto up = gaussian(count, rng);
    const ferrox_tensor tg = rig.put(gate), tu = rig.put(up);
    ferrox_message m{};
    require_ok(rig.b->glu(rig.b, kind, tg, tu, count, &m), m);
    Result r{rig.get(tg, count), gate};
    model::ops::glu(
        r.want, up,
        kind == FERROX_GLU_SWIGLU ? model::FfnActivation::Silu : model::FfnActivation::GeluTanh);
    return r;
}

Result case_convert(Rig& rig, ferrox_kind kind) {
    std::mt19937_64 rng(test_seed(15));
    const uint64_t count = 77;
    const auto src = gaussian(count, rng);
    const ferrox_tensor ts = rig.put(src);
    const ferrox_tensor td = rig.room(count * (kind == FERROX_KIND_F16 ? 2 : 4));
    ferrox_message m{};
    require_ok(rig.b->convert(rig.b, ts, td, kind, count, &m), m);
    Result r{{}, src};
    if (kind == FERROX_KIND_F32) {
        r.got = rig.get(td, count);
        return r;
    }
    for (uint16_t h : rig.get<uint16_t>(td, count)) r.got.push_back(quant::fp16_to_fp32(h));
    for (float& v : r.want) v = quant::fp16_to_fp32(quant::fp32_to_fp16(v));
    return r;
}

Result case_get_rows(Rig& rig, ferrox_kind kind) {
    std::mt19937_64 rng(test_seed(16));
    const uint64_t rows = 6, cols = 256;
    const auto bytes = random_rows(kind, rows, cols, rng);
    const ferrox_weight* w = rig.weight(kind, rows, cols, bytes, false);
    const std::vector<int32_t> ids{3, 0, 5, 3};
    const float scale = 0.7f;
    const ferrox_tensor out = rig.room(ids.size() * cols * 4);
    ferrox_message m{};
    require_ok(rig.b->get_rows(rig.b, w, ids.data(), ids.size(), scale, out, &m), m);
    Result r{rig.get(out, ids.size() * cols), std::vector<float>(ids.size() * cols)};
    const uint64_t rb = *ferrox::row_bytes(kind, cols);
    for (size_t i = 0; i < ids.size(); ++i) {
        float* row = r.want.data() + i * cols;
        REQUIRE(quant::dequantize_row(kind, bytes.data() + static_cast<size_t>(ids[i]) * rb, row,
                                      cols));
        for (uint64_t c = 0; c < cols; ++c) row[c] *= scale;
    }
    return r;
}

Result case_attention(Rig& rig, ferrox_kind kv_kind, uint32_t window) {
    std::mt19937_64 rng(test_seed(17));
    const uint32_t n_head = 4, n_head_kv = 2, dk = 16, dv = 8, pos0 = 5, n_query = 3;
    const uint32_t positions = pos0 + n_query;
    const auto q = gaussian(size_t{n_query} * n_head * dk, rng);
    auto keys = gaussian(size_t{positions} * n_head_kv * dk, rng);
    auto values = gaussian(size_t{positions} * n_head_kv * dv, rng);
    ferrox_tensor tk{}, tv{};
    if (kv_kind == FERROX_KIND_F16) {
        // The reference sees exactly what the cache holds.
        std::vector<uint16_t> hk, hv;
        for (float& v : keys) v = quant::fp16_to_fp32(hk.emplace_back(quant::fp32_to_fp16(v)));
        for (float& v : values) v = quant::fp16_to_fp32(hv.emplace_back(quant::fp32_to_fp16(v)));
        tk = rig.put(hk);
        tv = rig.put(hv);
    } else {
        tk = rig.put(keys);
        tv = rig.put(values);
    }
    ferrox_attention_desc d{};
    d.struct_size = sizeof d;
    d.abi_version = FERROX_ABI_VERSION;
    d.n_query = n_query;
    d.pos0 = pos0;
    d.window = window;
    d.n_head = n_head;
    d.n_head_kv = n_head_kv;
    d.head_dim_k = dk;
    d.head_dim_v = dv;
    d.scale = 0.25f;
    d.kv_kind = d.value_kind = kv_kind;
    const ferrox_tensor tq = rig.put(q), to = rig.room(size_t{n_query} * n_head * dv * 4);
    ferrox_message m{};
    require_ok(rig.b->attention_resident(rig.b, &d, tq, tk, tv, to, &m), m);
    Result r{rig.get(to, size_t{n_query} * n_head * dv),
             std::vector<float>(size_t{n_query} * n_head * dv)};
    const model::ops::AttentionShape shape{n_head, n_head_kv, dk, dv, d.scale};
    std::vector<float> scores(positions);
    for (uint32_t i = 0; i < n_query; ++i) {
        const uint32_t pos = pos0 + i;
        const uint32_t first = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
        model::ops::attend(shape, {q.data() + size_t{i} * n_head * dk, size_t{n_head} * dk},
                           keys.data(), values.data(), first, pos, scores,
                           {r.want.data() + size_t{i} * n_head * dv, size_t{n_head} * dv});
    }
    return r;
}

// attention_cells over a cache of `n_cells` rows whose cells are scrambled:
// `n_seq` sequences of a few positions each, their cells interleaved (as
// decode steps of several sequences take cells), each sequence's query rows
// at its last `rows` positions. The reference: ops::attend over each row's
// visible cells gathered in position order.
Result case_attention_cells(Rig& rig, ferrox_kind kv_kind, uint32_t window, uint32_t n_seq) {
    std::mt19937_64 rng(test_seed(19));
    const uint32_t n_head = 4, n_head_kv = 2, dk = 16, dv = 8, length = 9, rows = 3;
    const uint32_t n_cells = n_seq * length + 5;  // a few cells no sequence holds
    const uint64_t k_row = uint64_t{n_head_kv} * dk, v_row = uint64_t{n_head_kv} * dv;
    auto keys = gaussian(n_cells * k_row, rng);
    auto values = gaussian(n_cells * v_row, rng);
    ferrox_tensor tk{}, tv{};
    if (kv_kind == FERROX_KIND_F16) {
        std::vector<uint16_t> hk, hv;
        for (float& v : keys) v = quant::fp16_to_fp32(hk.emplace_back(quant::fp32_to_fp16(v)));
        for (float& v : values) v = quant::fp16_to_fp32(hv.emplace_back(quant::fp32_to_fp16(v)));
        tk = rig.put(hk);
        tv = rig.put(hv);
    } else {
        tk = rig.put(keys);
        tv = rig.put(values);
    }
    // Sequence s's position p sits in cell order[s * length + p], order a
    // random permutation of the cells.
    std::vector<uint32_t> order(n_cells);
    for (uint32_t c = 0; c < n_cells; ++c) order[c] = c;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<uint32_t> cell_index, spans;
    uint32_t max_span = 0;
    const uint32_t n_query = n_seq * rows;
    for (uint32_t seq = 0; seq < n_seq; ++seq) {
        const auto base = static_cast<uint32_t>(cell_index.size());
        for (uint32_t p = 0; p < length; ++p) cell_index.push_back(order[seq * length + p]);
        for (uint32_t r = 0; r < rows; ++r) {
            const uint32_t pos = length - rows + r;
            const uint32_t first = window && pos + 1 > window ? pos + 1 - window : 0;
            spans.push_back(base + first);
            spans.push_back(base + pos + 1);
            max_span = std::max(max_span, pos + 1 - first);
        }
    }
    const auto q = gaussian(size_t{n_query} * n_head * dk, rng);
    ferrox_attention_cells_desc d{};
    d.struct_size = sizeof d;
    d.abi_version = FERROX_ABI_VERSION;
    d.n_query = n_query;
    d.n_head = n_head;
    d.n_head_kv = n_head_kv;
    d.head_dim_k = dk;
    d.head_dim_v = dv;
    d.scale = 0.25f;
    d.kv_kind = d.value_kind = kv_kind;
    d.n_cells = n_cells;
    d.n_index = static_cast<uint32_t>(cell_index.size());
    d.max_span = max_span;
    const ferrox_tensor tq = rig.put(q), ti = rig.put(cell_index), ts = rig.put(spans);
    const ferrox_tensor to = rig.room(size_t{n_query} * n_head * dv * 4);
    ferrox_message m{};
    require_ok(rig.b->attention_cells(rig.b, &d, tq, tk, tv, ti, ts, to, &m), m);
    Result r{rig.get(to, size_t{n_query} * n_head * dv),
             std::vector<float>(size_t{n_query} * n_head * dv)};
    const model::ops::AttentionShape shape{n_head, n_head_kv, dk, dv, d.scale};
    for (uint32_t i = 0; i < n_query; ++i) {
        std::vector<float> k, v;
        for (uint32_t j = spans[2 * i]; j < spans[2 * i + 1]; ++j) {
            const uint32_t cell = cell_index[j];
            k.insert(k.end(), keys.begin() + cell * k_row, keys.begin() + (cell + 1) * k_row);
            v.insert(v.end(), values.begin() + cell * v_row, values.begin() + (cell + 1) * v_row);
        }
        std::vector<float> scores(spans[2 * i + 1] - spans[2 * i]);
        model::ops::attend(shape, {q.data() + size_t{i} * n_head * dk, size_t{n_head} * dk},
                           k.data(), v.data(), 0, static_cast<uint32_t>(scores.size() - 1), scores,
                           {r.want.data() + size_t{i} * n_head * dv, size_t{n_head} * dv});
    }
    return r;
}

enum class Product { Matvec, Gemm, Project };

Result case_project(Rig& rig, ferrox_kind kind, uint64_t n, Product via = Product::Project) {
    std::mt19937_64 rng(test_seed(18));
    const uint64_t rows = 7, cols = 512;
    auto bytes = random_rows(kind, rows, cols, rng);
    const auto x = gaussian(n * cols, rng);
    Result r{std::vector<float>(n * rows, NAN), std::vector<float>(n * rows)};
    const uint64_t rb = *ferrox::row_bytes(kind, cols);
    for (uint64_t j = 0; j < n; ++j)
        for (uint64_t i = 0; i < rows; ++i)
            r.want[j * rows + i] =
                quant::dot_row(kind, bytes.data() + i * rb, x.data() + j * cols, cols);
    const ferrox_weight* w = rig.weight(kind, rows, cols, bytes, false);
    // Copied, not borrowed: the host bytes may change under the handle.
    std::fill(bytes.begin(), bytes.end(), std::byte{0});
    ferrox_message m{};
    if (via == Product::Matvec) {
        REQUIRE(n == 1);
        require_ok(rig.b->matvec(rig.b, w, x.data(), r.got.data(), &m), m);
    } else if (via == Product::Gemm) {
        require_ok(rig.b->gemm(rig.b, w, x.data(), n, r.got.data(), &m), m);
    } else {
        const ferrox_tensor tx = rig.put(x), ty = rig.room(n * rows * 4);
        require_ok(rig.b->project(rig.b, w, tx, n, ty, &m), m);
        r.got = rig.get(ty, n * rows);
    }
    return r;
}

// One case per fault option, with the op it breaks; `also` names another
// fault that breaks the same case (the attention fault breaks both entries).
struct FaultCase {
    const char* fault;
    std::function<Result(Rig&)> run;
    const char* also = "";
};
const std::vector<FaultCase>& fault_cases() {
    static const std::vector<FaultCase> cases{
        {"rms_norm", [](Rig& r) { return case_rms_norm(r, false); }},
        {"rope", [](Rig& r) { return case_rope(r, true); }},
        {"add", [](Rig& r) { return case_add(r, 0); }},
        {"glu", [](Rig& r) { return case_glu(r, FERROX_GLU_SWIGLU); }},
        {"convert", [](Rig& r) { return case_convert(r, FERROX_KIND_F16); }},
        {"get_rows", [](Rig& r) { return case_get_rows(r, FERROX_KIND_Q8_0); }},
        {"attention", [](Rig& r) { return case_attention(r, FERROX_KIND_F32, 0); }},
        {"project", [](Rig& r) { return case_project(r, FERROX_KIND_Q4_K, 1); }},
        // One sequence: the attention fault shows, the leak cannot.
        {"attention", [](Rig& r) { return case_attention_cells(r, FERROX_KIND_F32, 0, 1); }},
        {"seq_leak", [](Rig& r) { return case_attention_cells(r, FERROX_KIND_F32, 0, 3); },
         "attention"},
    };
    return cases;
}

}  // namespace

TEST_CASE("the resident fixture loads as a GPU backend with every ABI 1.3 entry") {
    Rig rig("memory_total: 1000000, memory_free: 600000");
    const auto& rec = record_of(rig.plugins, "resident");
    REQUIRE(rec.devices.size() == 1);
    CHECK(rec.devices[0].type == FERROX_DEVICE_GPU);
    CHECK(rec.devices[0].name == "resident host fixture");
    CHECK(rec.devices[0].memory_total == 1000000);
    CHECK(rec.devices[0].memory_free == 600000);
    CHECK(rig.backend->is_accelerator());
    CHECK(rig.b->struct_size == sizeof(ferrox_backend));
    CHECK(rig.b->attention == nullptr);
    CHECK(rig.b->gemm_fallback == nullptr);
    CHECK(rig.b->matvec_fallback == nullptr);
    CHECK(rig.b->project != nullptr);
    CHECK(rig.b->rms_norm != nullptr);
    CHECK(rig.b->rope != nullptr);
    CHECK(rig.b->add != nullptr);
    CHECK(rig.b->glu != nullptr);
    CHECK(rig.b->convert != nullptr);
    CHECK(rig.b->get_rows != nullptr);
    CHECK(rig.b->attention_resident != nullptr);
    CHECK(rig.b->attention_cells != nullptr);

    const auto kernel = [&](ferrox_op op, ferrox_kind kind) {
        return std::string(rig.backend->kernel_for(op, kind).kernel);
    };
    for (const auto& k : kAllKinds) {
        CHECK_FALSE(kernel(FERROX_OP_MATVEC, k.id).empty());
        CHECK_FALSE(kernel(FERROX_OP_GEMM, k.id).empty());
        CHECK_FALSE(kernel(FERROX_OP_GET_ROWS, k.id).empty());
    }
    CHECK(kernel(FERROX_OP_MATVEC, FERROX_KIND_Q4_K) == "resident.matvec.q4_k");
    CHECK(kernel(FERROX_OP_GET_ROWS, FERROX_KIND_IQ2_XXS) == "resident.get_rows.iq2_xxs");
    CHECK(kernel(FERROX_OP_RMS_NORM, FERROX_KIND_F32) == "resident.rms_norm.f32");
    CHECK(kernel(FERROX_OP_GEGLU, FERROX_KIND_F32) == "resident.geglu.f32");
    CHECK(kernel(FERROX_OP_CONVERT, FERROX_KIND_F16) == "resident.convert.f16");
    CHECK(kernel(FERROX_OP_ATTENTION, FERROX_KIND_F16) == "resident.attention.f16");
    CHECK(kernel(FERROX_OP_RMS_NORM, FERROX_KIND_F16).empty());
    CHECK(kernel(FERROX_OP_ATTENTION, FERROX_KIND_Q8_0).empty());
    CHECK(kernel(FERROX_OP_MUL, FERROX_KIND_F32).empty());
    CHECK(kernel(FERROX_OP_MATVEC, static_cast<ferrox_kind>(4)).empty());  // a retired id
}

TEST_CASE("resident buffers start poisoned, are bounds-checked and charge device memory") {
    Rig rig("memory_total: 4096");
    ferrox_buffer* p = rig.alloc(256);
    for (float v : rig.get(ferrox_tensor{p, 0}, 64)) CHECK(std::isnan(v));

    std::mt19937_64 rng(test_seed(21));
    const auto v = gaussian(16, rng);
    ferrox_message m{};
    require_ok(rig.b->buffer_upload(rig.b, p, 100, v.data(), 64, &m), m);
    std::vector<float> back(16);
    require_ok(rig.b->buffer_download(rig.b, p, 100, back.data(), 64, &m), m);
    CHECK(back == v);

    CHECK(rig.b->buffer_upload(rig.b, p, 200, v.data(), 64, &m) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK_THAT(m.text, Catch::Contains("200") && Catch::Contains("64") && Catch::Contains("256"));
    m = {};
    CHECK(rig.b->buffer_download(rig.b, p, 257, back.data(), 0, &m) == FERROX_ERR_INVALID_ARGUMENT);
    CHECK_THAT(m.text, Catch::Contains("257"));

    ferrox_buffer* wrapped = nullptr;
    CHECK(rig.b->buffer_wrap_host(rig.b, back.data(), 64, &wrapped, &m) == FERROX_ERR_UNSUPPORTED);

    // 4096 bytes in all: 256 are taken, 4000 more do not fit.
    auto info = rig.backend->device_info(0);
    REQUIRE(info.has_value());
    CHECK(info->memory_free == 4096 - 256);
    ferrox_buffer* big = nullptr;
    m = {};
    CHECK(rig.b->buffer_alloc(rig.b, 4000, &big, &m) == FERROX_ERR_OUT_OF_MEMORY);
    CHECK_THAT(m.text, Catch::Contains("4000"));
    rig.alloc(3840);
    CHECK(rig.backend->device_info(0)->memory_free == 0);
}

TEST_CASE("resident products match the quant reference for every entry") {
    for (ferrox_kind kind :
         {FERROX_KIND_F32, FERROX_KIND_F16, FERROX_KIND_BF16, FERROX_KIND_Q8_0, FERROX_KIND_Q4_0,
          FERROX_KIND_Q4_K, FERROX_KIND_Q5_K, FERROX_KIND_Q6_K}) {
        INFO(kind_name(kind));
        Rig rig;
        const auto check = [](const Result& r) { CHECK(nmse(r.got, r.want) < 1e-12); };
        check(case_project(rig, kind, 1, Product::Matvec));
        check(case_project(rig, kind, 3, Product::Gemm));
        check(case_project(rig, kind, 1));
        check(case_project(rig, kind, 4));
    }
}

TEST_CASE("a borrowed weight is read in place") {
    Rig rig;
    std::mt19937_64 rng(test_seed(22));
    const uint64_t rows = 2, cols = 32;
    auto bytes = random_rows(FERROX_KIND_Q8_0, rows, cols, rng);
    const ferrox_weight* w = rig.weight(FERROX_KIND_Q8_0, rows, cols, bytes, true);
    const auto other = random_rows(FERROX_KIND_Q8_0, rows, cols, rng);
    bytes = other;  // same size: assigned in place
    const auto x = gaussian(cols, rng);
    std::vector<float> y(rows);
    ferrox_message m{};
    require_ok(rig.b->matvec(rig.b, w, x.data(), y.data(), &m), m);
    CHECK(y[1] == quant::dot_row(FERROX_KIND_Q8_0, other.data() + 34, x.data(), cols));
}

TEST_CASE("resident elementwise entries match model::ops") {
    Rig rig;
    const auto exact = [](const Result& r) { CHECK(nmse(r.got, r.want) == 0.0); };
    SECTION("rms_norm") {
        exact(case_rms_norm(rig, false));
        exact(case_rms_norm(rig, true));
    }
    SECTION("rope") {
        exact(case_rope(rig, false));
        exact(case_rope(rig, true));
    }
    SECTION("rope of an adjacent-pair prefix: the tail passes through bit for bit") {
        const Result r = case_rope_prefix(rig);
        const uint32_t head_dim = 16, n_rot = 6;
        for (size_t i = 0; i < r.got.size(); ++i) {
            if (i % head_dim >= n_rot)
                CHECK(r.got[i] == r.want[i]);
            else
                CHECK(r.got[i] == Approx(r.want[i]).margin(1e-5));
        }
    }
    SECTION("add") {
        exact(case_add(rig, 0));
        exact(case_add(rig, 5));
    }
    SECTION("glu") {
        exact(case_glu(rig, FERROX_GLU_SWIGLU));
        exact(case_glu(rig, FERROX_GLU_GEGLU));
    }
    SECTION("convert") {
        exact(case_convert(rig, FERROX_KIND_F32));
        exact(case_convert(rig, FERROX_KIND_F16));
    }
    SECTION("get_rows") {
        exact(case_get_rows(rig, FERROX_KIND_Q8_0));
        exact(case_get_rows(rig, FERROX_KIND_Q6_K));
    }
}

TEST_CASE("the fused add_rms_norm is add then rms_norm, and fused_norm: off withdraws it") {
    std::mt19937_64 rng(test_seed(21));
    const uint64_t rows = 3;
    const uint32_t dim = 48;
    const auto x = gaussian(rows * dim, rng, 2.0f);
    const auto o = gaussian(rows * dim, rng);
    const auto gamma = gaussian(dim, rng);
    {
        Rig rig;
        ferrox_kernel_info info{};
        info.struct_size = sizeof info;
        rig.b->kernel_for(rig.b, FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32, &info);
        REQUIRE(info.kernel != nullptr);
        CHECK(std::string_view(info.kernel) == "resident.add_rms_norm.f32");
        REQUIRE(rig.b->add_rms_norm != nullptr);
        const ferrox_tensor tx = rig.put(x), to = rig.put(o), tg = rig.put(gamma);
        const ferrox_tensor ty = rig.room(rows * dim * 4);
        ferrox_message m{};
        require_ok(rig.b->add_rms_norm(rig.b, tx, to, dim, 0.5f, tg, rows, dim, 1e-6f, ty, &m), m);
        std::vector<float> sum = x, want(rows * dim);
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += 0.5f * o[i];
        for (uint64_t r = 0; r < rows; ++r)
            model::ops::rms_norm({sum.data() + r * dim, dim}, gamma, 1e-6f,
                                 {want.data() + r * dim, dim});
        CHECK(rig.get(tx, rows * dim) == sum);  // the residual stream is updated in place
        CHECK(nmse(rig.get(ty, rows * dim), want) == 0.0);
    }
    Rig plain("fused_norm: off");
    CHECK(plain.b->add_rms_norm == nullptr);
    ferrox_kernel_info info{};
    info.struct_size = sizeof info;
    plain.b->kernel_for(plain.b, FERROX_OP_ADD_RMS_NORM, FERROX_KIND_F32, &info);
    CHECK(info.kernel == nullptr);
}

TEST_CASE("resident attention matches model::ops::attend") {
    Rig rig;
    for (ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16})
        for (uint32_t window : {0u, 4u}) {
            INFO(kind_name(kind) << " window " << window);
            const Result r = case_attention(rig, kind, window);
            CHECK(nmse(r.got, r.want) == 0.0);
        }
}

TEST_CASE("resident attention over cells matches model::ops::attend over each row's cells") {
    Rig rig;
    for (ferrox_kind kind : {FERROX_KIND_F32, FERROX_KIND_F16})
        for (uint32_t window : {0u, 4u})
            for (uint32_t n_seq : {1u, 3u}) {
                INFO(kind_name(kind) << " window " << window << ", " << n_seq << " sequences");
                const Result r = case_attention_cells(rig, kind, window, n_seq);
                CHECK(nmse(r.got, r.want) == 0.0);
            }
}

TEST_CASE("attention_cells rejects cells outside the cache and spans outside the list") {
    Rig rig;
    const uint32_t dim = 8;
    std::mt19937_64 rng(test_seed(24));
    const ferrox_tensor cache = rig.put(gaussian(4 * dim, rng));  // 4 cells of one head
    const ferrox_tensor q = rig.put(gaussian(2 * dim, rng)), out = rig.room(2 * dim * 4);
    ferrox_attention_cells_desc d{};
    d.struct_size = sizeof d;
    d.abi_version = FERROX_ABI_VERSION;
    d.n_query = 2;
    d.n_head = d.n_head_kv = 1;
    d.head_dim_k = d.head_dim_v = dim;
    d.scale = 1.0f;
    d.kv_kind = FERROX_KIND_F32;
    d.n_cells = 4;
    d.n_index = 3;
    d.max_span = 3;
    const auto call = [&](const std::vector<uint32_t>& index, const std::vector<uint32_t>& spans) {
        ferrox_message m{};
        const ferrox_status s = rig.b->attention_cells(rig.b, &d, q, cache, cache, rig.put(index),
                                                       rig.put(spans), out, &m);
        return std::pair{s, std::string(m.text)};
    };
    CHECK(call({2, 0, 3}, {0, 2, 1, 3}).first == FERROX_OK);
    auto [s, text] = call({2, 4, 3}, {0, 2, 1, 3});
    CHECK(s == FERROX_ERR_INVALID_ARGUMENT);
    CHECK_THAT(text, Catch::Contains("cell_index[1] = 4"));
    std::tie(s, text) = call({2, 0, 3}, {0, 2, 1, 4});
    CHECK(s == FERROX_ERR_INVALID_ARGUMENT);
    CHECK_THAT(text, Catch::Contains("row 1") && Catch::Contains("[1, 4)"));
    std::tie(s, text) = call({2, 0, 3}, {1, 1, 0, 3});
    CHECK(s == FERROX_ERR_INVALID_ARGUMENT);
    CHECK_THAT(text, Catch::Contains("row 0") && Catch::Contains("empty"));
    d.n_index = 5;  // the list tensor holds 3
    std::tie(s, text) = call({2, 0, 3}, {0, 2, 1, 3});
    CHECK(s == FERROX_ERR_INVALID_ARGUMENT);
    CHECK_THAT(text, Catch::Contains("cell_index"));
}

TEST_CASE("abi: 1.2 hands over a 1.2 plugin's table, which still loads") {
    Rig rig("abi: \"1.2\"");
    CHECK(rig.b->abi_version == ((1u << 16) | 2u));
    CHECK(rig.b->struct_size == offsetof(ferrox_backend, attention_cells));
    CHECK(rig.backend->has_resident());
    CHECK_FALSE(rig.backend->has_attention_cells());
    CHECK(rig.backend->abi_version_text() == "1.2");
    Rig current;
    CHECK(current.backend->has_attention_cells());
    CHECK(current.backend->abi_version_text() ==
          fmt::format("{}.{}", FERROX_ABI_VERSION_MAJOR, FERROX_ABI_VERSION_MINOR));
    CHECK(current.backend->takes_attention_softcap());
    CHECK(current.backend->takes_attention_sinks());
    Rig before_sinks("abi: \"1.4\"");
    CHECK(before_sinks.backend->abi_version_text() == "1.4");
    CHECK(before_sinks.backend->takes_attention_softcap());
    CHECK_FALSE(before_sinks.backend->takes_attention_sinks());
    CHECK(before_sinks.backend->kernel_for(FERROX_OP_SWIGLU_OAI, FERROX_KIND_F32).kernel.empty());
    CHECK(current.backend->kernel_for(FERROX_OP_SWIGLU_OAI, FERROX_KIND_F32).kernel ==
          "resident.swiglu_oai.f32");
    Rig before_softcap("abi: \"1.3\"");
    CHECK(before_softcap.backend->has_attention_cells());
    CHECK(before_softcap.backend->abi_version_text() == "1.3");
    CHECK_FALSE(before_softcap.backend->takes_attention_softcap());
}

TEST_CASE("resident entries reject tensors outside their buffers and ids outside the weight") {
    Rig rig;
    ferrox_buffer* small = rig.alloc(256);  // 64 floats
    const ferrox_tensor whole{small, 0};
    ferrox_message m{};
    const auto rejected = [&](ferrox_status s, std::initializer_list<const char*> words) {
        CHECK(s == FERROX_ERR_INVALID_ARGUMENT);
        for (const char* w : words) CHECK_THAT(m.text, Catch::Contains(w));
        m = {};
    };
    rejected(rig.b->rms_norm(rig.b, whole, whole, 2, 64, 1e-5f, whole, &m),
             {"rms_norm", "x", "256"});
    rejected(rig.b->rms_norm(rig.b, whole, ferrox_tensor{small, 2}, 1, 16, 1e-5f, whole, &m),
             {"gamma", "offset 2"});
    rejected(rig.b->rope(rig.b, whole, ferrox_tensor{small, 240}, whole, 1, 2, 16, 0, &m),
             {"rope", "cos", "240"});
    rejected(rig.b->add(rig.b, whole, whole, 2, 16, 60, 1.0f, &m), {"add", "src"});
    rejected(rig.b->glu(rig.b, FERROX_GLU_SWIGLU, whole, ferrox_tensor{small, 4}, 64, &m),
             {"glu", "up"});
    rejected(rig.b->convert(rig.b, whole, ferrox_tensor{small, 200}, FERROX_KIND_F16, 64, &m),
             {"convert", "dst"});
    rejected(rig.b->convert(rig.b, whole, ferrox_tensor{nullptr, 0}, FERROX_KIND_F32, 4, &m),
             {"no buffer"});

    std::mt19937_64 rng(test_seed(23));
    const auto bytes = random_rows(FERROX_KIND_Q8_0, 6, 32, rng);
    const ferrox_weight* w = rig.weight(FERROX_KIND_Q8_0, 6, 32, bytes, false);
    rejected(rig.b->project(rig.b, w, whole, 1, ferrox_tensor{small, 240}, &m), {"project", "y"});
    rejected(rig.b->project(rig.b, w, whole, 3, whole, &m), {"project", "x"});
    for (int32_t bad : {6, -1}) {
        const std::vector<int32_t> ids{0, bad};
        rejected(rig.b->get_rows(rig.b, w, ids.data(), ids.size(), 1.0f, whole, &m),
                 {"get_rows", std::to_string(bad).c_str(), "[0, 6)"});
    }
    const std::vector<int32_t> ids{0, 1, 2};
    rejected(rig.b->get_rows(rig.b, w, ids.data(), ids.size(), 1.0f, whole, &m), {"out"});

    ferrox_attention_desc d{};
    d.struct_size = sizeof d;
    d.abi_version = FERROX_ABI_VERSION;
    d.n_query = 1;
    d.pos0 = 4;  // the cache needs 5 rows of 16 floats, but holds 4
    d.n_head = d.n_head_kv = 1;
    d.head_dim_k = d.head_dim_v = 16;
    d.scale = 1.0f;
    d.kv_kind = FERROX_KIND_F32;
    rejected(rig.b->attention_resident(rig.b, &d, whole, whole, whole, whole, &m),
             {"attention_resident", "keys"});
    d.pos0 = 0;
    d.n_head = 3;
    d.n_head_kv = 2;
    rejected(rig.b->attention_resident(rig.b, &d, whole, whole, whole, whole, &m), {"n_head 3"});
}

TEST_CASE("each fault option breaks exactly its own op") {
    for (const auto& c : fault_cases()) {
        INFO("fault " << c.fault);
        Rig clean;
        const Result good = c.run(clean);
        CHECK(nmse(good.got, good.want) < 1e-12);
        Rig faulty(fmt::format("fault: {}", c.fault));
        const Result bad = c.run(faulty);
        CHECK(nmse(bad.got, bad.want) > 1e-3);
        // Every other op is still right under this fault.
        for (const auto& other : fault_cases()) {
            if (std::string_view(other.fault) == c.fault || std::string_view(other.also) == c.fault)
                continue;
            INFO("unaffected op " << other.fault);
            const Result r = other.run(faulty);
            CHECK(nmse(r.got, r.want) < 1e-12);
        }
    }
}

TEST_CASE("an unknown option or fault name fails the fixture's create with its name") {
    for (const auto& [options, word] :
         std::vector<std::pair<std::string, std::string>>{{"no_such_option: 1", "no_such_option"},
                                                          {"fault: sofmax", "sofmax"},
                                                          {"memory_total: 12GB", "12GB"}}) {
        INFO(options);
        TempDir dir;
        install_plugin(fixture("resident"), dir.path());
        const PluginSet set = PluginSet::load(
            config_from(fmt::format("backends: {{order: [resident]}}\nresident: {{{}}}", options)),
            only_folder(dir.path()));
        CHECK(set.selected().empty());
        const auto& rec = record_of(set, "resident");
        CHECK(rec.state == PluginState::InitFailed);
        CHECK_THAT(rec.reason, Catch::Contains(word));
    }
}
