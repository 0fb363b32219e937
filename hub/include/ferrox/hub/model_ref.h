// Model references: which file(s) of which hub repository a name means.
//   hf://OWNER/REPO/FILE.gguf   one file (a split file's whole set)
//   OWNER/REPO:QUANT            the repo's .gguf whose name holds QUANT (any case)
//   hf://OWNER/REPO[:QUANT]     the same, spelled as a URL
// Pure text rules, no I/O: the puller and the offline lookup both choose the
// files here, from the hub's listing or the store's, so they cannot differ.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::hub {

struct ModelRef {
    std::string owner, repo;
    std::string file;   // hf://OWNER/REPO/FILE: the file named; empty: chosen by `quant`
    std::string quant;  // the tag to look for; empty with no file: the default rule
    std::string repo_id() const { return owner + "/" + repo; }
    std::string text() const;  // the canonical spelling, for messages and --json
};

// Whether a model argument (-m, server.model) is a reference rather than a
// path: "hf://..." always; OWNER/REPO:QUANT when no file of that name exists
// (the caller checks that). Anything else is a path, unchanged.
bool is_reference_syntax(std::string_view arg);

// Parses a reference; `ferrox pull` also takes a bare OWNER/REPO. The Error
// names the part that is wrong.
Expected<ModelRef> parse_model_ref(std::string_view text);

// A file name from the hub (or the store) that may become a path under
// OWNER/REPO/: relative, '/'-separated parts of [A-Za-z0-9._+=@,-] (no '.',
// '..', empty or hidden part), at most 4 parts and 255 bytes. The Error quotes
// the name escaped and says which rule it breaks.
Expected<void> check_file_name(std::string_view name);

// "name-00002-of-00003.gguf" as llama.cpp's gguf-split spells a shard.
struct SplitName {
    std::string stem;               // "name"
    uint32_t index = 0, count = 0;  // 1-based index, as spelled
};
std::optional<SplitName> parse_split_name(std::string_view file);
// Every shard's name of the set `split` belongs to, first shard first.
std::vector<std::string> split_set(const SplitName& split);

// The files `ref` means among `names` (a repo's files): the named file (and its
// split set), or the one .gguf model (single file or split set) whose name
// holds the quant tag; mmproj files are never chosen. With neither file nor
// tag: the only model, else Q4_K_M (llama.cpp's default). The Error lists
// what there is (or the several matches) so the user can name one.
Expected<std::vector<std::string>> choose_files(const ModelRef& ref,
                                                const std::vector<std::string>& names);

inline constexpr std::string_view kDefaultQuant = "Q4_K_M";
inline constexpr uint32_t kMaxSplitCount = 65535;  // split.count is a UINT16 in gguf-split's files

}  // namespace ferrox::hub
