// The parser's entry with an explicit folder for relative plugins.paths, so that
// load_config_file can anchor them to the file's absolute folder.
#pragma once

#include <filesystem>
#include <string_view>

#include "ferrox/config.h"

namespace ferrox::config_detail {

Expected<Config> parse_config_text(std::string_view yaml_text, std::string_view source_name,
                                   const std::filesystem::path& base_dir);

}  // namespace ferrox::config_detail
