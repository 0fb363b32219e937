// Reads a plugin's FERROX_PLUGIN_NOTE (ferrox/plugin_note.h) from its file,
// without loading it: the checks that decide whether its code may run at all
// need no code of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace ferrox::plugin {

struct PluginNote {
    uint32_t abi_version = 0;
    std::string name, version, isa, drivers, description;
};

struct NoNote {
    std::string reason;  // why describe() must be asked instead
};

struct NotALibrary {
    std::string reason;  // not an ELF shared object for this machine, or a malformed note
};

using NoteResult = std::variant<PluginNote, NoNote, NotALibrary>;

// `fd` is read with pread() only; `file_size` bounds every offset. `label`
// names the file in messages.
NoteResult read_plugin_note(int fd, uint64_t file_size, const std::string& label);

}  // namespace ferrox::plugin
