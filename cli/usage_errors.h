// Command-line mistakes that CLI11 reports too vaguely for a user to act on.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ferrox::cli {

// Refuses "" for a folder flag: an empty folder name would resolve to the
// current directory, which ferrox never searches.
CLI::Validator non_empty_folder_name(const std::string& flag);

// When the first word that is not a global option names no subcommand, prints
// "unknown subcommand 'X'" with the list on stderr and returns true.
bool report_unknown_subcommand(const CLI::App& app, int argc, char** argv);

}  // namespace ferrox::cli
