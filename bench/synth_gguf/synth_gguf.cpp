// ferrox_synth_gguf: carry a GGUF model's shape without its weights.
//
// Decode speed depends on tensor shapes and quant kinds, not on weight values,
// so a benchmark machine that cannot receive a whole model gets only its
// header (metadata, tokenizer, tensor infos: `strip`) and rebuilds a model of
// the same layout there with random but valid tensor data (`fill`).
//
// `fill` reuses the core's GGUF parser on the header. That parser checks that
// every tensor lies inside the file, so the header is first written into the
// output followed by a large sparse hole (no disk blocks, no reads), parsed,
// and the file is then cut to the real size and the tensors written.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"
#include "ferrox/gguf/file.h"
#include "ferrox/quant/half.h"
#include "ferrox/quant_kind.h"

namespace {

using ferrox::Error;
using ferrox::Expected;
using ferrox::make_error;

constexpr std::string_view kUsage =
    R"(ferrox_synth_gguf: carry a GGUF model's shape without its weights

usage:
  ferrox_synth_gguf strip IN.gguf OUT.header
      Writes IN's bytes up to the start of its tensor data section (header,
      metadata incl. tokenizer, tensor infos, alignment padding) and nothing
      else; prints the sizes.
  ferrox_synth_gguf fill OUT.header OUT.gguf [--seed N]
      Writes the header, then every tensor at its declared offset (gaps and
      the end padded with zeros to the alignment) filled with random, valid
      data of its kind: floats in [-1,1]/sqrt(row length) (1-D "*norm*"
      tensors in [0.5,1.5], a recurrent layer's "*.ssm_a" decays in
      [-16,-1], negative as in every real file); quantized blocks are random bits whose f16 scale
      fields are set to small finite values (MXFP4: its power-of-two
      exponent byte; NVFP4: its four UE4M3 scale bytes), so every block
      decodes to finite weights of about that magnitude. Same seed (default
      1), same bytes.
      Kinds: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K
      IQ4_NL IQ4_XS MXFP4 TQ1_0 TQ2_0 NVFP4 Q1_0; a tensor of another kind
      is refused by name.
  ferrox_synth_gguf --help

Exit status: 0 on success, 1 on an error (the message names the file and,
for a malformed header, the byte offset), 2 on a usage error.
)";

// ---- files ----

class Fd {
  public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

  private:
    int fd_;
};

Error errno_error(const std::filesystem::path& path, std::string_view what) {
    return make_error("{}: {}: {}", path.string(), what, std::strerror(errno));
}

Expected<void> write_all(int fd, const std::filesystem::path& path, const void* data, uint64_t size,
                         uint64_t offset) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno_error(path, fmt::format("cannot write at offset {}", offset));
        }
        p += n;
        size -= static_cast<uint64_t>(n);
        offset += static_cast<uint64_t>(n);
    }
    return {};
}

Expected<std::vector<std::byte>> read_whole(const std::filesystem::path& path) {
    const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return errno_error(path, "cannot open");
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) return errno_error(path, "cannot stat");
    std::vector<std::byte> bytes(static_cast<std::size_t>(info.st_size));
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno_error(path, fmt::format("cannot read at offset {}", done));
        if (n == 0)
            return make_error("{}: shrank to {} bytes while being read", path.string(), done);
        done += static_cast<std::size_t>(n);
    }
    return bytes;
}

// ---- strip ----

Expected<void> strip_model(const std::filesystem::path& in, const std::filesystem::path& out) {
    auto file = ferrox::gguf::File::open(in);
    if (!file) return file.error();
    const auto bytes = file->mapping()->bytes();
    // A file without tensors may end before its (aligned) data section.
    const uint64_t header = std::min<uint64_t>(file->data_offset(), bytes.size());
    const Fd fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return errno_error(out, "cannot create");
    if (auto ok = write_all(fd.get(), out, bytes.data(), header, 0); !ok) return ok.error();
    fmt::print("{}: {} bytes, {} tensors, {} metadata keys\n", in.string(), bytes.size(),
               file->tensors().size(), file->metadata().size());
    fmt::print("{}: {} bytes of header ({:.2f}% of the model; tensor data starts at {})\n",
               out.string(), header,
               100.0 * static_cast<double>(header) / static_cast<double>(bytes.size()),
               file->data_offset());
    return {};
}

// ---- random data ----

// xoshiro256** seeded through splitmix64: fast, and good enough that random
// bits look like quantized codes.
class Rng {
  public:
    explicit Rng(uint64_t seed) {
        for (auto& word : s_) word = splitmix64(seed);
    }
    uint64_t next() {
        const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = std::rotl(s_[3], 45);
        return result;
    }
    // Uniform in [0, 1) from 24 random bits (exact in float).
    static float unit(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }
    float unit() { return unit(static_cast<uint32_t>(next() >> 32)); }
    void fill(std::span<uint8_t> out) {
        std::size_t i = 0;
        for (; i + 8 <= out.size(); i += 8) {
            const uint64_t v = next();
            std::memcpy(out.data() + i, &v, 8);
        }
        if (i < out.size()) {
            const uint64_t v = next();
            std::memcpy(out.data() + i, &v, out.size() - i);
        }
    }

  private:
    static uint64_t splitmix64(uint64_t& x) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    uint64_t s_[4];
};

void put_f16(uint8_t* p, float v) {
    const uint16_t h = ferrox::quant::fp32_to_fp16(v);
    p[0] = static_cast<uint8_t>(h);
    p[1] = static_cast<uint8_t>(h >> 8);
}

// Where a block keeps its f16 scale (d) and, for kinds with an offset, its f16
// min, and how large |weight| / d can get from the codes and sub-block scales
// (ggml's block layouts, as core/src/quant/ decodes them). `min_per_d` sets
// min (or dmin) relative to d so that the random codes come out centred on 0.
struct ScaleLayout {
    ferrox_kind kind;
    uint32_t d_at;
    int32_t min_at;  // -1: the kind has no min
    float max_code;  // max |weight| / d
    float min_per_d;
};

constexpr ScaleLayout kScaleLayouts[] = {
    {FERROX_KIND_Q4_0, 0, -1, 8.0f, 0.0f},
    {FERROX_KIND_Q4_1, 0, 2, 15.0f, -7.5f},  // w = d*q + m, q in 0..15
    {FERROX_KIND_Q5_0, 0, -1, 16.0f, 0.0f},
    {FERROX_KIND_Q5_1, 0, 2, 31.0f, -15.5f},  // w = d*q + m, q in 0..31
    {FERROX_KIND_Q8_0, 0, -1, 128.0f, 0.0f},
    // K-quants: w = d*sc*q - dmin*m with sc, m the 4- or 6-bit sub-block values.
    {FERROX_KIND_Q2_K, 80, 82, 15.0f * 3.0f, 1.5f},
    {FERROX_KIND_Q3_K, 108, -1, 32.0f * 4.0f, 0.0f},
    {FERROX_KIND_Q4_K, 0, 2, 63.0f * 15.0f, 7.5f},
    {FERROX_KIND_Q5_K, 0, 2, 63.0f * 31.0f, 15.5f},
    {FERROX_KIND_Q6_K, 208, -1, 128.0f * 32.0f, 0.0f},
    {FERROX_KIND_IQ4_NL, 0, -1, 127.0f, 0.0f},
    {FERROX_KIND_IQ4_XS, 0, -1, 32.0f * 127.0f, 0.0f},
    // Ternary and one-bit kinds: w = d*(q - 1), q in 0..3 (TQ2_0) or 0..2
    // (TQ1_0, its scale after 52 bytes of trits); Q1_0: w = +-d.
    {FERROX_KIND_TQ1_0, 52, -1, 1.0f, 0.0f},
    {FERROX_KIND_TQ2_0, 64, -1, 2.0f, 0.0f},
    {FERROX_KIND_Q1_0, 0, -1, 1.0f, 0.0f},
};

const ScaleLayout* scale_layout(ferrox_kind kind) {
    for (const auto& layout : kScaleLayouts)
        if (layout.kind == kind) return &layout;
    return nullptr;
}

// MXFP4 blocks: an E8M0 exponent byte (scale 2^(e - 127)), then 32 e2m1
// codes of at most 6 in magnitude.
constexpr float kMxfp4MaxCode = 6.0f;

// NVFP4 blocks: four UE4M3 scale bytes (one a 16-weight sub-block), then
// e2m1 codes as MXFP4's. UE4M3: 4 exponent bits (bias 7), 3 mantissa bits,
// exponent 0 subnormal; 0x7F is not a number.
constexpr int kNvfp4SubBlocks = 4;
float ue4m3_value(uint8_t byte) {
    const int e = byte >> 3, m = byte & 7;
    return e == 0 ? std::ldexp(static_cast<float>(m) / 8.0f, -6)
                  : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
}
// The nonzero scale byte whose largest weight (6 x scale) is nearest `target`.
uint8_t nvfp4_scale_byte(float target) {
    uint8_t best = 1;
    for (uint8_t b = 1; b < 0x7F; ++b)
        if (std::abs(ue4m3_value(b) * kMxfp4MaxCode - target) <
            std::abs(ue4m3_value(best) * kMxfp4MaxCode - target))
            best = b;
    return best;
}

bool supported(ferrox_kind kind) {
    return ferrox::is_float_kind(kind) || scale_layout(kind) || kind == FERROX_KIND_MXFP4 ||
           kind == FERROX_KIND_NVFP4;
}

struct TensorPlan {
    std::string name;
    ferrox_kind kind;
    uint32_t n_dims;
    uint64_t row_length;
    uint64_t elements;
    uint64_t byte_size;
    uint64_t file_offset;
};

// Smallest normal f16: a random scale never becomes a subnormal (slow on some
// hardware paths, and not what real models hold).
constexpr float kMinScale = 0x1p-14f;

void synthesise(const TensorPlan& t, Rng& rng, std::vector<uint8_t>& buffer) {
    buffer.resize(t.byte_size);
    // Weights of about 1/sqrt(row length) keep each matmul output near its
    // input's scale, as in a trained model; norm weights near 1 keep the
    // residual stream from shrinking layer by layer.
    const float target = 1.0f / std::sqrt(static_cast<float>(t.row_length));
    if (ferrox::is_float_kind(t.kind)) {
        const bool norm = t.n_dims == 1 && t.name.find("norm") != std::string::npos;
        // A recurrent layer's ssm_a holds -exp(A_log), negative in every real file
        // (1..16 in magnitude, as Mamba's initialisation): each step then decays the
        // state instead of multiplying it until it overflows.
        const bool decay = t.name.ends_with(".ssm_a");
        const float scale = norm ? 0.5f : decay ? 7.5f : target;
        const float centre = norm ? 1.0f : decay ? -8.5f : 0.0f;
        for (uint64_t i = 0; i < t.elements; i += 2) {
            const uint64_t bits = rng.next();
            for (uint64_t k = 0; k < 2 && i + k < t.elements; ++k) {
                const float u = Rng::unit(static_cast<uint32_t>(bits >> (32 * k)));
                const float v = centre + scale * (2.0f * u - 1.0f);
                uint8_t* p = buffer.data() + (i + k) * (t.kind == FERROX_KIND_F32 ? 4 : 2);
                if (t.kind == FERROX_KIND_F32) {
                    std::memcpy(p, &v, 4);
                } else {
                    const uint16_t h = t.kind == FERROX_KIND_F16 ? ferrox::quant::fp32_to_fp16(v)
                                                                 : ferrox::quant::fp32_to_bf16(v);
                    p[0] = static_cast<uint8_t>(h);
                    p[1] = static_cast<uint8_t>(h >> 8);
                }
            }
        }
        return;
    }
    const ferrox::KindTraits& traits = *ferrox::kind_traits(static_cast<uint32_t>(t.kind));
    rng.fill(buffer);
    if (t.kind == FERROX_KIND_MXFP4) {
        // The exponent putting the largest code near the target, or one below.
        const int top = 127 + static_cast<int>(std::floor(std::log2(target / kMxfp4MaxCode)));
        for (uint64_t at = 0; at < t.byte_size; at += traits.block_bytes)
            buffer[at] = static_cast<uint8_t>(std::clamp(top - (rng.next() & 1 ? 1 : 0), 1, 254));
        return;
    }
    if (t.kind == FERROX_KIND_NVFP4) {
        // Each sub-block's scale at the target or one step below.
        const int top = nvfp4_scale_byte(target);
        for (uint64_t at = 0; at < t.byte_size; at += traits.block_bytes)
            for (int s = 0; s < kNvfp4SubBlocks; ++s)
                buffer[at + s] = static_cast<uint8_t>(std::max(1, top - (rng.next() & 1 ? 1 : 0)));
        return;
    }
    const ScaleLayout& layout = *scale_layout(t.kind);
    const float d_top = target / layout.max_code;
    for (uint64_t at = 0; at < t.byte_size; at += traits.block_bytes) {
        uint8_t* block = buffer.data() + at;
        // d in [d_top/2, d_top]: blocks differ, as real ones do.
        const float d = std::max(kMinScale, d_top * (0.5f + 0.5f * rng.unit()));
        put_f16(block + layout.d_at, d);
        if (layout.min_at >= 0) {
            const float m = d * layout.min_per_d;
            put_f16(block + layout.min_at,
                    m < 0 ? std::min(m, -kMinScale) : std::max(m, kMinScale));
        }
    }
}

// ---- fill ----

// Sparse extents tried for parsing the header: larger than any GGUF's tensor
// data, smaller ones in case the file system refuses a huge file.
constexpr uint64_t kProbeExtents[] = {uint64_t{1} << 40, uint64_t{1} << 36, uint64_t{1} << 32};

// Parses `header` (already written to fd) with the core's reader, behind a
// sparse hole that stands in for the tensor data.
Expected<std::vector<TensorPlan>> plan(int fd, const std::filesystem::path& header_path,
                                       const std::filesystem::path& out_path,
                                       std::span<const std::byte> header, uint64_t& alignment) {
    const uint64_t header_size = header.size();
    bool extended = false;
    for (uint64_t extent : kProbeExtents)
        if (::ftruncate(fd, static_cast<off_t>(header_size + extent)) == 0) {
            extended = true;
            break;
        }
    if (!extended) return errno_error(out_path, "cannot extend (sparse) to parse the header");

    auto file = ferrox::gguf::File::open(out_path);
    if (!file) {
        // The hole reads as zeros, so a truncated header fails there in odd
        // ways; the header parsed alone names its own path and says what is
        // missing (it cannot parse cleanly if the padded copy failed).
        const auto alone =
            ferrox::gguf::File::parse(std::make_shared<const ferrox::gguf::MappedFile>(
                ferrox::gguf::MappedFile::copy_of(header, header_path)));
        return alone ? file.error() : alone.error();
    }
    if (file->data_offset() != header_size)
        return make_error(
            "{}: {} bytes, but its tensor data section starts at offset {}; "
            "expected exactly the header that `strip` writes",
            header_path.string(), header_size, file->data_offset());
    alignment = file->alignment();
    std::vector<TensorPlan> tensors;
    for (const auto& t : file->tensors()) {
        if (!supported(t.kind()))
            return make_error(
                "{}: tensor '{}' has kind {}, which fill cannot synthesise "
                "(see --help for the supported kinds)",
                header_path.string(), t.name(), ferrox::kind_name(t.kind()));
        tensors.push_back({t.name(), t.kind(), static_cast<uint32_t>(t.shape().size()),
                           t.row_length(), t.element_count(), t.byte_size(), t.file_offset()});
    }
    return tensors;
}

Expected<void> fill_model(const std::filesystem::path& header_path,
                          const std::filesystem::path& out, uint64_t seed) {
    const auto start = std::chrono::steady_clock::now();
    auto header = read_whole(header_path);
    if (!header) return header.error();

    const Fd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return errno_error(out, "cannot create");
    if (auto ok = write_all(fd.get(), out, header->data(), header->size(), 0); !ok)
        return ok.error();

    uint64_t alignment = ferrox::gguf::kDefaultAlignment;
    auto tensors = plan(fd.get(), header_path, out, *header, alignment);
    if (!tensors) return tensors.error();

    uint64_t end = header->size();
    for (const auto& t : *tensors) end = std::max(end, t.file_offset + t.byte_size);
    end = (end + alignment - 1) / alignment * alignment;  // as GGUF writers pad the last tensor
    // Cutting the scratch hole back leaves every gap between tensors zero.
    if (::ftruncate(fd.get(), static_cast<off_t>(end)) != 0)
        return errno_error(out, fmt::format("cannot set the size to {} bytes", end));

    std::sort(tensors->begin(), tensors->end(), [](const TensorPlan& a, const TensorPlan& b) {
        return a.file_offset < b.file_offset;
    });
    std::vector<uint8_t> buffer;
    for (std::size_t i = 0; i < tensors->size(); ++i) {
        const TensorPlan& t = (*tensors)[i];
        // One stream per tensor (by file position), so a tensor's bytes do not
        // depend on how much data came before it.
        Rng rng(seed ^ (t.file_offset * 0x9e3779b97f4a7c15ull));
        synthesise(t, rng, buffer);
        if (auto ok = write_all(fd.get(), out, buffer.data(), buffer.size(), t.file_offset); !ok)
            return ok.error();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("{}: {} bytes ({} header + {} tensors, seed {}) in {:.2f} s\n", out.string(), end,
               header->size(), tensors->size(), seed, seconds);
    return {};
}

int usage_error(std::string_view problem) {
    fmt::print(stderr, "ferrox_synth_gguf: {}\n(see ferrox_synth_gguf --help)\n", problem);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    for (auto a : args)
        if (a == "--help" || a == "-h") {
            fmt::print("{}", kUsage);
            return 0;
        }
    if (args.empty()) return usage_error("no mode given: strip or fill");

    std::vector<std::string_view> positional;
    uint64_t seed = 1;
    bool seed_given = false;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--seed") {
            if (i + 1 >= args.size()) return usage_error("--seed needs a number");
            const std::string_view text = args[++i];
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
            if (ec != std::errc{} || end != text.data() + text.size())
                return usage_error(fmt::format("--seed '{}' is not an unsigned integer", text));
            seed_given = true;
        } else if (args[i].starts_with("-") && args[i].size() > 1) {
            return usage_error(fmt::format("unknown option '{}'", args[i]));
        } else {
            positional.push_back(args[i]);
        }
    }

    Expected<void> result;
    if (args[0] == "strip") {
        if (seed_given) return usage_error("--seed applies to fill only");
        if (positional.size() != 2) return usage_error("strip takes IN.gguf OUT.header");
        result = strip_model(positional[0], positional[1]);
    } else if (args[0] == "fill") {
        if (positional.size() != 2) return usage_error("fill takes OUT.header OUT.gguf");
        std::error_code ec;
        if (std::filesystem::equivalent(positional[0], positional[1], ec))
            return usage_error("fill would overwrite its own header");
        result = fill_model(positional[0], positional[1], seed);
        // No half-written model is left behind to be benchmarked by mistake.
        if (!result) std::filesystem::remove(std::filesystem::path(positional[1]), ec);
    } else {
        return usage_error(fmt::format("unknown mode '{}': strip or fill", args[0]));
    }
    if (!result) {
        fmt::print(stderr, "ferrox_synth_gguf: {}\n", result.error().message());
        return 1;
    }
    return 0;
}
