// `ferrox batched-bench`: prefill and decode throughput of many sequences in
// one context, with llama.cpp's llama-batched-bench habits: for each -npl,
// npl prompts of -npp tokens (one shared prompt with --pps), then -ntg decode
// steps of npl tokens each. Aggregate tokens/s for both phases, time per
// decode step, the cells the cache used and the process's RSS, and its peak
// against the model file + KV + 10% budget; --reps runs
// each row several times (median, min and max). A program, never a test.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "commands/commands.h"
#include "ferrox/log.h"
#include "ferrox/model/context.h"
#include "model_session.h"
#include "stopwatch.h"

namespace ferrox::cli {
namespace {

struct BatchedBenchOptions {
    std::string model_path;
    ModelChoices model;
    std::vector<uint32_t> npp{128}, ntg{128}, npl{1, 2, 4, 8, 16, 32};
    // llama-batched-bench's physical batch (-ub 512): the scratch a decode
    // call sizes, and a prefill no slower than at 2048 here.
    uint32_t n_batch = 512;
    bool pps = false;
    unsigned reps = 1;
    bool json = false;
};

struct Stat {
    double median = 0, min = 0, max = 0;
};

Stat stat_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v.front(), v.back()};
}

struct BatchRow {
    uint32_t pp = 0, tg = 0, pl = 0, n_kv = 0, cells_used = 0;
    Stat t_pp, t_tg;  // seconds
    uint64_t rss_kib = 0;
};

// A /proc/self/status field in KiB: "VmRSS" (now) or "VmHWM" (the peak so far).
uint64_t status_kib(std::string_view field) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
            line[field.size()] == ':')
            return std::stoull(line.substr(field.size() + 1));
    return 0;
}
uint64_t rss_kib() { return status_kib("VmRSS"); }

// The process's peak RSS against the budget #11 set: the model file plus
// the KV cache of the cells the largest row used, plus 10% (as
// bench/model_vs_llama.py counts a single sequence). The tensor bytes are
// given too, for a reader who counts only those as the weights.
nlohmann::json memory_report(const Engine& e, uint32_t cells_used) {
    const uint64_t kv_bytes = e.model().kv_cache_bytes(cells_used);
    uint64_t tensor_bytes = 0;
    for (const gguf::Shard& shard : e.file().shards()) tensor_bytes += shard.tensor_bytes;
    const uint64_t file_bytes = e.file().mapped_bytes();
    const uint64_t budget = (file_bytes + kv_bytes) * 11 / 10;
    const uint64_t peak = status_kib("VmHWM") * 1024;
    return {{"peak_rss_bytes", peak},         {"model_file_bytes", file_bytes},
            {"tensor_bytes", tensor_bytes},   {"kv_cells", cells_used},
            {"kv_bytes", kv_bytes},           {"budget_bytes", budget},
            {"within_budget", peak <= budget}};
}

// One (npp, ntg, npl) measurement: prefill seconds, decode seconds.
Expected<std::pair<double, double>> measure(model::Context& c, uint32_t vocab, uint32_t npp,
                                            uint32_t ntg, uint32_t npl, bool pps,
                                            std::mt19937& rng) {
    c.clear();
    std::uniform_int_distribution<int32_t> tok(0,
                                               static_cast<int32_t>(std::min(vocab, 30000u)) - 1);
    model::Batch b;
    const uint32_t n_batch = c.batch();
    const auto flush = [&]() -> Expected<void> {
        if (b.size() == 0) return {};
        auto st = c.decode(b);
        b.clear();
        if (!st) return make_error("{}: {}", model::decode_code_name(st.code), st.message);
        return {};
    };
    const auto t0 = Clock::now();
    const uint32_t prompts = pps ? 1 : npl;
    for (uint32_t s = 0; s < prompts; ++s)
        for (uint32_t i = 0; i < npp; ++i) {
            b.add(tok(rng), static_cast<int32_t>(i), {static_cast<int32_t>(s)}, i + 1 == npp);
            if (b.size() == n_batch)
                if (auto r = flush(); !r) return r.error();
        }
    if (auto r = flush(); !r) return r.error();
    if (pps)
        for (uint32_t s = 1; s < npl; ++s)
            if (auto r = c.seq_copy(0, static_cast<int32_t>(s), 0, -1); !r) return r.error();
    const double t_pp = seconds_since(t0);
    const auto t1 = Clock::now();
    for (uint32_t step = 0; step < ntg; ++step) {
        for (uint32_t s = 0; s < npl; ++s)
            b.add(tok(rng), static_cast<int32_t>(npp + step), {static_cast<int32_t>(s)}, true);
        if (auto r = flush(); !r) return r.error();
    }
    return std::pair{t_pp, seconds_since(t1)};
}

int run(const CommonOptions& common, const BatchedBenchOptions& o) {
    if (o.model.special)
        return usage_error("--special",
                           "batched-bench has no prompt text to parse (its prompts "
                           "are random token ids)");
    const uint32_t max_pl = *std::max_element(o.npl.begin(), o.npl.end());
    const uint32_t max_pp = *std::max_element(o.npp.begin(), o.npp.end());
    const uint32_t max_tg = *std::max_element(o.ntg.begin(), o.ntg.end());
    const uint32_t cells = (o.pps ? max_pp : max_pp * max_pl) + max_tg * max_pl;
    // Opened for exactly the context its rows need, planned once at load (-c
    // does not size it: the rows do).
    ModelChoices choices = o.model;
    choices.context = cells;
    choices.sequences = max_pl;
    choices.batch = o.n_batch;
    OpenFailure why = OpenFailure::None;
    auto engine = open_engine(common, o.model_path, choices, &why);
    if (!engine) {
        logger().error("{}", engine.error().message());
        return exit_status(why);
    }
    const Engine& e = **engine;
    const uint64_t rss_loaded = rss_kib();
    const model::ContextOptions co = e.context_options();
    auto ctx = model::Context::create(e.model(), co);
    if (!ctx) {
        logger().error("{}", ctx.error().message());
        return kExitBadInput;
    }
    std::mt19937 rng(1);
    const auto vocab = static_cast<uint32_t>(e.model().vocab());
    std::vector<BatchRow> rows;
    for (uint32_t pp : o.npp)
        for (uint32_t tg : o.ntg)
            for (uint32_t pl : o.npl) {
                BatchRow row{pp, tg, pl, (o.pps ? pp : pp * pl) + tg * pl, 0, {}, {}, 0};
                std::vector<double> tpp, ttg;
                for (unsigned r = 0; r < std::max(1u, o.reps); ++r) {
                    auto t = measure(**ctx, vocab, pp, tg, pl, o.pps, rng);
                    if (!t) {
                        logger().error("batched-bench: npp {} ntg {} npl {}: {}", pp, tg, pl,
                                       t.error().message());
                        return kExitFailure;
                    }
                    tpp.push_back(t->first);
                    ttg.push_back(t->second);
                }
                row.t_pp = stat_of(tpp);
                row.t_tg = stat_of(ttg);
                row.cells_used = (*ctx)->cells().used();
                row.rss_kib = rss_kib();
                rows.push_back(row);
                if (!o.json)
                    logger().info("npp {} ntg {} npl {}: decode {:.1f} tok/s", pp, tg, pl,
                                  double(tg) * pl / row.t_tg.median);
            }
    uint32_t most_cells = 0;
    for (const BatchRow& r : rows) most_cells = std::max(most_cells, r.cells_used);
    const nlohmann::json memory = memory_report(e, most_cells);
    if (o.json) {
        nlohmann::json out;
        out["memory"] = memory;
        out["model"] = o.model_path;
        out["pps"] = o.pps;
        out["reps"] = o.reps;
        out["n_batch"] = co.batch;
        out["n_ctx"] = co.context;
        out["rss_after_load_kib"] = rss_loaded;
        for (const BatchRow& r : rows) {
            const double pp_tokens = double(o.pps ? r.pp : r.pp * r.pl);
            const double tg_tokens = double(r.tg) * r.pl;
            out["rows"].push_back({{"npp", r.pp},
                                   {"ntg", r.tg},
                                   {"npl", r.pl},
                                   {"n_kv", r.n_kv},
                                   {"cells_used", r.cells_used},
                                   {"t_pp_s", r.t_pp.median},
                                   {"t_pp_min_s", r.t_pp.min},
                                   {"t_pp_max_s", r.t_pp.max},
                                   {"s_pp_tok_s", pp_tokens / r.t_pp.median},
                                   {"t_tg_s", r.t_tg.median},
                                   {"t_tg_min_s", r.t_tg.min},
                                   {"t_tg_max_s", r.t_tg.max},
                                   {"s_tg_tok_s", tg_tokens / r.t_tg.median},
                                   {"step_ms", 1e3 * r.t_tg.median / r.tg},
                                   {"rss_kib", r.rss_kib}});
        }
        std::cout << out.dump(2) << "\n";
        return kExitOk;
    }
    std::cout << fmt::format(
        "| {:>5} | {:>5} | {:>4} | {:>6} | {:>8} | {:>9} | {:>8} | {:>9} | {:>8} | {:>9} |\n", "PP",
        "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "step ms", "RSS MiB");
    std::cout << "|-------|-------|------|--------|----------|-----------|----------|-----------|"
                 "----------|-----------|\n";
    for (const BatchRow& r : rows) {
        const double pp_tokens = double(o.pps ? r.pp : r.pp * r.pl);
        const double tg_tokens = double(r.tg) * r.pl;
        std::cout << fmt::format(
            "| {:>5} | {:>5} | {:>4} | {:>6} | {:>8.3f} | {:>9.2f} | {:>8.3f} | {:>9.2f} | "
            "{:>8.2f} | {:>9.1f} |\n",
            r.pp, r.tg, r.pl, r.n_kv, r.t_pp.median, pp_tokens / r.t_pp.median, r.t_tg.median,
            tg_tokens / r.t_tg.median, 1e3 * r.t_tg.median / r.tg, double(r.rss_kib) / 1024);
    }
    if (o.reps > 1)
        std::cout << fmt::format("(medians of {} runs; --json gives min and max)\n", o.reps);
    constexpr double kMiB = 1024.0 * 1024.0;
    std::cout << fmt::format(
        "peak RSS {:.1f} MiB; budget (model file {:.1f} + KV of {} cells {:.1f}) x 1.1 = {:.1f} "
        "MiB: {}\n",
        static_cast<double>(memory["peak_rss_bytes"].get<uint64_t>()) / kMiB,
        static_cast<double>(memory["model_file_bytes"].get<uint64_t>()) / kMiB, most_cells,
        static_cast<double>(memory["kv_bytes"].get<uint64_t>()) / kMiB,
        static_cast<double>(memory["budget_bytes"].get<uint64_t>()) / kMiB,
        memory["within_budget"].get<bool>() ? "within" : "over");
    return kExitOk;
}

}  // namespace

Command add_batched_bench_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "batched-bench",
        "Prefill and decode throughput of many sequences in one context (llama-batched-bench)");
    auto o = std::make_shared<BatchedBenchOptions>();
    cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required();
    cmd->add_option("--npp", o->npp, "Prompt tokens per sequence (list; default 128)")
        ->delimiter(',')
        ->check(CLI::Range(1u, 1u << 20));
    cmd->add_option("--ntg", o->ntg, "Generated tokens per sequence (list; default 128)")
        ->delimiter(',')
        ->check(CLI::Range(1u, 1u << 20));
    cmd->add_option("--npl", o->npl, "Parallel sequences (list; default 1,2,4,8,16,32)")
        ->delimiter(',')
        ->check(CLI::Range(1u, 64u));
    cmd->add_flag("--pps", o->pps, "One prompt shared by every sequence (copied cells)");
    cmd->add_option(
           "-b,--batch-size", o->n_batch,
           "Tokens per decode call: the compute batch, llama-batched-bench's -ub (default 512)")
        ->check(CLI::Range(1u, 1u << 20));
    cmd->add_option("--reps", o->reps, "Runs per row; the table shows medians (default 1)")
        ->check(CLI::Range(1u, 100u));
    cmd->add_flag("--json", o->json, "JSON instead of the markdown table");
    add_model_choices(*cmd, o->model);
    return {cmd, [o, &common]() { return run(common, *o); }};
}

}  // namespace ferrox::cli
