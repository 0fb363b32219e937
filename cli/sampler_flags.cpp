#include "sampler_flags.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ferrox/grammar/json_schema.h"
#include "flag_checks.h"
#include "input.h"

namespace ferrox::cli {
namespace {

// A real-valued flag: finite, in [lo, hi] ((lo, hi] when open_low).
struct RealFlag {
    const char* name;
    const char* help;
    double lo, hi;
    bool open_low;
};

// A count: decimal digits only, so "-1" is refused rather than wrapped.
struct CountFlag {
    const char* name;
    const char* help;
};

constexpr RealFlag kTemperature{"--temp", "Temperature; 0 = greedy", 0, 100, false};
constexpr RealFlag kTopP{"--top-p", "Top-p, 1 = off", 0, 1, false};
constexpr RealFlag kMinP{"--min-p", "Min-p, 0 = off", 0, 1, false};
constexpr RealFlag kRepeatPenalty{"--repeat-penalty", "Repetition penalty, 1 = off", 0, 100, true};
constexpr CountFlag kSeed{"--seed", "RNG seed (same seed, same output)"};
constexpr CountFlag kTopK{"--top-k", "Top-k, 0 = off"};
constexpr CountFlag kRepeatLastN{"--repeat-last-n",
                                 "Tokens the repetition penalty looks back over"};

template <class T>
void add_real(CLI::App& cmd, const RealFlag& flag, T& value) {
    cmd.add_option(flag.name, value, fmt::format("{} (default {})", flag.help, value))
        ->check(finite_in(flag.lo, flag.hi, flag.open_low));
}

template <class T>
void add_count(CLI::App& cmd, const CountFlag& flag, T& value, bool show_default = true) {
    const std::string help =
        show_default ? fmt::format("{} (default {})", flag.help, value) : flag.help;
    cmd.add_option(flag.name, value, help)->check(unsigned_digits());
}

// The two parameter structs spell their members alike; one body serves both.
template <class Params>
void add_all(CLI::App& cmd, Params& p) {
    add_count(cmd, kSeed, p.seed, false);
    add_real(cmd, kTemperature, p.temperature);
    add_count(cmd, kTopK, p.top_k);
    add_real(cmd, kTopP, p.top_p);
    add_real(cmd, kMinP, p.min_p);
    add_real(cmd, kRepeatPenalty, p.repeat_penalty);
    add_count(cmd, kRepeatLastN, p.repeat_last_n);
}

}  // namespace

void add_sampler_flags(CLI::App& cmd, ferrox_sampler_params& params) { add_all(cmd, params); }
void add_sampler_flags(CLI::App& cmd, SamplerParams& params) { add_all(cmd, params); }

void add_grammar_flags(CLI::App& cmd, GrammarFlags& flags) {
    auto* text = cmd.add_option("--grammar", flags.text,
                                "A GBNF grammar (llama.cpp's format) the output must match");
    auto* file =
        cmd.add_option("--grammar-file", flags.file, "Read the GBNF grammar from this file");
    auto* schema = cmd.add_option("--json-schema", flags.schema_text,
                                  "A JSON schema the output must validate against "
                                  "(docs/structured-output.md)");
    auto* schema_file = cmd.add_option("--json-schema-file", flags.schema_file,
                                       "Read the JSON schema from this file");
    const std::vector<CLI::Option*> all{text, file, schema, schema_file};
    for (CLI::Option* a : all)
        for (CLI::Option* b : all)
            if (a != b) a->excludes(b);
}

Expected<std::optional<GrammarSource>> read_grammar_source(const GrammarFlags& flags) {
    // The prompt files' bound here; the parsers refuse past theirs by name.
    const auto from_file = [](const std::string& path, const char* flag,
                              bool is_schema) -> Expected<std::optional<GrammarSource>> {
        auto read = read_text_file(path, flag);
        if (!read) return read.error();
        return std::optional<GrammarSource>(GrammarSource{std::move(*read), is_schema, path});
    };
    if (!flags.schema_file.empty()) return from_file(flags.schema_file, "--json-schema-file", true);
    if (!flags.schema_text.empty())
        return std::optional<GrammarSource>(
            GrammarSource{flags.schema_text, true, "--json-schema"});
    if (!flags.file.empty()) return from_file(flags.file, "--grammar-file", false);
    if (!flags.text.empty())
        return std::optional<GrammarSource>(GrammarSource{flags.text, false, "--grammar"});
    return std::optional<GrammarSource>();
}

Expected<std::shared_ptr<const grammar::Grammar>> compile_grammar(const GrammarSource& source) {
    if (source.is_schema) {
        // Keys kept in their order: properties are generated in schema order.
        nlohmann::ordered_json schema;
        try {
            schema = nlohmann::ordered_json::parse(source.text);
        } catch (const nlohmann::json::parse_error& e) {
            return make_error("{}: not JSON: {}", source.where, e.what());
        }
        auto g = grammar::compile_json_schema(schema);
        if (!g) return make_error("{}: {}", source.where, g.error().message());
        return std::move(*g);
    }
    auto parsed = grammar::parse_gbnf(source.text, grammar::GrammarLimits{});
    if (!parsed) return make_error("{}: {}", source.where, parsed.error().message());
    return std::move(*parsed);
}

Expected<std::shared_ptr<const grammar::Grammar>> load_grammar(const GrammarFlags& flags) {
    auto source = read_grammar_source(flags);
    if (!source) return source.error();
    if (!*source) return std::shared_ptr<const grammar::Grammar>();
    return compile_grammar(**source);
}

void add_n_predict_flag(CLI::App& cmd, int& n_predict, NPredict meaning) {
    constexpr int kMost = std::numeric_limits<int>::max();
    if (meaning == NPredict::Total) {
        cmd.add_option("-n,--n-predict", n_predict,
                       fmt::format("Tokens to generate (default {})", n_predict))
            ->check(CLI::Range(0, kMost));
    } else {
        cmd.add_option("-n,--n-predict", n_predict,
                       "Tokens per answer at most (default -1: until the end of the turn)")
            ->check(CLI::Range(-1, kMost));
    }
}

}  // namespace ferrox::cli
