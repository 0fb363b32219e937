// The row's key list (key_rules) against what read_hparams actually reads:
// every key it reads is listed, and every listed key that applies to the file
// is read (a required one as required). Run over every tiny model, one file
// per architecture and variant (tests/model/make_tiny_models.py).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ferrox/gguf/file.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/key_rules.h"
#include "model_inputs.h"

using namespace ferrox;

namespace {

// Whether a rule's condition holds for the file: only conditions the reader
// meets on every file are checked both ways.
bool checked(const model::KeyRule& r, const model::Hparams& hp) {
    if (r.when.empty()) return r.use != model::KeyUse::Ignored && r.suffix != "pooling_type";
    if (r.when == "with experts") return hp.n_expert > 0;
    if (r.when == "dense") return hp.n_expert == 0;
    return false;  // read only in some files ("without rope.scaling.factor", ...)
}

void hold_reader_to_rules(const std::filesystem::path& path) {
    INFO(path.string());
    auto file = gguf::File::open(path);
    REQUIRE(file);
    model::KeyTrace trace;
    auto hp = model::read_hparams(*file, &trace);
    REQUIRE(hp);
    const auto rules = model::key_rules(*hp->arch);
    for (const model::KeyRead& read : trace) {
        INFO("read " << read.suffix);
        const bool listed = std::any_of(rules.begin(), rules.end(),
                                        [&](const auto& r) { return r.suffix == read.suffix; });
        CHECK(listed);
    }
    for (const model::KeyRule& rule : rules) {
        if (!checked(rule, *hp)) continue;
        INFO("rule " << rule.suffix << " (" << model::key_use_name(rule.use) << ")");
        const bool read = std::any_of(trace.begin(), trace.end(),
                                      [&](const auto& k) { return k.suffix == rule.suffix; });
        CHECK(read);
        if (rule.use == model::KeyUse::Required) {
            const bool required = std::any_of(trace.begin(), trace.end(), [&](const auto& k) {
                return k.suffix == rule.suffix && k.how == model::KeyUse::Required;
            });
            CHECK(required);
        }
    }
}

}  // namespace

TEST_CASE("each architecture's key list is the keys read_hparams reads") {
    const auto dir = test::tiny_models_dir();
    if (!std::filesystem::is_directory(dir)) {
        WARN("SKIPPED: no tiny models in " << dir << " (python3 tests/model/make_tiny_models.py)");
        return;
    }
    std::vector<std::string> archs_seen;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const auto name = entry.path().filename().string();
        if (!name.starts_with("tiny-") || entry.path().extension() != ".gguf") continue;
        // The variants made to be refused stop before every key is read.
        if (name == "tiny-llama-partial.gguf") continue;
        auto file = gguf::File::open(entry.path());
        REQUIRE(file);
        hold_reader_to_rules(entry.path());
        archs_seen.push_back(*file->get_string("general.architecture"));
    }
    // Every row has a tiny model, so every row's list is held to the reader.
    for (const model::ArchSpec& a : model::architectures())
        CHECK(std::find(archs_seen.begin(), archs_seen.end(), a.name) != archs_seen.end());
}
