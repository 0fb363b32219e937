#include "config/yaml_document.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <exception>
#include <sstream>
#include <vector>

namespace ferrox::config_detail {
namespace {

// Thrown through yaml-cpp's parser by DocumentStarts at the first collection
// nested past kMaxYamlDepth: where it opens, not where the scanner had got to.
struct TooDeep {
    YAML::Mark mark;
};

// Sees where documents start and how deep collections nest; nothing else.
class DocumentStarts final : public YAML::EventHandler {
  public:
    std::vector<YAML::Mark> starts;

    void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
        open(mark);
    }
    void OnSequenceEnd() override { --depth_; }
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
        open(mark);
    }
    void OnMapEnd() override { --depth_; }

  private:
    void open(const YAML::Mark& mark) {
        if (++depth_ > kMaxYamlDepth) throw TooDeep{mark};
    }
    int depth_ = 0;
};

// At most two documents are read. yaml-cpp 0.7 reports a document start forever,
// without consuming anything, on a token it cannot place (a ',' or a lone tag
// before one at top level); YAML::LoadAll then fills memory until the OOM killer
// comes (jbeder/yaml-cpp#1040, fixed upstream by #1318/#1319 after 0.8). Two starts
// at one position are that loop, not two documents.
std::variant<std::monostate, YamlProblem> check_one_document(const std::string& text) {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    DocumentStarts documents;
    try {
        while (documents.starts.size() < 2 && parser.HandleNextDocument(documents)) {
        }
    } catch (const TooDeep& deep) {
        return YamlProblem{deep.mark,
                           fmt::format("YAML collections nested deeper than {} levels (the "
                                       "limit for a configuration file) start here",
                                       kMaxYamlDepth)};
    } catch (const YAML::DeepRecursion& e) {
        // yaml-cpp's own guard (500 levels, "bad file"); ours is lower, so a
        // scalar-only path that still reaches it is named here in words.
        return YamlProblem{e.mark, fmt::format("YAML nested deeper than {} levels", e.depth())};
    }
    if (documents.starts.size() < 2) return std::monostate{};
    const YAML::Mark first = documents.starts[0];
    const YAML::Mark second = documents.starts[1];
    if (second.pos == first.pos) {
        const auto at = static_cast<std::size_t>(second.pos);
        const std::string token = at < text.size() ? std::string(1, text[at]) : "end of file";
        return YamlProblem{second, fmt::format("malformed YAML: unexpected '{}'", token)};
    }
    return YamlProblem{second,
                       "a configuration file holds one YAML document; a second one starts here"};
}

}  // namespace

std::variant<YAML::Node, YamlProblem> load_single_document(const std::string& text) {
    try {
        auto problem = check_one_document(text);
        if (auto* found = std::get_if<YamlProblem>(&problem)) return std::move(*found);
        return YAML::Load(text);
    } catch (const YAML::Exception& e) {
        // e.msg is yaml-cpp's bare message; e.what() repeats the position in its own words.
        return YamlProblem{e.mark, fmt::format("malformed YAML: {}", e.msg)};
    } catch (const std::exception& e) {
        return YamlProblem{YAML::Mark::null_mark(), fmt::format("malformed YAML: {}", e.what())};
    }
}

}  // namespace ferrox::config_detail
