// ferrox_rope_tool: the ferrox side of tests/parity/test_rope_parity.py. Reads
// one JSON request per line on stdin, answers one JSON line each on stdout:
// the RopeSpec that rope_spec derives from the hyper-parameters given and the
// cos/sin table rope_table computes from it.
//   {"n_rot":32, "head_dim":32, "base":10000, "scaling":"yarn", "freq_scale":0.25,
//    "attn_factor":1, "n_ctx_orig":64, "beta_fast":32, "beta_slow":1, "log_mul":0,
//    "ext_factor":-1, "yarn_attn_factor":1,
//    "freqs":[...], "short":[...], "long":[...], "context":256, "local":false,
//    "pos0":0, "n":8}
//   -> {"freq_scale":..,"ext_factor":..,"attn_factor":..,"corr_dims":[a,b],
//       "factors":[...], "cos":[n * head_dim / 2], "sin":[...]}
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/model/architecture.h"
#include "ferrox/model/hparams.h"
#include "ferrox/model/rope_tables.h"

namespace {

using ferrox::model::Hparams;
using ferrox::model::RopeScaling;

RopeScaling scaling(const std::string& name) {
    if (name == "linear") return RopeScaling::Linear;
    if (name == "yarn") return RopeScaling::Yarn;
    if (name == "longrope") return RopeScaling::LongRope;
    return RopeScaling::None;
}

nlohmann::json answer(const nlohmann::json& rq) {
    Hparams hp;
    hp.arch = ferrox::model::find_architecture("llama");  // local layers: the unscaled rule
    hp.n_rot = rq.at("n_rot").get<uint32_t>();
    hp.head_dim_k = rq.value("head_dim", hp.n_rot);
    hp.rope_base = rq.value("base", 10000.0f);
    hp.rope_base_local = rq.value("base_local", 10000.0f);
    hp.rope_scaling = scaling(rq.value("scaling", std::string("none")));
    hp.rope_freq_scale = rq.value("freq_scale", 1.0f);
    hp.rope_attn_factor = rq.value("attn_factor", 1.0f);
    hp.rope_n_ctx_orig = rq.value("n_ctx_orig", 0u);
    hp.rope_yarn_beta_fast = rq.value("beta_fast", 32.0f);
    hp.rope_yarn_beta_slow = rq.value("beta_slow", 1.0f);
    hp.rope_yarn_log_mul = rq.value("log_mul", 0.0f);
    hp.rope_yarn_ext_factor = rq.value("ext_factor", -1.0f);  // unset: 1 for YaRN, else 0
    hp.rope_yarn_attn_factor = rq.value("yarn_attn_factor", 1.0f);
    ferrox::model::RopeFactors factors;
    factors.freqs = rq.value("freqs", std::vector<float>{});
    factors.short_factors = rq.value("short", std::vector<float>{});
    factors.long_factors = rq.value("long", std::vector<float>{});
    const auto chosen = rope_factors_for(hp, factors, rq.value("context", 0u));
    const auto spec = rope_spec(hp, chosen, rq.value("local", false));
    float corr[2] = {0, 0};
    ferrox::model::yarn_corr_dims(spec, corr);

    const uint32_t n = rq.value("n", 1u), half = hp.head_dim_k / 2;
    std::vector<float> cos(size_t{n} * half), sin(size_t{n} * half);
    rope_table(spec, rq.value("pos0", 0u), n, half, cos, sin);
    return {{"freq_scale", spec.freq_scale},
            {"ext_factor", spec.ext_factor},
            {"attn_factor", spec.attn_factor},
            {"corr_dims", {corr[0], corr[1]}},
            {"factors", spec.freq_factors},
            {"cos", cos},
            {"sin", sin}};
}

}  // namespace

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        try {
            std::cout << answer(nlohmann::json::parse(line)).dump() << "\n" << std::flush;
        } catch (const nlohmann::json::exception& e) {
            std::cout << nlohmann::json{{"error", e.what()}}.dump() << "\n" << std::flush;
        }
    }
    return 0;
}
