// ferrox_synth_gguf end to end: strip a GGUF, fill the header, and check the
// result with the core's reader and the quant reference.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferrox/gguf/file.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "run_process.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ferrox::test::ProcessResult;
using ferrox::test::run_process;
using ferrox::test::slurp;
using ferrox::test::TempDir;

// A GGUF v3 writer for these tests: any tensor kind, any alignment. Tensor
// data is written in reverse declaration order, so offset order differs from
// info order, and each tensor is padded to the alignment.
class GgufBuilder {
  public:
    explicit GgufBuilder(uint32_t alignment) : alignment_(alignment) {
        u32("general.alignment", alignment);
    }
    GgufBuilder& u32(const std::string& key, uint32_t v) {
        key_header(key, 4);
        put(kv_, v);
        ++kv_count_;
        return *this;
    }
    GgufBuilder& str(const std::string& key, const std::string& v) {
        key_header(key, 8);
        put_string(kv_, v);
        ++kv_count_;
        return *this;
    }
    GgufBuilder& str_array(const std::string& key, const std::vector<std::string>& v) {
        key_header(key, 9);
        put<uint32_t>(kv_, 8);
        put<uint64_t>(kv_, v.size());
        for (const auto& s : v) put_string(kv_, s);
        ++kv_count_;
        return *this;
    }
    // ggml order: shape[0] is the row length. Data bytes are 0x5a.
    GgufBuilder& tensor(const std::string& name, ferrox_kind kind, std::vector<uint64_t> shape) {
        uint64_t elements = 1;
        for (auto d : shape) elements *= d;
        const uint64_t bytes = *ferrox::row_bytes(kind, shape[0]) * (elements / shape[0]);
        tensors_.push_back({name, kind, std::move(shape), bytes});
        return *this;
    }

    std::vector<char> build() const {
        std::vector<uint64_t> offsets(tensors_.size());
        uint64_t offset = 0;
        for (std::size_t i = tensors_.size(); i-- > 0;) {
            offsets[i] = offset;
            offset += padded(tensors_[i].bytes);
        }
        std::vector<char> out;
        put<uint32_t>(out, 0x46554747u);  // "GGUF"
        put<uint32_t>(out, 3);
        put<uint64_t>(out, tensors_.size());
        put<uint64_t>(out, kv_count_);
        out.insert(out.end(), kv_.begin(), kv_.end());
        for (std::size_t i = 0; i < tensors_.size(); ++i) {
            const auto& t = tensors_[i];
            put_string(out, t.name);
            put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
            for (auto d : t.shape) put<uint64_t>(out, d);
            put<uint32_t>(out, static_cast<uint32_t>(t.kind));
            put<uint64_t>(out, offsets[i]);
        }
        out.resize(padded(out.size()), 0);
        out.resize(out.size() + offset, 0x5a);
        return out;
    }

  private:
    struct Tensor {
        std::string name;
        ferrox_kind kind;
        std::vector<uint64_t> shape;
        uint64_t bytes;
    };
    uint64_t padded(uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }
    template <class T>
    static void put(std::vector<char>& out, T v) {
        const std::size_t at = out.size();
        out.resize(at + sizeof(T));
        std::memcpy(out.data() + at, &v, sizeof(T));
    }
    static void put_string(std::vector<char>& out, const std::string& s) {
        put<uint64_t>(out, s.size());
        out.insert(out.end(), s.begin(), s.end());
    }
    void key_header(const std::string& key, uint32_t type) {
        put_string(kv_, key);
        put<uint32_t>(kv_, type);
    }

    uint32_t alignment_;
    std::vector<char> kv_;
    uint64_t kv_count_ = 0;
    std::vector<Tensor> tensors_;
};

void write_file(const fs::path& path, const std::vector<char>& bytes) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
}

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

ProcessResult synth(const std::string& args) {
    return run_process(std::string("'") + FERROX_SYNTH_GGUF_EXE + "' " + args);
}

constexpr ferrox_kind kSupported[] = {
    FERROX_KIND_F32,   FERROX_KIND_F16,   FERROX_KIND_BF16,  FERROX_KIND_Q4_0,   FERROX_KIND_Q4_1,
    FERROX_KIND_Q5_0,  FERROX_KIND_Q5_1,  FERROX_KIND_Q8_0,  FERROX_KIND_Q2_K,   FERROX_KIND_Q3_K,
    FERROX_KIND_Q4_K,  FERROX_KIND_Q5_K,  FERROX_KIND_Q6_K,  FERROX_KIND_IQ4_NL, FERROX_KIND_IQ4_XS,
    FERROX_KIND_MXFP4, FERROX_KIND_TQ1_0, FERROX_KIND_TQ2_0, FERROX_KIND_NVFP4,  FERROX_KIND_Q1_0,
};

GgufBuilder every_kind_model() {
    GgufBuilder b(64);
    b.str("general.architecture", "llama")
        .u32("llama.block_count", 1)
        .str_array("tokenizer.ggml.tokens", {"<s>", "</s>", "hello", "world"});
    for (ferrox_kind kind : kSupported)
        b.tensor(std::string("blk.0.") + std::string(ferrox::kind_name(kind)) + ".weight", kind,
                 {512, 24});
    b.tensor("blk.0.attn_norm.weight", FERROX_KIND_F32, {512});
    b.tensor("blk.0.ssm_a", FERROX_KIND_F32, {32});  // a recurrent layer's decays
    b.tensor("blk.0.cube.weight", FERROX_KIND_Q8_0, {64, 3, 2});
    return b;
}

// Strips `model`, fills the header, and checks everything the tool promises.
void check_round_trip(const fs::path& model, const TempDir& dir) {
    const fs::path header = dir / (model.stem().string() + ".header");
    const fs::path filled = dir / (model.stem().string() + ".filled.gguf");
    const ProcessResult s = synth("strip " + quote(model) + " " + quote(header));
    INFO(s.out << s.err);
    REQUIRE(s.exit_code == 0);
    const ProcessResult f = synth("fill " + quote(header) + " " + quote(filled) + " --seed 7");
    INFO(f.out << f.err);
    REQUIRE(f.exit_code == 0);

    auto original = ferrox::gguf::File::open(model);
    REQUIRE(original);
    auto result = ferrox::gguf::File::open(filled);
    INFO((result ? "" : result.error().message()));
    REQUIRE(result);

    // The header is the original's bytes up to its data section and holds no
    // tensor data (a tiny model with a 128K vocabulary is mostly header, so no
    // ratio is asserted).
    const std::string header_bytes = slurp(header);
    const auto orig_bytes = original->mapping()->bytes();
    REQUIRE(header_bytes.size() == original->data_offset());
    CHECK(std::memcmp(header_bytes.data(), orig_bytes.data(), header_bytes.size()) == 0);
    CHECK(header_bytes.size() < orig_bytes.size());
    const auto bytes = result->mapping()->bytes();
    CHECK(std::memcmp(bytes.data(), orig_bytes.data(), header_bytes.size()) == 0);
    CHECK(bytes.size() == orig_bytes.size());

    // Same metadata and tensor infos, as the core reads them.
    REQUIRE(result->metadata().size() == original->metadata().size());
    for (std::size_t i = 0; i < result->metadata().size(); ++i) {
        CHECK(result->metadata()[i].key == original->metadata()[i].key);
        CHECK(result->metadata()[i].value.index() == original->metadata()[i].value.index());
    }
    CHECK(result->alignment() == original->alignment());
    REQUIRE(result->tensors().size() == original->tensors().size());
    bool any_quantized = false;
    for (std::size_t i = 0; i < result->tensors().size(); ++i) {
        const auto& t = result->tensors()[i];
        const auto& o = original->tensors()[i];
        INFO(t.name());
        CHECK(t.name() == o.name());
        CHECK(t.kind() == o.kind());
        CHECK(std::equal(t.shape().begin(), t.shape().end(), o.shape().begin(), o.shape().end()));
        CHECK(t.file_offset() == o.file_offset());
        CHECK(t.byte_size() == o.byte_size());

        // Every row decodes to finite weights of a sane, non-zero size.
        const uint64_t cols = t.row_length();
        const uint64_t row = *ferrox::row_bytes(t.kind(), cols);
        std::vector<float> w(cols);
        double sum_sq = 0, max_abs = 0, lowest = 0, highest = -1e30;
        uint64_t bad = 0;
        for (uint64_t r = 0; r < t.row_count(); ++r) {
            std::fill(w.begin(), w.end(), std::nanf(""));  // poison
            REQUIRE(
                ferrox::quant::dequantize_row(t.kind(), t.data().data() + r * row, w.data(), cols));
            for (float v : w) {
                if (!std::isfinite(v)) ++bad;
                sum_sq += double(v) * double(v);
                max_abs = std::max(max_abs, double(std::fabs(v)));
                lowest = std::min(lowest, double(v));
                highest = std::max(highest, double(v));
            }
        }
        CHECK(bad == 0);
        CHECK(sum_sq > 0);
        const double limit = 1.0 / std::sqrt(double(cols));
        if (t.name().ends_with(".ssm_a")) {
            // -exp(A_log) as in real files: every step decays the state.
            CHECK(highest <= -1.0);
            CHECK(lowest >= -16.0);
        } else if (ferrox::is_float_kind(t.kind())) {
            const bool norm = t.shape().size() == 1 && t.name().find("norm") != std::string::npos;
            CHECK(max_abs <= (norm ? 1.51 : limit * 1.01));
        } else {
            any_quantized = true;
            // The smallest-normal floor on d may lift big-code kinds above 1/sqrt(cols).
            CHECK(max_abs < std::max(4 * limit, 0.3));
        }
    }
    CHECK(any_quantized);

    // Padding between tensors and after the last one is zero.
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& t : result->tensors()) spans.emplace_back(t.file_offset(), t.byte_size());
    std::sort(spans.begin(), spans.end());
    uint64_t at = result->data_offset(), nonzero = 0;
    for (const auto& [start, size] : spans) {
        for (; at < start; ++at) nonzero += bytes[at] != std::byte{0};
        at = start + size;
    }
    for (; at < bytes.size(); ++at) nonzero += bytes[at] != std::byte{0};
    CHECK(nonzero == 0);
}

}  // namespace

TEST_CASE("strip then fill keeps the header and gives valid tensors of every supported kind") {
    TempDir dir;
    const fs::path model = dir / "every-kind.gguf";
    write_file(model, every_kind_model().build());
    check_round_trip(model, dir);
}

TEST_CASE("fill is deterministic in its seed") {
    TempDir dir;
    const fs::path model = dir / "m.gguf", header = dir / "m.header";
    write_file(model, every_kind_model().build());
    REQUIRE(synth("strip " + quote(model) + " " + quote(header)).exit_code == 0);
    for (const char* name : {"a", "b", "c"}) {
        const std::string seed = std::string(name) == "c" ? "2" : "1";
        REQUIRE(synth("fill " + quote(header) + " " + quote(dir / name) + " --seed " + seed)
                    .exit_code == 0);
    }
    CHECK(slurp(dir / "a") == slurp(dir / "b"));
    CHECK(slurp(dir / "a") != slurp(dir / "c"));
}

TEST_CASE("fill refuses a kind it cannot synthesise, naming the tensor") {
    TempDir dir;
    const fs::path model = dir / "m.gguf", header = dir / "m.header", out = dir / "out.gguf";
    GgufBuilder b(32);
    b.tensor("ok.weight", FERROX_KIND_Q8_0, {256, 2})
        .tensor("blk.3.ffn_up.weight", FERROX_KIND_IQ2_XXS, {256, 2});
    write_file(model, b.build());
    REQUIRE(synth("strip " + quote(model) + " " + quote(header)).exit_code == 0);
    const ProcessResult r = synth("fill " + quote(header) + " " + quote(out));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("blk.3.ffn_up.weight") && Catch::Contains("IQ2_XXS") &&
                          Catch::Contains(header.string()));
    CHECK_FALSE(fs::exists(out));  // no half-written model left behind
}

TEST_CASE("bad input gets an error naming the file and offset") {
    TempDir dir;
    const fs::path model = dir / "m.gguf", header = dir / "m.header", out = dir / "out.gguf";
    const std::vector<char> bytes = every_kind_model().build();
    write_file(model, bytes);
    REQUIRE(synth("strip " + quote(model) + " " + quote(header)).exit_code == 0);
    const std::string full_header = slurp(header);

    SECTION("a header cut inside the tensor infos") {
        const fs::path cut = dir / "cut.header";
        write_file(cut, std::vector<char>(full_header.begin(), full_header.end() - 100));
        const ProcessResult r = synth("fill " + quote(cut) + " " + quote(out));
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err,
                   Catch::Contains(cut.string() + ": offset ") && Catch::Contains("truncated"));
        CHECK_FALSE(fs::exists(out));
    }
    SECTION("a whole model where the header belongs") {
        const ProcessResult r = synth("fill " + quote(model) + " " + quote(out));
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains(model.string()) &&
                              Catch::Contains("tensor data section starts at offset " +
                                              std::to_string(full_header.size())));
    }
    SECTION("a header given to strip") {
        const ProcessResult r = synth("strip " + quote(header) + " " + quote(dir / "again"));
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains(header.string() + ": offset ") &&
                              Catch::Contains("past the end of the file"));
    }
    SECTION("a missing file") {
        const ProcessResult r = synth("strip " + quote(dir / "nope.gguf") + " " + quote(out));
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains((dir / "nope.gguf").string()));
    }
}

TEST_CASE("usage: --help describes both modes, mistakes exit 2") {
    const ProcessResult help = synth("--help");
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Catch::Contains("strip IN.gguf OUT.header") &&
                             Catch::Contains("fill OUT.header OUT.gguf [--seed N]"));
    CHECK(synth("").exit_code == 2);
    CHECK(synth("squash a b").exit_code == 2);
    CHECK(synth("fill a").exit_code == 2);
    CHECK(synth("fill a b --seed x").exit_code == 2);
    CHECK(synth("fill a b --bogus").exit_code == 2);
    CHECK(synth("strip a b --seed 3").exit_code == 2);
}

TEST_CASE("strip then fill of each tiny model") {
    const char* home = std::getenv("HOME");
    const char* cache = std::getenv("FERROX_CACHE_DIR");
    const fs::path folder =
        (cache ? fs::path(cache) : fs::path(home ? home : "/") / ".cache" / "ferrox") /
        "tiny-models";
    std::vector<fs::path> models;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec))
        if (entry.path().extension() == ".gguf") models.push_back(entry.path());
    if (models.empty()) {
        WARN("SKIPPED: no tiny models in " << folder.string()
                                           << " (tests/model/make_tiny_models.py makes them)");
        return;
    }
    std::sort(models.begin(), models.end());
    for (const auto& model : models) {
        INFO(model.string());
        TempDir dir;
        check_round_trip(model, dir);
    }
}
