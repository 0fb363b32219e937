#include "elf_note.h"

#include <elf.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "ferrox/plugin_note.h"

namespace ferrox::plugin {
namespace {

// A plugin's section-name table is a few hundred bytes and the note under a
// kilobyte; anything near these is not a plugin this loader should trust.
constexpr uint64_t kMaxNameTable = 1u << 20;
constexpr uint64_t kMaxNoteSection = 64u << 10;
// PATH_MAX: the longest interpreter path worth quoting in a refusal.
constexpr uint64_t kMaxInterpreterPath = 4096;

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
#error "ferrox: add this machine's ELF e_machine"
#endif

// Reads [offset, offset + bytes) of the file; false when it lies beyond its end.
bool read_at(int fd, uint64_t file_size, uint64_t offset, void* out, uint64_t bytes) {
    if (offset > file_size || bytes > file_size - offset) return false;
    auto* p = static_cast<char*>(out);
    while (bytes > 0) {
        const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
        if (n <= 0) return false;
        p += n;
        offset += static_cast<uint64_t>(n);
        bytes -= static_cast<uint64_t>(n);
    }
    return true;
}

uint64_t pad4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

std::optional<PluginNote> parse_desc(std::string_view desc, std::string& problem) {
    PluginNote note;
    if (desc.size() < 4) {
        problem = "its ferrox note is shorter than the ABI version";
        return std::nullopt;
    }
    std::memcpy(&note.abi_version, desc.data(), 4);
    desc.remove_prefix(4);
    bool named = false;
    while (!desc.empty()) {
        const size_t end = desc.find('\0');
        const std::string_view item = desc.substr(0, end);
        desc.remove_prefix(end == std::string_view::npos ? desc.size() : end + 1);
        if (item.empty()) continue;  // padding
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
            problem = "its ferrox note holds an entry without '='";
            return std::nullopt;
        }
        const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "name")
            note.name = value, named = true;
        else if (key == "version")
            note.version = value;
        else if (key == "isa")
            note.isa = value;
        else if (key == "drivers")
            note.drivers = value;
        else if (key == "description")
            note.description = value;
        // Unknown keys are a newer writer's additions: ignored.
    }
    if (!named) {
        problem = "its ferrox note has no name";
        return std::nullopt;
    }
    return note;
}

// A position-independent executable is ET_DYN too; it differs from a library
// by naming a program interpreter. dlopen() would refuse it (glibc >= 2.30)
// with a message naming only /proc/self/fd/N: say what the file is instead.
// Returns the refusal, or nullopt for a library.
std::optional<std::string> program_interpreter(int fd, uint64_t file_size, const Elf64_Ehdr& eh,
                                               const std::string& label) {
    if (eh.e_phoff == 0 || eh.e_phnum == 0) return std::nullopt;
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == PN_XNUM)
        return fmt::format("{}: malformed ELF program header table", label);
    std::vector<Elf64_Phdr> segments(eh.e_phnum);  // <= 65534 * 56 bytes
    if (!read_at(fd, file_size, eh.e_phoff, segments.data(),
                 uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr)))
        return fmt::format("{}: ELF program headers lie beyond the end of the file", label);
    for (const Elf64_Phdr& p : segments) {
        if (p.p_type != PT_INTERP) continue;
        std::string interpreter(std::min<uint64_t>(p.p_filesz, kMaxInterpreterPath), '\0');
        if (!read_at(fd, file_size, p.p_offset, interpreter.data(), interpreter.size()))
            return fmt::format("{}: its PT_INTERP segment lies beyond the end of the file", label);
        interpreter.resize(strnlen(interpreter.c_str(), interpreter.size()));
        return fmt::format(
            "{} is an executable (position-independent, run by {}), not a shared library; "
            "a plugin is built with -shared",
            label, interpreter);
    }
    return std::nullopt;
}

}  // namespace

NoteResult read_plugin_note(int fd, uint64_t file_size, const std::string& label) {
    Elf64_Ehdr eh{};
    if (!read_at(fd, file_size, 0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        return NotALibrary{fmt::format("{} is not an ELF shared library", label)};
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_machine != kHostMachine)
        return NotALibrary{
            fmt::format("{} is an ELF file for another machine (class {}, data {}, machine {})",
                        label, eh.e_ident[EI_CLASS], eh.e_ident[EI_DATA], eh.e_machine)};
    if (eh.e_type != ET_DYN)
        return NotALibrary{
            fmt::format("{} is an ELF file but not a shared library (type {})", label, eh.e_type)};
    if (auto interpreter = program_interpreter(fd, file_size, eh, label))
        return NotALibrary{std::move(*interpreter)};
    if (eh.e_shoff == 0 || eh.e_shnum == 0) return NoNote{"the file has no section headers"};
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum)
        return NotALibrary{fmt::format("{}: malformed ELF section header table", label)};
    const uint64_t table_bytes = uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr);  // <= 65535 * 64
    std::vector<Elf64_Shdr> sections(eh.e_shnum);
    if (!read_at(fd, file_size, eh.e_shoff, sections.data(), table_bytes))
        return NotALibrary{
            fmt::format("{}: ELF section headers lie beyond the end of the file", label)};

    const Elf64_Shdr& names = sections[eh.e_shstrndx];
    if (names.sh_size > kMaxNameTable)
        return NotALibrary{fmt::format("{}: ELF section-name table of {} bytes (limit {})", label,
                                       names.sh_size, kMaxNameTable)};
    std::string name_table(names.sh_size, '\0');
    if (!read_at(fd, file_size, names.sh_offset, name_table.data(), names.sh_size))
        return NotALibrary{fmt::format("{}: ELF section-name table lies beyond the end", label)};

    const std::string_view wanted = FERROX_PLUGIN_NOTE_SECTION;
    for (const Elf64_Shdr& s : sections) {
        if (s.sh_name >= name_table.size()) continue;
        const char* name = name_table.c_str() + s.sh_name;
        if (wanted != std::string_view(name, strnlen(name, name_table.size() - s.sh_name)))
            continue;
        if (s.sh_size > kMaxNoteSection)
            return NotALibrary{fmt::format("{}: section {} of {} bytes (limit {})", label, wanted,
                                           s.sh_size, kMaxNoteSection)};
        std::string bytes(s.sh_size, '\0');
        if (!read_at(fd, file_size, s.sh_offset, bytes.data(), s.sh_size))
            return NotALibrary{fmt::format("{}: section {} lies beyond the end", label, wanted)};
        // Notes: {namesz, descsz, type}, name and desc each padded to 4 bytes.
        uint64_t at = 0;
        while (at + sizeof(Elf64_Nhdr) <= bytes.size()) {
            Elf64_Nhdr nh{};
            std::memcpy(&nh, bytes.data() + at, sizeof nh);
            at += sizeof nh;
            const uint64_t name_end = at + pad4(nh.n_namesz);
            if (name_end > bytes.size() || pad4(nh.n_descsz) > bytes.size() - name_end)
                return NotALibrary{
                    fmt::format("{}: a note in {} runs past its end", label, wanted)};
            const std::string_view owner(bytes.data() + at, nh.n_namesz);
            const std::string_view desc(bytes.data() + name_end, nh.n_descsz);
            at = name_end + pad4(nh.n_descsz);
            if (owner !=
                    std::string_view(FERROX_PLUGIN_NOTE_OWNER, sizeof FERROX_PLUGIN_NOTE_OWNER) ||
                nh.n_type != FERROX_PLUGIN_NOTE_TYPE)
                continue;
            std::string problem;
            if (auto note = parse_desc(desc, problem)) return *note;
            return NotALibrary{fmt::format("{}: {}", label, problem)};
        }
        return NoNote{fmt::format("section {} holds no ferrox note", wanted)};
    }
    return NoNote{fmt::format("no {} section (a plugin built without FERROX_PLUGIN_NOTE)", wanted)};
}

}  // namespace ferrox::plugin
