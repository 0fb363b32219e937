// Text -> the one YAML document a configuration file holds, or what is wrong with it
// and where. Guards against yaml-cpp 0.7 looping forever on some malformed input.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <variant>

namespace ferrox::config_detail {

struct YamlProblem {
    YAML::Mark mark;  // may be null: the caller then uses the start of the file
    std::string message;
};

// Maps and lists nest at most this deep (a configuration file needs 3); one
// deeper is refused where it opens. yaml-cpp's own guard stops at 500 with
// "bad file" and the scanner's position, not the collection's.
inline constexpr int kMaxYamlDepth = 64;

// A Null node for empty text (or only comments). Never throws.
std::variant<YAML::Node, YamlProblem> load_single_document(const std::string& text);

}  // namespace ferrox::config_detail
