// `ferrox bench`: MATVEC and GEMM through the dispatch layer on synthetic
// weights, per kind, shape and batch size; medians and spreads, never a
// single run. Weights rotate over >= --rotate-mib of distinct copies so decode
// is measured cold (from memory, not cache) unless --hot.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench_memory.h"
#include "bench_sizes.h"
#include "commands/commands.h"
#include "ferrox/dispatch.h"
#include "ferrox/log.h"
#include "ferrox/quant/reference.h"
#include "ferrox/quant_kind.h"
#include "flag_checks.h"
#include "format.h"
#include "model_session.h"
#include "output.h"

namespace ferrox::cli {
namespace {

struct BenchOptions {
    std::vector<std::string> kinds{"Q8_0", "Q5_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};
    std::vector<std::string> shapes{"4096x4096", "4096x14336"};
    std::vector<uint64_t> batch{1, 512};
    unsigned threads = 0;  // 0: the config's
    unsigned reps = 15;
    uint64_t rotate_mib = 1024;
    bool hot = false;
    bool json = false;
    uint64_t seed = 1;
};

struct KernelRow {
    std::string kind, shape;
    uint64_t n = 0;
    std::string backend, path;
    double median_s = 0, p10_s = 0, p90_s = 0;
    double weight_gbs = 0, gflops = 0;
    double bandwidth_fraction = 0;  // weight GB/s over the measured read bandwidth
};

// The machine's memory read bandwidth at `threads` threads, measured now:
// each thread sums its slice of a buffer of >= `mib` MiB; median and best of
// several passes (the first, which faults pages in, is not timed). Each pass
// is timed twice, as a plain stream and with a software prefetch 1 KiB
// ahead, and the faster counts: on some hosts the hardware prefetchers alone
// reach little over half of what the memory delivers (seen: 10.4 against
// 17.5 GB/s on one core), and a ceiling the kernels can beat is no ceiling.
struct Bandwidth {
    double median_gbs = 0, best_gbs = 0;
    bool huge_pages = false;  // the probe's memory took the MADV_HUGEPAGE advice
};

// One thread's sum over [p, p + words), 64 bytes a step. Cloned per ISA
// (picked when the program loads): the widest loads keep the most bytes in
// flight per instruction, as the kernels' own loads do.
__attribute__((target_clones("avx512f", "avx2", "default"))) void sum_stream(const uint64_t* p,
                                                                             uint64_t words,
                                                                             bool prefetch,
                                                                             uint64_t* out) {
    constexpr uint64_t kAheadWords = 1024 / sizeof(uint64_t);
    uint64_t acc[8] = {};
    for (uint64_t i = 0; i + 8 <= words; i += 8) {
        if (prefetch) __builtin_prefetch(p + i + kAheadWords);
        for (int l = 0; l < 8; ++l) acc[l] += p[i + static_cast<uint64_t>(l)];
    }
    std::memcpy(out, acc, sizeof acc);
}

Expected<Bandwidth> measure_read_bandwidth(unsigned threads, uint64_t mib) {
    const uint64_t words = (std::max<uint64_t>(mib, 1024) << 20) / sizeof(uint64_t);
    auto memory = HugePageBuffer::allocate(words * sizeof(uint64_t));  // as the weight copies
    if (!memory) return memory.error();
    const std::span<uint64_t> buffer(reinterpret_cast<uint64_t*>((*memory)->bytes().data()), words);
    for (uint64_t i = 0; i < words; ++i) buffer[i] = i;
    std::vector<uint64_t> sink(threads * 8);
    auto pass = [&](bool prefetch) {
        std::vector<std::thread> pool;
        const uint64_t slice = words / threads;
        for (unsigned t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                sum_stream(buffer.data() + t * slice, slice, prefetch, sink.data() + t * 8);
            });
        for (auto& th : pool) th.join();
    };
    pass(false);
    std::vector<double> rates;
    for (int rep = 0; rep < 7; ++rep) {
        double best_s = 0;
        for (const bool prefetch : {false, true}) {
            const auto t0 = std::chrono::steady_clock::now();
            pass(prefetch);
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            best_s = best_s == 0 ? s : std::min(best_s, s);
        }
        rates.push_back(static_cast<double>(words * sizeof(uint64_t)) / best_s / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    return Bandwidth{rates[rates.size() / 2], rates.back(), (*memory)->huge_pages_advised()};
}

// Rows quantized by the reference quantizer; the rest of the matrix repeats
// them. The kernels' speed does not depend on the values (every row is read
// from its own address), and the K-quant reference quantizer needs minutes
// for one 4096x14336 matrix.
constexpr uint64_t kDistinctRows = 64;

Expected<std::vector<std::byte>> quantized_weights(ferrox_kind kind, uint64_t rows, uint64_t cols,
                                                   uint64_t seed) {
    const auto per_row = row_bytes(kind, cols);
    if (!per_row)
        return make_error("{} needs a row length that is a multiple of {}", kind_name(kind),
                          kind_traits(static_cast<uint32_t>(kind))->block_elements);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> row(cols);
    std::vector<std::byte> out(rows * *per_row);
    const uint64_t distinct = std::min(rows, kDistinctRows);
    for (uint64_t r = 0; r < distinct; ++r) {
        for (auto& v : row) v = normal(rng);
        if (!quant::quantize_row(kind, row.data(), out.data() + r * *per_row, cols)) {
            // No quantizer for this kind: random codes with a small f16 scale in
            // the first field (speed does not depend on the values).
            std::uniform_int_distribution<int> byte(0, 255);
            for (auto& b : out) b = static_cast<std::byte>(byte(rng));
            const uint32_t block = kind_traits(static_cast<uint32_t>(kind))->block_bytes;
            const uint16_t scale = 0x2000;  // f16 ~0.0078
            for (uint64_t off = 0; off + 2 <= out.size(); off += block)
                std::memcpy(&out[off], &scale, 2);
            return out;
        }
    }
    for (uint64_t r = distinct; r < rows; ++r)
        std::memcpy(out.data() + r * *per_row, out.data() + (r % distinct) * *per_row, *per_row);
    return out;
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const double idx = p * static_cast<double>(v.size() - 1);
    return v[static_cast<size_t>(idx + 0.5)];
}

int run_bench(CommonOptions& common, const BenchOptions& o) {
    auto config = load_session_config(common);
    if (!config) {
        logger().error("{}", config.error().message());
        return kExitBadInput;
    }
    if (o.threads)
        for (auto& b : config->backends)
            if (b.name == "cpu") b.set_option("threads", std::to_string(o.threads), "--threads");
    // The flags first: a usage error is one whatever the plugins do, and it
    // comes before the bandwidth run, which takes seconds.
    for (const auto& kind_text : o.kinds) {
        if (!kind_traits(kind_text))
            return usage_error("--kinds", "unknown kind '{}' (ferrox backends lists them)",
                               kind_text);
        for (const auto& shape_text : o.shapes) {  // and every size, before any allocation
            auto shape = parse_shape(shape_text);
            auto fits = shape ? bench_footprint(kind_traits(kind_text)->id, *shape, o.batch, o.hot,
                                                o.rotate_mib)
                              : Expected<BenchFootprint>(shape.error());
            if (!fits) {
                logger().error("{}", fits.error().message());
                return kExitBadInput;
            }
        }
    }
    LoaderOptions loader;
    loader.plugin_dirs = common.plugin_dirs;
    PluginSet plugins = PluginSet::load(*config, loader);
    for (const PluginRecord* r : plugins.option_errors()) {
        logger().error("{}", r->reason);
        return kExitBadInput;
    }
    if (plugins.selected().empty()) {
        logger().error("no backend is ready; see `ferrox backends`");
        return kExitFailure;
    }
    KernelRegistry registry;
    Dispatcher dispatch(plugins.selected(), registry);
    const unsigned bw_threads =
        o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
    auto measured = measure_read_bandwidth(bw_threads, o.rotate_mib);
    if (!measured) {
        logger().error("{}", measured.error().message());
        return kExitFailure;
    }
    const Bandwidth bandwidth = *measured;

    std::vector<KernelRow> rows;
    for (const auto& kind_text : o.kinds) {
        const KindTraits* traits = kind_traits(kind_text);
        for (const auto& shape_text : o.shapes) {
            auto shape = parse_shape(shape_text);
            if (!shape) {
                logger().error("{}", shape.error().message());
                return kExitBadInput;
            }
            const auto [r, c] = *shape;
            const uint64_t copies =
                bench_footprint(traits->id, *shape, o.batch, o.hot, o.rotate_mib)->copies;
            auto bytes = quantized_weights(traits->id, r, c, o.seed);
            if (!bytes) {
                logger().error("{}", bytes.error().message());
                return kExitBadInput;
            }
            // Distinct copies so each call streams from memory, not cache:
            // back to back, each 64-byte aligned, in huge-page memory as a
            // mapped model is (bench_memory.h).
            const uint64_t stride = (bytes->size() + 63) / 64 * 64;
            auto memory = HugePageBuffer::allocate(copies * stride);
            if (!memory) {
                logger().error("{}", memory.error().message());
                return kExitFailure;
            }
            std::vector<WeightMatrix> mats;
            for (uint64_t i = 0; i < copies; ++i) {
                const std::span<std::byte> copy =
                    (*memory)->bytes().subspan(i * stride, bytes->size());
                std::memcpy(copy.data(), bytes->data(), bytes->size());
                auto m = WeightMatrix::borrowed(fmt::format("bench.{}", i), traits->id, r, c, copy,
                                                *memory);
                if (!m) {
                    logger().error("{}", m.error().message());
                    return kExitFailure;
                }
                mats.push_back(std::move(*m));
            }
            for (uint64_t n : o.batch) {
                std::mt19937_64 rng(o.seed + n);
                std::normal_distribution<float> normal(0.0f, 1.0f);
                std::vector<float> x(n * c), y(n * r);
                for (auto& v : x) v = normal(rng);
                auto once = [&](const WeightMatrix& m) {
                    return n == 1 ? dispatch.apply(m, "bench", x, y)
                                  : dispatch.apply_batch(m, "bench", x, n, y);
                };
                for (const auto& m : mats)  // warm-up: prepares every copy
                    if (auto ok = once(m); !ok) {
                        logger().error("{}", ok.error().message());
                        return kExitFailure;
                    }
                std::vector<double> times;
                size_t next = 0;
                // A prefill call is long: fewer repetitions give a stable median.
                const unsigned reps = n == 1 ? o.reps : std::max(3u, o.reps / 5);
                for (unsigned rep = 0; rep < reps; ++rep) {
                    const auto t0 = std::chrono::steady_clock::now();
                    if (auto ok = once(mats[next]); !ok) {
                        logger().error("{}", ok.error().message());
                        return kExitFailure;
                    }
                    times.push_back(
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                            .count());
                    next = (next + 1) % mats.size();
                }
                const Plan plan =
                    dispatch.plan(n == 1 ? FERROX_OP_MATVEC : FERROX_OP_GEMM, traits->id);
                KernelRow row;
                row.kind = std::string(traits->name);
                row.shape = shape_text;
                row.n = n;
                row.backend = plan.runner ? dispatch.backends()[*plan.runner]->name() : "-";
                row.path = plan.steps.empty() ? "-" : plan.steps.back().detail;
                row.median_s = percentile(times, 0.5);
                row.p10_s = percentile(times, 0.1);
                row.p90_s = percentile(times, 0.9);
                row.weight_gbs = static_cast<double>(bytes->size()) / row.median_s / 1e9;
                row.gflops = 2.0 * static_cast<double>(r * c * n) / row.median_s / 1e9;
                row.bandwidth_fraction = row.weight_gbs / bandwidth.median_gbs;
                rows.push_back(row);
            }
        }
    }

    if (o.json) {
        nlohmann::json doc;
        doc["threads"] = bw_threads;
        doc["read_bandwidth_gb_per_s"] = {{"median", bandwidth.median_gbs},
                                          {"best", bandwidth.best_gbs}};
        doc["huge_pages_advised"] = bandwidth.huge_pages;
        doc["reps"] = o.reps;
        doc["weights"] =
            o.hot ? "hot" : fmt::format("cold (rotating over >= {} MiB)", o.rotate_mib);
        doc["results"] = nlohmann::json::array();
        for (const auto& row : rows)
            doc["results"].push_back({{"kind", row.kind},
                                      {"shape", row.shape},
                                      {"n", row.n},
                                      {"backend", row.backend},
                                      {"kernel", row.path},
                                      {"median_s", row.median_s},
                                      {"p10_s", row.p10_s},
                                      {"p90_s", row.p90_s},
                                      {"weight_gb_per_s", row.weight_gbs},
                                      {"gflop_per_s", row.gflops},
                                      {"fraction_of_read_bandwidth", row.bandwidth_fraction}});
        print_json(std::move(doc));
        return kExitOk;
    }
    std::cout << fmt::format("weights: {}; {} reps (n=1), fewer for n>1; median [p10, p90]\n",
                             o.hot ? "hot (cache-resident if they fit)"
                                   : fmt::format("cold, rotating over >= {} MiB", o.rotate_mib),
                             o.reps);
    std::cout << fmt::format(
        "memory read bandwidth at {} threads (this run): median {:.1f} GB/s, best {:.1f} GB/s; "
        "weights and probe in {}\n\n",
        bw_threads, bandwidth.median_gbs, bandwidth.best_gbs,
        bandwidth.huge_pages ? "memory advised for 2 MiB pages"
                             : "4 KiB pages (the kernel refused MADV_HUGEPAGE)");
    std::cout << "| kind | shape | n | backend | kernel | median ms | p10–p90 ms | weight GB/s | "
                 "of read BW | GFLOP/s |\n"
                 "|---|---|---:|---|---|---:|---:|---:|---:|---:|\n";
    for (const auto& row : rows)
        std::cout << fmt::format(
            "| {} | {} | {} | {} | {} | {:.3f} | {:.3f}–{:.3f} | {:.2f} | {:.0f}% | {:.1f} |\n",
            row.kind, row.shape, row.n, row.backend, row.path, row.median_s * 1e3, row.p10_s * 1e3,
            row.p90_s * 1e3, row.weight_gbs, 100.0 * row.bandwidth_fraction, row.gflops);
    return kExitOk;
}

}  // namespace

Command add_bench_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand("bench", "Benchmark MATVEC (n=1) and GEMM (n>1) per quant kind");
    auto o = std::make_shared<BenchOptions>();
    cmd->add_option("--kinds", o->kinds, "Quant kinds, any case, comma-separated (Q4_K,q8_0)")
        ->delimiter(',');
    cmd->add_option("--shape", o->shapes, "Weight shapes ROWSxCOLS")->delimiter(',');
    cmd->add_option("-n,--batch", o->batch, "Activations per call: 1 = MATVEC, more = GEMM")
        ->delimiter(',');
    add_threads_flag(*cmd, o->threads);
    cmd->add_option("--reps", o->reps, "Timed repetitions")->check(CLI::Range(1u, 100000u));
    cmd->add_option("--rotate-mib", o->rotate_mib, "MiB of distinct weight copies to rotate over")
        ->check(CLI::Range(uint64_t{0}, kMaxRotateMib));
    cmd->add_flag("--hot", o->hot, "Reuse one weight copy (cache-hot) instead of rotating");
    cmd->add_option("--seed", o->seed, "Random seed for weights and activations")
        ->check(unsigned_digits());
    cmd->add_flag("--json", o->json, "Print JSON instead of a markdown table");
    return {cmd, [o, &common] { return run_bench(common, *o); }};
}

}  // namespace ferrox::cli
