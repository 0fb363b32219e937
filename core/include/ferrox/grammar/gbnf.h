// GBNF, llama.cpp's grammar format, parsed into a compiled Grammar: rules of
// alternatives, each a sequence of character sets and rule references. Groups
// and repetitions become synthesized rules, so the matcher (matcher.h) sees
// three kinds of symbol only. docs/grammar.md lists the supported subset;
// anything else is refused by name with its line:column.
//
// Grammars come from clients (a request's `grammar` field), so every size the
// source controls is bounded before it is used (GrammarLimits): llama-server
// once overflowed a heap buffer on a crafted grammar (llama.cpp#22234).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferrox/api.h"
#include "ferrox/expected.h"

namespace ferrox::grammar {

// Each bound, when passed, is an error that names it.
struct GrammarLimits {
    size_t max_source_bytes = 256 * 1024;
    size_t max_rules = 4096;           // rules, synthesized ones (groups, repetitions) included
    size_t max_symbols = 1u << 20;     // symbols after repetitions are expanded
    uint32_t max_nesting = 64;         // parentheses inside parentheses
    uint32_t max_repetition = 2000;    // m and n of {m,n} (llama.cpp's own threshold)
    size_t max_stacks = 1024;          // live parse stacks after one character
    size_t max_stack_depth = 4096;     // rule references one stack may hold
    size_t max_expansions = 1u << 16;  // rule expansions to advance over one character
    // true: a character is well-formed UTF-8 only (RFC 3629: no overlong form,
    // no surrogate, nothing past U+10FFFF), so the text always decodes to the
    // characters the grammar counted -- what grammars made from JSON schemas
    // need for maxLength. false: as llama.cpp decodes, where E0 82 80 counts
    // as one U+0080 but reaches a client as three U+FFFD.
    bool strict_utf8 = false;
};

// A set of code points: sorted, disjoint, inclusive ranges, or their
// complement when `negated` (`.` is the complement of nothing).
struct CharSet {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    bool negated = false;

    bool contains(uint32_t cp) const;
    // Whether any code point in [lo, hi] is in the set (a partial UTF-8
    // sequence stands for such a range).
    bool intersects(uint32_t lo, uint32_t hi) const;
};

struct Symbol {
    enum class Kind : uint8_t { End, Chars, Rule };
    Kind kind;
    uint32_t index;  // Chars: into Grammar::charsets; Rule: a rule id; End: 0
};

struct FERROX_API Grammar {
    // Every alternative of every rule, one after another, each closed by an End.
    std::vector<Symbol> symbols;
    // Per rule, where each of its alternatives starts in `symbols`.
    std::vector<std::vector<uint32_t>> alternatives;
    std::vector<CharSet> charsets;
    std::vector<std::string> rule_names;  // synthesized rules: "<parent>-<n>"
    uint32_t root = 0;
    GrammarLimits limits;
};

// Parses and checks `source`: syntax, undefined rules, a missing `root`, left
// recursion (named), and every limit. Errors read "grammar:LINE:COL: ...".
FERROX_API Expected<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view source,
                                                               const GrammarLimits& limits = {});

}  // namespace ferrox::grammar
