#include "ferrox/hub/model_ref.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <set>

#include "ferrox/escape.h"

namespace ferrox::hub {
namespace {

constexpr std::string_view kScheme = "hf://";
constexpr size_t kMaxRepoPart = 96;  // the hub's limit for an owner or repo name
constexpr size_t kMaxQuant = 64;
constexpr size_t kMaxFilePart = 255;  // NAME_MAX
constexpr size_t kMaxFileName = 1024;
constexpr size_t kMaxFileParts = 4;  // OWNER/REPO/ + a folder or three inside the repo
constexpr size_t kListedInError = 20;

bool is_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

size_t find_ci(std::string_view text, std::string_view needle, size_t from = 0) {
    if (needle.size() > text.size()) return std::string_view::npos;
    for (size_t i = from; i + needle.size() <= text.size(); ++i) {
        size_t k = 0;
        while (k < needle.size() && lower(text[i + k]) == lower(needle[k])) ++k;
        if (k == needle.size()) return i;
    }
    return std::string_view::npos;
}
bool ends_with_ci(std::string_view text, std::string_view tail) {
    return text.size() >= tail.size() &&
           find_ci(text, tail, text.size() - tail.size()) == text.size() - tail.size();
}
bool starts_with_ci(std::string_view text, std::string_view head) {
    return text.size() >= head.size() && find_ci(text.substr(0, head.size()), head) == 0;
}
std::string_view basename(std::string_view name) {
    const size_t slash = name.rfind('/');
    return slash == std::string_view::npos ? name : name.substr(slash + 1);
}

Expected<void> check_repo_part(std::string_view part, std::string_view what,
                               std::string_view whole) {
    if (part.empty() || part.size() > kMaxRepoPart)
        return make_error("model reference \"{}\": the {} must be 1 to {} characters",
                          escape_text(whole), what, kMaxRepoPart);
    for (char c : part)
        if (!is_alnum(c) && c != '-' && c != '_' && c != '.')
            return make_error(
                "model reference \"{}\": the {} \"{}\" may hold only letters, digits, '-', '_' "
                "and '.'",
                escape_text(whole), what, escape_text(part));
    if (!is_alnum(part.front()) || part.find("..") != std::string_view::npos)
        return make_error(
            "model reference \"{}\": the {} \"{}\" must start with a letter or digit and hold no "
            "'..'",
            escape_text(whole), what, escape_text(part));
    return {};
}

Expected<void> check_quant(std::string_view quant, std::string_view whole) {
    if (quant.empty() || quant.size() > kMaxQuant)
        return make_error(
            "model reference \"{}\": the quant tag after ':' must be 1 to {} "
            "characters",
            escape_text(whole), kMaxQuant);
    for (char c : quant)
        if (!is_alnum(c) && c != '-' && c != '_' && c != '.')
            return make_error(
                "model reference \"{}\": the quant tag \"{}\" may hold only letters, digits, "
                "'-', '_' and '.'",
                escape_text(whole), escape_text(quant));
    return {};
}

// The tag as a word of its own in `name` ("-Q4_K." but not "-Q4_K_M."): the
// better match when several names hold the tag.
bool holds_tag_as_word(std::string_view name, std::string_view tag) {
    const auto word_char = [](char c) { return is_alnum(c) || c == '_'; };
    for (size_t at = find_ci(name, tag); at != std::string_view::npos;
         at = find_ci(name, tag, at + 1)) {
        const bool before = at == 0 || !word_char(name[at - 1]);
        const bool after = at + tag.size() == name.size() || !word_char(name[at + tag.size()]);
        if (before && after) return true;
    }
    return false;
}

std::string listed(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < kListedInError; ++i)
        out += (i ? ", " : "") + escape_text(names[i]);
    if (names.size() > kListedInError)
        out += fmt::format(" (and {} more)", names.size() - kListedInError);
    return out.empty() ? "none" : out;
}

}  // namespace

std::string ModelRef::text() const {
    if (!file.empty()) return fmt::format("hf://{}/{}/{}", owner, repo, file);
    return quant.empty() ? repo_id() : fmt::format("{}:{}", repo_id(), quant);
}

bool is_reference_syntax(std::string_view arg) {
    if (arg.starts_with(kScheme)) return true;
    if (std::count(arg.begin(), arg.end(), '/') != 1 || arg.find(':') == std::string_view::npos)
        return false;
    return arg.find(':') > arg.find('/') && parse_model_ref(arg).has_value();
}

Expected<ModelRef> parse_model_ref(std::string_view text) {
    const bool url = text.starts_with(kScheme);
    const std::string_view rest = url ? text.substr(kScheme.size()) : text;
    ModelRef ref;
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos)
        return make_error(
            "model reference \"{}\": expected OWNER/REPO[:QUANT] or "
            "hf://OWNER/REPO/FILE.gguf",
            escape_text(text));
    const std::string_view owner = rest.substr(0, slash);
    std::string_view tail = rest.substr(slash + 1);
    const size_t file_slash = tail.find('/');
    std::string_view repo = tail.substr(0, file_slash);
    if (file_slash != std::string_view::npos) {
        if (!url)
            return make_error(
                "model reference \"{}\": a file is named as "
                "hf://OWNER/REPO/FILE.gguf",
                escape_text(text));
        ref.file = std::string(tail.substr(file_slash + 1));
        if (auto ok = check_file_name(ref.file); !ok)
            return make_error("model reference \"{}\": {}", escape_text(text),
                              ok.error().message());
        if (!ends_with_ci(ref.file, ".gguf"))
            return make_error("model reference \"{}\": the file must be a .gguf",
                              escape_text(text));
    } else if (const size_t colon = repo.find(':'); colon != std::string_view::npos) {
        ref.quant = std::string(repo.substr(colon + 1));
        repo = repo.substr(0, colon);
        if (auto ok = check_quant(ref.quant, text); !ok) return ok.error();
    }
    if (auto ok = check_repo_part(owner, "owner", text); !ok) return ok.error();
    if (auto ok = check_repo_part(repo, "repository name", text); !ok) return ok.error();
    ref.owner = std::string(owner);
    ref.repo = std::string(repo);
    return ref;
}

Expected<void> check_file_name(std::string_view name) {
    const auto refuse = [&](std::string_view why) {
        return make_error("refused the file name \"{}\": {}", escape_text(name), why);
    };
    if (name.empty() || name.size() > kMaxFileName)
        return refuse(fmt::format("it must be 1 to {} bytes", kMaxFileName));
    if (name.front() == '/') return refuse("an absolute path");
    for (char c : name) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) return refuse("it holds a control character");
        if (!is_alnum(c) && std::string_view("._+=@,-/").find(c) == std::string_view::npos)
            return refuse(
                fmt::format("'{}' is not one of the letters, digits and ._+=@,- a stored "
                            "name may hold",
                            escape_text(std::string_view(&c, 1))));
    }
    size_t parts = 0;
    for (size_t start = 0; start <= name.size();) {
        size_t end = name.find('/', start);
        if (end == std::string_view::npos) end = name.size();
        const std::string_view part = name.substr(start, end - start);
        if (++parts > kMaxFileParts)
            return refuse(fmt::format("more than {} path parts", kMaxFileParts));
        if (part.empty()) return refuse("an empty path part");
        if (part == "..") return refuse("'..' would leave the model store");
        if (part.front() == '.') return refuse("a part starting with '.'");
        if (part.size() > kMaxFilePart)
            return refuse(fmt::format("a part longer than {} bytes", kMaxFilePart));
        start = end + 1;
    }
    return {};
}

std::optional<SplitName> parse_split_name(std::string_view file) {
    // stem-NNNNN-of-NNNNN.gguf
    constexpr std::string_view kSuffix = ".gguf";
    constexpr size_t kTail = 1 + 5 + 4 + 5;  // "-00001-of-00003"
    if (!file.ends_with(kSuffix) || file.size() < kSuffix.size() + kTail + 1) return std::nullopt;
    const std::string_view tail = file.substr(file.size() - kSuffix.size() - kTail, kTail);
    if (tail[0] != '-' || tail.substr(6, 4) != "-of-") return std::nullopt;
    SplitName split;
    const auto digits = [](std::string_view d, uint32_t& out) {
        return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               std::from_chars(d.data(), d.data() + d.size(), out).ec == std::errc();
    };
    if (!digits(tail.substr(1, 5), split.index) || !digits(tail.substr(10, 5), split.count))
        return std::nullopt;
    if (split.index == 0 || split.count == 0 || split.index > split.count ||
        split.count > kMaxSplitCount)
        return std::nullopt;
    split.stem = std::string(file.substr(0, file.size() - kSuffix.size() - kTail));
    return split;
}

std::vector<std::string> split_set(const SplitName& split) {
    std::vector<std::string> names;
    names.reserve(split.count);
    for (uint32_t k = 1; k <= split.count; ++k)
        names.push_back(fmt::format("{}-{:05}-of-{:05}.gguf", split.stem, k, split.count));
    return names;
}

Expected<std::vector<std::string>> choose_files(const ModelRef& ref,
                                                const std::vector<std::string>& names) {
    const std::set<std::string> present(names.begin(), names.end());
    // A model's files: the name alone, or its split set (each one present).
    const auto files_of = [&](const std::string& name) -> Expected<std::vector<std::string>> {
        const auto split = parse_split_name(name);
        std::vector<std::string> set = split ? split_set(*split) : std::vector{name};
        for (const std::string& f : set)
            if (!present.contains(f))
                return make_error(
                    "{} has no file {}{}", ref.repo_id(), escape_text(f),
                    f == name ? "" : fmt::format(" (a shard of {})", escape_text(name)));
        return set;
    };
    if (!ref.file.empty()) return files_of(ref.file);

    std::vector<std::string> gguf_files;
    for (const std::string& name : present)
        if (ends_with_ci(name, ".gguf") && !starts_with_ci(basename(name), "mmproj"))
            gguf_files.push_back(name);
    // One entry per model: a split set is represented by its first shard.
    const auto models_holding = [&](std::string_view tag) {
        std::map<std::string, std::string> models;  // key -> representative name
        for (const std::string& name : gguf_files) {
            if (!tag.empty() && find_ci(basename(name), tag) == std::string_view::npos) continue;
            const auto split = parse_split_name(name);
            const std::string key = split ? fmt::format("{}/{}", split->stem, split->count) : name;
            std::string first = split ? split_set(*split).front() : name;
            models.emplace(key, std::move(first));
        }
        std::vector<std::string> out;
        for (auto& [key, first] : models) out.push_back(first);
        return out;
    };
    std::string tag = ref.quant;
    std::vector<std::string> models = models_holding(tag);
    if (tag.empty() && models.size() > 1) {
        tag = std::string(kDefaultQuant);
        models = models_holding(tag);
    }
    if (models.size() > 1) {
        std::vector<std::string> whole_word;
        std::copy_if(models.begin(), models.end(), std::back_inserter(whole_word),
                     [&](const std::string& n) { return holds_tag_as_word(basename(n), tag); });
        if (whole_word.size() == 1) models = whole_word;
    }
    if (models.size() == 1) return files_of(models.front());
    if (models.empty())
        return make_error(
            "{} has no .gguf model{}; its .gguf files: {}", ref.repo_id(),
            tag.empty() ? std::string() : fmt::format(" whose name holds \"{}\"", tag),
            listed(gguf_files));
    return make_error("\"{}\" matches {} models in {}: {}; name one as hf://{}/FILE.gguf", tag,
                      models.size(), ref.repo_id(), listed(models), ref.repo_id());
}

}  // namespace ferrox::hub
