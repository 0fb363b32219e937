// Where the model tests find their inputs, in one place: the tiny random
// models ($FERROX_TINY_MODELS, else ~/.cache/ferrox/tiny-models, made by
// tests/model/make_tiny_models.py) and Gemma 3 270M (ci/fetch-model.sh).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

namespace ferrox::test {

inline std::filesystem::path home_dir() {
    const char* home = std::getenv("HOME");
    return home && *home ? home : "/root";
}

inline std::filesystem::path tiny_models_dir() {
    if (const char* dir = std::getenv("FERROX_TINY_MODELS"); dir && *dir) return dir;
    return home_dir() / ".cache/ferrox/tiny-models";
}

// tiny-<arch>.gguf for each architecture named, those present, in order.
inline std::vector<std::filesystem::path> tiny_models(std::initializer_list<const char*> archs) {
    std::vector<std::filesystem::path> found;
    for (const char* arch : archs)
        if (auto p = tiny_models_dir() / (std::string("tiny-") + arch + ".gguf");
            std::filesystem::exists(p))
            found.push_back(p);
    return found;
}

// The real Gemma 3 270M file the parity and speed tests use (it may be absent).
inline std::filesystem::path gemma_270m_path() {
    return home_dir() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf";
}

}  // namespace ferrox::test
