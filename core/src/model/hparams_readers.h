// The GGUF hyper-parameter readers' shared parts (hparams.cpp and the
// readers it calls per subject: hparams_experts.cpp, hparams_recurrent.cpp).
// Private to core/src/model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferrox/gguf/file.h"
#include "ferrox/model/architecture.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/key_rules.h"

namespace ferrox::model {

// Reads `<arch>.<suffix>`, with the key named in any error. Every key of
// the architecture's is read through here, so that a trace of the reads
// can be held to the row's key list (key_rules).
class Keys {
  public:
    Keys(const gguf::File& f, std::string prefix, KeyTrace* trace)
        : file_(f), prefix_(std::move(prefix)), trace_(trace) {}
    std::string key(std::string_view suffix) const { return prefix_ + "." + std::string(suffix); }
    Expected<uint32_t> u32(std::string_view suffix) const {
        return file_.get_u32(read(suffix, KeyUse::Required));
    }
    Expected<uint32_t> u32_or(std::string_view suffix, uint32_t v) const {
        return file_.get_u32_or(read(suffix, KeyUse::Optional), v);
    }
    Expected<float> f32(std::string_view suffix) const {
        return file_.get_f32(read(suffix, KeyUse::Required));
    }
    Expected<float> f32_or(std::string_view suffix, float v) const {
        return file_.get_f32_or(read(suffix, KeyUse::Optional), v);
    }
    Expected<std::string> string_or(std::string_view suffix, std::string_view v) const {
        return file_.get_string_or(read(suffix, KeyUse::Optional), std::string(v));
    }
    Expected<bool> bool_or(std::string_view suffix, bool v) const {
        return file_.get_bool_or(read(suffix, KeyUse::Optional), v);
    }
    Expected<std::vector<int32_t>> i32_array(std::string_view suffix) const {
        return file_.get_i32_array(read(suffix, KeyUse::Required));
    }
    // The key's value as stored (an array's elements are read from it), or
    // nullptr when absent: a Required read.
    const gguf::Value* value(std::string_view suffix) const {
        return file_.find(read(suffix, KeyUse::Required));
    }
    // Whether the file has the key: what a refused or optional key is tested by.
    bool has(std::string_view suffix) const {
        return file_.find(read(suffix, KeyUse::Optional)) != nullptr;
    }

  private:
    std::string read(std::string_view suffix, KeyUse how) const {
        if (trace_) trace_->push_back({std::string(suffix), how});
        return key(suffix);
    }

    const gguf::File& file_;
    std::string prefix_;
    KeyTrace* trace_;
};

// Each required key: a missing one is returned as the reader's Error, which names it.
#define FERROX_READ(dst, expr)      \
    do {                            \
        auto v_ = (expr);           \
        if (!v_) return v_.error(); \
        dst = *v_;                  \
    } while (0)

// A key that holds one value for every layer or one per layer (llama.cpp's
// get_key_or_arr): `out` gets one value per layer.
Expected<void> read_per_layer(const gguf::File& file, const Keys& k, std::string_view suffix,
                              uint32_t n_layer, std::vector<uint32_t>& out);
// A count the row has no part for: absent or 0 is fine, any other value refused by key.
Expected<void> refuse_if_set(const gguf::File& file, const Keys& k, std::string_view suffix,
                             std::string_view part, std::string_view arch);

// hparams_experts.cpp: the FFN, experts or one dense FFN (and no experts).
Expected<void> read_ffn(const gguf::File& file, const Keys& k, const ArchSpec& spec, Hparams& hp);

// hparams_recurrent.cpp: which layers are recurrent and their shapes.
Expected<void> read_kv_head_layers(const gguf::File& file, const Keys& k, Hparams& hp);
Expected<void> read_ffn_only_layers(const gguf::File& file, const Keys& k, Hparams& hp);
Expected<void> read_delta_net(const gguf::File& file, const Keys& k, Hparams& hp);
Expected<void> read_shortconv(const gguf::File& file, const Keys& k, Hparams& hp);
Expected<void> read_mamba2(const gguf::File& file, const Keys& k, Hparams& hp);

}  // namespace ferrox::model
