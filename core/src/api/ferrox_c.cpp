// The public C API (ferrox/ferrox.h) over the C++ core: each handle owns
// the C++ objects it stands for; every entry checks its arguments, turns
// Expected/DecodeStatus into a ferrox_code plus message, and never lets an
// exception cross into C. The entries are by area: c_model.cpp, c_text.cpp,
// c_context.cpp, c_sampler.cpp, c_chat.cpp, over what c_handles.h shares;
// this file has the version and the codes' names.
#include "ferrox/ferrox.h"

extern "C" {

uint32_t ferrox_api_version(void) {
    return FERROX_API_VERSION_MAJOR << 16 | FERROX_API_VERSION_MINOR;
}

const char* ferrox_code_name(ferrox_code code) {
    switch (code) {
        case FERROX_CODE_OK:
            return "ok";
        case FERROX_CODE_INVALID_ARGUMENT:
            return "invalid argument";
        case FERROX_CODE_NO_ROOM:
            return "no room";
        case FERROX_CODE_IO:
            return "i/o error";
        case FERROX_CODE_BACKEND:
            return "backend error";
        case FERROX_CODE_CANCELLED:
            return "cancelled";
        case FERROX_CODE_BUSY:
            return "busy";
        case FERROX_CODE_BUFFER_TOO_SMALL:
            return "buffer too small";
        case FERROX_CODE_GRAMMAR:
            return "grammar";
    }
    return "unknown";
}

}  // extern "C"
