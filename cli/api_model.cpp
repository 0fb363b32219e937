#include "api_model.h"

#include <algorithm>
#include <cstring>

#include "ferrox/log.h"
#include "format.h"

namespace ferrox::cli {
namespace {

// A cache kind (kv_kinds_of's) as the C API's.
ferrox_kv_kind kv_kind_param(ferrox_kind kind) {
    if (kind == FERROX_KIND_F16) return FERROX_KV_F16;
    if (kind == FERROX_KIND_Q8_0) return FERROX_KV_Q8_0;
    if (kind == FERROX_KIND_Q4_0) return FERROX_KV_Q4_0;
    return FERROX_KV_F32;
}

}  // namespace

ferrox_call_status fresh_status() {
    ferrox_call_status st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    return st;
}

bool succeeded(ferrox_code code, const ferrox_call_status& st) {
    if (code == FERROX_CODE_OK) return true;
    logger().error("{}", st.message);
    return false;
}

ferrox_code decode_one_sequence(ferrox_context* ctx, const std::vector<int32_t>& tokens,
                                size_t first, size_t n, LogitsFor logits, ferrox_call_status& st) {
    std::vector<int32_t> positions(n), seqs(n, 0);
    std::vector<uint8_t> want(n, logits == LogitsFor::All ? 1 : 0);
    for (size_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(first + i);
    if (n > 0 && logits == LogitsFor::Last) want[n - 1] = 1;
    ferrox_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = static_cast<uint32_t>(n);
    b.tokens = tokens.data() + first;
    b.positions = positions.data();
    b.seq_ids = seqs.data();
    b.logits = want.data();
    return ferrox_decode(ctx, &b, &st);
}

ApiModelParams::ApiModelParams(const CommonOptions& common, const ModelChoices& choices) {
    ferrox_model_params_default(&params_);
    if (common.config_path) {
        config_path_ = common.config_path->string();
        params_.config_path = config_path_.c_str();
    }
    for (const auto& d : common.plugin_dirs) dir_strings_.push_back(d.string());
    for (const auto& d : dir_strings_) dirs_.push_back(d.c_str());
    params_.plugin_dirs = dirs_.data();
    params_.n_plugin_dirs = static_cast<uint32_t>(dirs_.size());
    params_.threads = choices.threads;
    params_.n_ctx_max = choices.context;
    params_.n_batch_max = choices.batch;
    const model::KvKinds kinds = kv_kinds_of(choices);
    params_.kv_kind = kv_kind_param(kinds.key);
    params_.kv_value_kind = kv_kind_param(kinds.value);
    params_.allow_resident = ascii_lower(choices.resident) != "off";
    params_.max_sequences = choices.sequences;
    params_.embeddings = choices.embeddings ? 1 : 0;
}

void ApiModelParams::log_progress() {
    params_.progress = [](float fraction, void* user) {
        // 0 and 1 come on every load; what lies between is weights moving to a device.
        int& last = *static_cast<int*>(user);
        const int tenth = static_cast<int>(fraction * 10.0f);
        if (fraction > 0.0f && fraction < 1.0f && tenth != last) {
            last = tenth;
            logger().info("loading: {}%", tenth * 10);
        }
        return 0;
    };
    params_.progress_user = &last_tenth_;
}

}  // namespace ferrox::cli
