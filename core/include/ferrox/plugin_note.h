/* ferrox plugin metadata as an ELF note, readable without loading the plugin.
 *
 * dlopen() runs a library's static constructors and loads its dependencies
 * before any of its functions can be asked anything, so describe() alone
 * cannot protect the host from a plugin built for an instruction set this CPU
 * lacks (SIGILL in a constructor) or for another ABI. A plugin therefore also
 * states its metadata in a note section the core reads from the file itself,
 * and the core checks ABI, name and ISA before dlopen().
 *
 * Use once per plugin, at file scope, with string literals (since 1.2):
 *
 *   FERROX_PLUGIN_NOTE("cpu", "0.4.0", "", "", "CPU backend: ...");
 *
 * Layout (all little-endian, 4-byte aligned, an ELF note of section
 * FERROX_PLUGIN_NOTE_SECTION): namesz = 7, descsz, type =
 * FERROX_PLUGIN_NOTE_TYPE, name "ferrox\0" padded to 8; desc = uint32
 * abi_version followed by NUL-terminated "key=value" strings (keys: name,
 * version, isa, drivers, description), padded with NULs. Readers ignore keys
 * they do not know, so keys may be added without a new type.
 */
#ifndef FERROX_PLUGIN_NOTE_H
#define FERROX_PLUGIN_NOTE_H

#include <stdint.h>

#include "ferrox/backend_abi.h"

#define FERROX_PLUGIN_NOTE_SECTION ".note.ferrox.plugin"
#define FERROX_PLUGIN_NOTE_OWNER "ferrox"
#define FERROX_PLUGIN_NOTE_TYPE 0x46580001u /* "FX" 1 */

#define FERROX_PLUGIN_NOTE_TEXT_(name, version, isa, drivers, description) \
    "name=" name "\0version=" version "\0isa=" isa "\0drivers=" drivers    \
    "\0description"                                                        \
    "=" description

/* The note with an explicit ABI version; FERROX_PLUGIN_NOTE uses this
 * header's. (Test fixtures use this form to pretend another ABI.) */
#define FERROX_PLUGIN_NOTE_ABI(abi, name, version, isa, drivers, description)                     \
    __attribute__((section(FERROX_PLUGIN_NOTE_SECTION), used, aligned(4))) static const struct {  \
        uint32_t namesz, descsz, type;                                                            \
        char owner[8];                                                                            \
        uint32_t abi_version;                                                                     \
        char text[(sizeof(FERROX_PLUGIN_NOTE_TEXT_(name, version, isa, drivers, description)) +   \
                   3u) &                                                                          \
                  ~3u];                                                                           \
    } ferrox_plugin_note_ = {                                                                     \
        sizeof(FERROX_PLUGIN_NOTE_OWNER),                                                         \
        4u + ((sizeof(FERROX_PLUGIN_NOTE_TEXT_(name, version, isa, drivers, description)) + 3u) & \
              ~3u),                                                                               \
        FERROX_PLUGIN_NOTE_TYPE,                                                                  \
        FERROX_PLUGIN_NOTE_OWNER,                                                                 \
        (abi),                                                                                    \
        FERROX_PLUGIN_NOTE_TEXT_(name, version, isa, drivers, description)}

#define FERROX_PLUGIN_NOTE(name, version, isa, drivers, description) \
    FERROX_PLUGIN_NOTE_ABI(FERROX_ABI_VERSION, name, version, isa, drivers, description)

#endif /* FERROX_PLUGIN_NOTE_H */
