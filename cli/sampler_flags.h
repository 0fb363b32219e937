// The sampling flags, declared once: name, help (with the default the
// parameters hold), and the range each value must lie in. Every front end that
// takes them registers them from here, so `chat` cannot accept what `run`
// refuses (before, `chat --temp nan --top-p 2 -n -7` ran).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "ferrox/expected.h"
#include "ferrox/ferrox.h"
#include "ferrox/grammar/gbnf.h"
#include "ferrox/sampling.h"

namespace ferrox::cli {

// --seed, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// writing into `params`; the values it holds now are the defaults the help shows.
// One overload per parameter struct a front end draws with (the C API's, the core's).
void add_sampler_flags(CLI::App& cmd, ferrox_sampler_params& params);
void add_sampler_flags(CLI::App& cmd, SamplerParams& params);

// --grammar TEXT / --grammar-file PATH: a GBNF grammar every answer must match
// (docs/grammar.md); --json-schema TEXT / --json-schema-file PATH: a JSON
// schema the answer must validate against (docs/structured-output.md). At most
// one of the four.
struct GrammarFlags {
    std::string text, file;
    std::string schema_text, schema_file;
};
void add_grammar_flags(CLI::App& cmd, GrammarFlags& flags);
// The text the flags give (read from the file when one is named): GBNF, or a
// JSON schema when is_schema; `where` is the flag or the file, for errors.
struct GrammarSource {
    std::string text;
    bool is_schema = false;
    std::string where;
};
// std::nullopt when none of the four flags was given.
Expected<std::optional<GrammarSource>> read_grammar_source(const GrammarFlags& flags);
// The source parsed and checked (a schema converted first). Errors start
// with its `where`.
Expected<std::shared_ptr<const grammar::Grammar>> compile_grammar(const GrammarSource& source);
// Both: nullptr when none was given.
Expected<std::shared_ptr<const grammar::Grammar>> load_grammar(const GrammarFlags& flags);

// What -n/--n-predict means for a command.
enum class NPredict {
    Total,      // tokens to generate, 0..INT_MAX (run)
    PerAnswer,  // tokens per answer, -1 (until the end of the turn) or 0..INT_MAX (chat)
};
void add_n_predict_flag(CLI::App& cmd, int& n_predict, NPredict meaning);

}  // namespace ferrox::cli
