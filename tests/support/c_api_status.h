// Helpers for the tests of ferrox.h: a zeroed ferrox_call_status, and the
// model a test program is given as its one argument.
#pragma once

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ferrox/ferrox.h"

namespace ferrox::test {

inline ferrox_call_status fresh_status() {
    ferrox_call_status st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    return st;
}

// Loads the model file named by a test program's one argument on one thread
// into *model; 0 on success, else the exit code the program returns: 2 for a
// wrong usage, 77 (skipped) when the file is absent, 1 when the load fails.
inline int load_model_argument(int argc, char** argv, const char* program, ferrox_model** model) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s MODEL.gguf\n", program);
        return 2;
    }
    if (!std::filesystem::exists(argv[1])) {
        std::printf("SKIP: %s is absent\n", argv[1]);
        return 77;
    }
    ferrox_call_status st = fresh_status();
    ferrox_model_params mp;
    ferrox_model_params_default(&mp);
    mp.threads = 1;
    if (ferrox_model_load(argv[1], &mp, model, &st) != FERROX_CODE_OK) {
        std::fprintf(stderr, "FAIL: load: %s\n", st.message);
        return 1;
    }
    return 0;
}

}  // namespace ferrox::test
