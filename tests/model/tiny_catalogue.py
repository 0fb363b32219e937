"""What tests/model/make_tiny_models.py makes: the tiny models' shapes and every file's
architecture, vocabulary, options and seed.

An entry is name -> (architecture, llama.cpp vocab-only file, options); the file is
tiny-NAME.gguf. Each family's entries take consecutive seeds from its first seed, unless an
entry names its own ("seed": a fault variant drawn like the model it spoils). Adding an
entry at the end of a family, or a new family with seeds no other family uses, leaves every
existing file byte-identical.
"""
from __future__ import annotations

from dataclasses import dataclass

N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF, N_LAYER, N_CTX = 128, 4, 2, 32, 256, 2, 256
N_EXPERT, N_EXPERT_USED, N_FF_EXP = 4, 2, 64

# The first five, by architecture: arch -> (vocab file, options).
MODELS = {
    "llama": ("llama-spm", {"tied": False}),
    "qwen2": ("qwen2", {"tied": True, "bias": True}),
    "qwen3": ("qwen2", {"tied": False, "qk_norm": True}),
    "qwen3moe": ("qwen2", {"tied": False, "qk_norm": True, "moe": True}),
    "gemma3": ("llama-spm", {}),  # made by make_gemma3
}


# tiny-gemma3: every row length a multiple of 256 so that K-quants apply.
G_EMBD, G_HEAD, G_HEAD_KV, G_HEAD_DIM, G_FF, G_LAYER, G_WINDOW = 256, 8, 2, 64, 512, 6, 8

# Variants shaped like specific real models, after the five above (their seeds
# follow, so the five files stay byte-identical). Each: (arch, vocab, options).
#   llama31:   Llama 3.1/3.2/3.3 -- the llama-bpe vocabulary, rope base 5e5, and
#              `rope_freqs.weight` with no rope.scaling key; an original context of
#              64 (not 8192) so that the divisors matter within the test's 1000 positions.
#   llama-yarn / llama-longrope: llama with YaRN (factor 4 over an original 64
#              positions) and with LongRoPE (short/long factor tensors and an
#              attention factor), the schemes llama.cpp applies to any llama file.
#   llama-bias: optional q/k/v biases (llama.cpp adds them when present).
#   llama-extra: one tensor no architecture has (both engines must refuse it).
#   llama-attn-out-bias: an attention output bias on layer 0 only (llama.cpp adds it where a
#              layer has one, and so must ferrox).
#   gemma3-27b: Gemma 3 27B's 62 layers, so that the attention scale is
#              1/sqrt(n_embd / n_head) (here 1/sqrt(32)), not 1/sqrt(head_dim = 64).
#   qwen2-yarn: Qwen2.5's YaRN (rope base 1e6, factor 8) over an original context of
#              128, so that the ramp, the interpolated pairs and the magnitude all
#              matter within the test's 1000+ positions.
#   gemma3-partial: partial rotary -- rope.dimension_count 32 of head_dim 64 (NeoX:
#              dims 0..31 rotate as pairs (i, i + 16), 32..63 pass through); gemma3 is
#              the one architecture here whose llama.cpp graph runs a rotated prefix.
#   llama-partial: the same on llama, which llama.cpp refuses ("invalid n_rot"), and
#              so must ferrox.
#   llama-moe: Mixtral's experts in a llama file (see below).
SHAPED = {
    "llama31": ("llama", "llama-bpe", {"tied": True, "n_ctx": 2048, "rope_base": 5e5,
                                       "rope_freqs": {"factor": 8.0, "low": 1.0, "high": 4.0, "orig": 64}}),
    "llama-yarn": ("llama", "llama-spm", {"tied": False, "n_ctx": 1024,
                                          "rope_scaling": {"type": "yarn", "factor": 4.0, "orig": 64}}),
    "llama-longrope": ("llama", "llama-spm", {"tied": False, "n_ctx": 1024,
                                              "rope_scaling": {"type": "longrope", "orig": 64, "attn_factor": 1.19}}),
    "llama-bias": ("llama", "llama-spm", {"tied": False, "bias": True}),
    "llama-extra": ("llama", "llama-spm", {"tied": False, "extra": "blk.1.attn_gate_scale.weight"}),
    "llama-attn-out-bias": ("llama", "llama-spm", {"tied": False, "extra": "blk.0.attn_output.bias"}),
    "gemma3-27b": ("gemma3", "llama-spm", {"n_layer": 62}),
    "qwen2-yarn": ("qwen2", "qwen2", {"tied": True, "bias": True, "n_ctx": 4096,
                                      "rope_scaling": {"type": "yarn", "factor": 8.0, "orig": 128}}),
    "gemma3-partial": ("gemma3", "llama-spm", {"n_rot": G_HEAD_DIM // 2}),
    "llama-partial": ("llama", "llama-spm", {"tied": False, "n_rot": HEAD_DIM // 2}),
    # A dense FFN bias llama.cpp adds and ferrox does not implement: refused, not dropped.
    "llama-ffn-bias": ("llama", "llama-spm", {"tied": False, "extra": "blk.0.ffn_down.bias"}),
    # Mixtral's layout: architecture llama with expert_count, 2 of 4 experts per token, each
    # feed_forward_length wide (no expert_feed_forward_length key), a softmax router.
    "llama-moe": ("llama", "llama-spm", {"tied": False, "moe": True, "mixtral": True}),
    # The quant kinds added after MXFP4 (LowbitValues): attention and output NVFP4 and Q1_0,
    # FFN gate/up NVFP4, ffn_down TQ2_0 / TQ1_0 (the one 256-column matrix).
    "llama-lowbit": ("llama", "llama-spm", {"tied": False, "lowbit": True}),
}

# Architectures that are llama's layers rearranged (name -> (arch, vocab, options)); seeds
# from 2000, so adding one leaves the files above unchanged.
#   granite: Granite 3.x 2B's four scales (embeddings x12, each block's output x0.22 into
#            the residual, attention scale 1/64 instead of 1/sqrt(32), logits / 8).
#   olmo2:   no pre-norms; RMSNorm after attention and after the FFN, and over the whole
#            q (n_head x head_dim) and k projections; NeoX RoPE; output not tied.
#   smollm3: 4 layers so that the fourth attends without RoPE (every fourth does).
#   qwen2vl, qwen3vl: see below.
REARRANGED = {
    "granite": ("granite", "refact", {"tied": True, "scales": {
        "embedding_scale": 12.0, "residual_scale": 0.22, "attention.scale": 0.015625, "logit_scale": 8.0}}),
    "olmo2": ("olmo2", "gpt-2", {"tied": False, "pre_norms": False, "post_norms": True, "qk_norm": "whole"}),
    "smollm3": ("smollm3", "llama-bpe", {"tied": True, "n_layer": 4}),
    # The text path of the VL models: qwen2's / qwen3's layers with multi-section RoPE
    # (sections of the 16 rotated pairs; for text every section has the same position) and,
    # for qwen3vl, two deepstack layers (image features; zeros for text in llama.cpp).
    "qwen2vl": ("qwen2vl", "qwen2", {"tied": True, "bias": True, "sections": [8, 4, 4, 0]}),
    "qwen3vl": ("qwen3vl", "qwen2", {"tied": False, "qk_norm": True, "sections": [6, 5, 5, 0],
                                     "deepstack": 2}),
    # Phi-3.5-mini's layout: fused attn_qkv and gate||up (ffn_up of 2 x n_ff rows), LongRoPE
    # factors without a rope.scaling.type key (phi3 reads them whatever the type; the
    # parity test's 256-position context exceeds the original 64, so the long ones apply),
    # attention factor 1.19; phi3-partial rotates 24 of 32 dims, as Phi-4-mini 96 of 128.
    "phi3": ("phi3", "phi-3", {"tied": False, "fused": True, "n_ctx": 1024,
                               "longrope_factors": {"orig": 64, "attn_factor": 1.19}}),
    "phi3-partial": ("phi3", "phi-3", {"tied": False, "fused": True, "n_ctx": 1024, "n_rot": 24,
                                       "longrope_factors": {"orig": 64, "attn_factor": 1.19}}),
    # Ministral 3's rope: YaRN (factor 4 over an original 16 positions, log multiplier 0.1)
    # and Llama 4's attention temperature 0.1: q x 1 + 0.1 ln(floor(pos / 16) + 1), so the
    # 48 parity positions see three factors (1, 1.069, 1.110).
    "mistral3": ("mistral3", "llama-spm", {"tied": False, "n_ctx": 1024, "temperature_scale": 0.1,
                                           "rope_scaling": {"type": "yarn", "factor": 4.0, "orig": 16,
                                                            "log_mul": 0.1}}),
    # Gemma 2's layout: 4 layers, every other one local through a window of 8 (the 48 parity
    # positions cross it), post-norms, GeGLU, tied embeddings x sqrt(n_embd), and soft-caps
    # far below the real 50 / 30 so that random weights reach them: attention scores
    # 2 x tanh(s / 2), logits 5 x tanh(l / 5).
    "gemma2": ("gemma2", "llama-spm", {"tied": True, "n_layer": 4, "post_norms": True, "window": 8,
                                       "softcap": (2.0, 5.0)}),
    # OLMo 3: olmo2 with a window of 8 on three layers of four (rotated without YaRN) and
    # YaRN (factor 4 over an original 16, attention factor 1.2, which the local layers must not
    # apply) on the fourth.
    "olmo3": ("olmo2", "gpt-2", {"tied": False, "pre_norms": False, "post_norms": True, "qk_norm": "whole",
                                 "n_layer": 4, "window": 8, "n_ctx": 1024,
                                 "rope_scaling": {"type": "yarn", "factor": 4.0, "orig": 16, "attn_factor": 1.2}}),
    # gpt-oss's layout: 4 layers, every other one local through a window of 8, YaRN (factor 4
    # over an original 16), q/k/v and output biases, a sink logit per head, a router with a
    # bias, MXFP4 experts with biases, the pre-FFN norm named post_attention_norm. Its
    # o200k vocabulary is not among llama.cpp's vocab-only files, so qwen2's BPE stands in
    # (the architecture does not depend on it). One gate/up row in eight has a bias of +-9,
    # so that the SwiGLU's clamps at 7 are reached (larger weights would reach them too, but
    # make the random network amplify float rounding until the engines' last bits differ
    # visibly).
    "gpt-oss": ("gpt-oss", "qwen2", {"tied": False, "bias": True, "oai": True, "moe": True, "n_layer": 4,
                                     "window": 8, "n_ctx": 1024,
                                     "rope_scaling": {"type": "yarn", "factor": 4.0, "orig": 16}}),
    # Gemma 4's text layers (the dense 31B's kind, at one head size): 5 layers whose window
    # pattern is listed per layer and is not periodic (local, local, global, local, global;
    # window 8), unscaled attention over RMS-normed q, k and V, no attn_v on the global
    # layers (K stands for V), "proportional" RoPE on the global layers (rope_freqs: 4 of
    # 16 pairs rotate, the others divided by 1e30), rope bases 1e6 / 1e4, a scalar on each
    # layer's output, logits capped at 5 x tanh(l / 5).
    "gemma4": ("gemma4", "llama-spm", {"tied": True, "n_layer": 5, "post_norms": True, "window": 8,
                                       "swa_layers": [True, True, False, True, False],
                                       "proportional_rope": 4, "final_softcap": 5.0}),
    # Gemma 4 E2B/E4B's shared KV layers (without their per-layer embeddings): 7 layers, the
    # last 2 keeping no cache -- layer 5 (local) attends over layer 3's, layer 6 (global)
    # over layer 4's, llama.cpp's rule (the last cached layer of each kind).
    "gemma4-shared": ("gemma4", "llama-spm", {"tied": True, "n_layer": 7, "post_norms": True, "window": 8,
                                              "swa_layers": [True, True, False, True, False, True, False],
                                              "shared_kv": 2, "proportional_rope": 4, "final_softcap": 5.0}),
    # GLM-4.5's layout: 4 blocks, the last a NextN block (kept, not run: both engines run 3);
    # layer 0 dense (leading_dense_block_count 1), layers 1-2 experts with a sigmoid gate, a
    # selection bias (exp_probs_b), renormalised top-2 weights scaled by 2.5 and one shared
    # expert; q/k/v biases, per-head q/k norms, NeoX RoPE over 16 of 32 dims, the pre-FFN norm
    # named post_attention_norm. qwen2's BPE stands in for GLM's vocabulary.
    "glm4moe": ("glm4moe", "qwen2", {"tied": False, "bias": True, "qk_norm": True, "moe": True,
                                     "n_layer": 4, "nextn": 1, "dense_lead": 1, "n_rot": HEAD_DIM // 2,
                                     "glm": {"expert_shared_count": 1, "expert_weights_scale": 2.5,
                                             "expert_weights_norm": True, "expert_gating_func": 2}}),
    # GLM-4.5-Air's: no q/k norms, no expert_gating_func key (sigmoid all the same), no scale,
    # and a trunk-only file: nextn_predict_layers 1 without the NextN block's tensors.
    "glm4moe-air": ("glm4moe", "qwen2", {"tied": False, "bias": True, "moe": True, "n_layer": 4, "nextn": 1,
                                         "trunk_only": True, "dense_lead": 1, "n_rot": HEAD_DIM // 2,
                                         "glm": {"expert_shared_count": 1, "expert_weights_norm": True}}),
    # DeepSeek V3's attention, shaped tiny: q through a normed low rank (64), a KV latent of 64
    # plus 32 rotated dims shared by the 4 heads (each 32 unrotated + 32 rotated for q.k, 32 for
    # v), k_b/v_b split as the current converter writes them; the cache holds 96 + 64 values per
    # token and layer. Every layer dense (leading_dense_block_count = block_count): the experts
    # are refused by key for now.
    "deepseek2": ("deepseek2", "llama-spm", {"tied": False, "n_layer": 2, "rope_base": 10000.0,
                                             "mla": {"q_lora": 64, "kv_lora": 64, "rot": 32, "nope": 32, "v": 32}}),
}

# Hybrid stacks: recurrent layers between full-attention ones (name -> (arch, vocab, options));
# seeds from 3000.
#   qwen35: Qwen3.5's layout, 4 layers: three Gated DeltaNet layers (conv kernel 4, 2 key
#           heads tiled over 4 value heads of 32, decays softplus(alpha + dt_bias) x ssm_a
#           with ssm_a in [-1.5, -0.2] and dt_bias in [-1, 1]) and full attention on the
#           fourth: q with a sigmoid gate per head, per-head q/k norms, NeoX RoPE over 16 of 32
#           dims (multi-section, NeoX for text), the pre-FFN norm named post_attention_norm.
HYBRID = {
    "qwen35": ("qwen35", "qwen2", {"tied": False, "qk_norm": True, "n_layer": 4, "n_rot": HEAD_DIM // 2,
                                   "sections": [4, 2, 2, 0],
                                   "delta": {"kernel": 4, "state": 32, "v_heads": 4, "k_heads": 2,
                                             "interval": 4}}),
}
# A fault for the parity test to catch: tiny-qwen35's weights (same seed) with the attention
# gate's rows zeroed, so every head's output is halved (sigmoid(0)) -- what a pass that got
# the gate wrong would compute. llama.cpp on it must disagree with ferrox on tiny-qwen35.
HYBRID["qwen35-gate-fault"] = ("qwen35", "qwen2", {**HYBRID["qwen35"][2], "seed": 3000, "fault": "gate"})

# Hybrid stacks with experts (seeds from 3400).
#   qwen35moe: Qwen3.5 / Qwen3.6 MoE's layout, 5 blocks, the last an MTP (NextN) block (kept,
#           not run: both engines run 4); the layers listed by attention.recurrent_layers as
#           current converters write them (RGRR: not full_attention_interval's pattern, which the
#           file also carries, so the list must win), qwen35's Gated DeltaNet and gated
#           attention layers, then 8 experts (softmax, renormalised top 2, 64 wide) and one
#           shared expert 96 wide (expert_shared_feed_forward_length) weighed per row by
#           sigmoid(ffn_gate_inp_shexp . x).
HYBRID_MOE = {
    "qwen35moe": ("qwen35moe", "qwen2", {"tied": False, "qk_norm": True, "n_layer": 5, "nextn": 1,
                                         "n_rot": HEAD_DIM // 2, "sections": [4, 2, 2, 0], "moe": True,
                                         "n_expert": 8, "shexp": 96,
                                         "delta": {"kernel": 4, "state": 32, "v_heads": 4, "k_heads": 2,
                                                   "interval": 4,
                                                   "layers": [True, False, True, True, False]}}),
}
# A fault for the parity test to catch: tiny-qwen35moe's weights (same seed) with the shared
# expert's gate zeroed, so every row takes half the shared expert's output (sigmoid(0)) --
# what a pass that ignored the gate's logits would compute.
HYBRID_MOE["qwen35moe-shexp-gate-fault"] = ("qwen35moe", "qwen2", {**HYBRID_MOE["qwen35moe"][2], "seed": 3401,
                                                                   "fault": "shexp_gate"})
#   qwen3next: Qwen3-Next's layout, 5 blocks (the fifth an MTP block): RRRG by
#           full_attention_interval, plain NeoX RoPE over 16 of 32 dims (no sections), the value
#           heads grouped by key head (4 over 2: heads 0-1 read key head 0) and beta/alpha in one
#           ssm_ba per key head; qwen35moe's experts and gated shared expert.
HYBRID_MOE["qwen3next"] = ("qwen3next", "qwen2", {"tied": False, "qk_norm": True, "n_layer": 5, "nextn": 1,
                                                  "n_rot": HEAD_DIM // 2, "moe": True, "n_expert": 8, "shexp": 96,
                                                  "delta": {"kernel": 4, "state": 32, "v_heads": 4, "k_heads": 2,
                                                            "interval": 4}})
# A fault for the parity test to catch: tiny-qwen3next's weights (same seed) with ssm_ba's rows
# rearranged so that llama.cpp, reading them per key head, takes as betas and alphas the two
# halves of the original rows -- what a pass that did not take the per-key-head layout apart
# would compute on tiny-qwen3next.
HYBRID_MOE["qwen3next-ba-fault"] = ("qwen3next", "qwen2", {**HYBRID_MOE["qwen3next"][2], "seed": 3403,
                                                           "fault": "ba_order"})


# The DeepSeek V3 family through deepseek2 (seeds from 3100): tiny-deepseek2's latent attention
# (q through a normed low rank 64, a KV latent of 64 plus 32 rotated dims) with experts.
# Short-convolution hybrids (seeds from 4100).
#   lfm2: LFM2's layout, 4 layers: short-convolution layers (conv window l_cache 3: the two
#         previous b*x products and the token's) where attention.head_count_kv lists 0, and
#         attention on layer 2 (per-head q/k norms, NeoX RoPE over the whole head); a SwiGLU
#         FFN on every layer, the final norm named token_embd_norm, the output tied.
SHORTCONV = {
    "lfm2": ("lfm2", "llama-bpe", {"tied": True, "qk_norm": True, "n_layer": 4,
                                   "shortconv": {"l_cache": 3, "layers": [True, True, False, True]}}),
}
#   lfm2moe: LFM2-8B-A1B's layout on the same 4 layers: layer 0's FFN dense
#         (leading_dense_block_count 1), the others 8 experts of 64 with a sigmoid gate
#         (expert_gating_func 2), a selection bias, the top 2 weights renormalised.
SHORTCONV["lfm2moe"] = ("lfm2moe", "llama-bpe", {**SHORTCONV["lfm2"][2], "moe": True, "n_expert": 8,
                                                  "dense_lead": 1, "glm": {"expert_gating_func": 2}})
# A fault for the parity test to catch: tiny-lfm2's weights (same seed) with each channel's
# convolution taps in reverse order -- what a pass reading the window newest first computes.
SHORTCONV["lfm2-conv-fault"] = ("lfm2", "llama-bpe", {**SHORTCONV["lfm2"][2], "seed": 4100, "fault": "conv_taps"})

# Mamba-2 models (seeds from 4200), made by make_mamba2 with the keys its converter writes
# (head_count and feed_forward_length 0).
#   mamba2: 3 layers, inner 256 in 8 heads of 32, state 16 (under ggml's 32-float SIMD step,
#           so its scan sums in the order ferrox does), B and C in 2 groups of 4 heads, conv
#           kernel 4 with a bias, D skip, the gated norm over 2 groups; the output tied.
MAMBA2 = {
    "mamba2": ("mamba2", "llama-spm", {"tied": True, "n_layer": 3,
                                       "mamba2": {"kernel": 4, "inner": 256, "state": 16, "heads": 8, "groups": 2}}),
}
# A fault for the parity test to catch: tiny-mamba2's weights (same seed) with ssm_d zeroed --
# what a pass that skipped the D term computes.
MAMBA2["mamba2-no-d-fault"] = ("mamba2", "llama-spm", {**MAMBA2["mamba2"][2], "seed": 4200, "fault": "no_d"})

# Mamba-2 hybrids (seeds from 4300): Mamba-2 blocks (tiny-mamba2's shape: inner 256 = 2 x
# n_embd in 8 heads of 32, state 16, B and C in 2 groups, conv kernel 4 with a bias) beside
# attention layers (4 heads over 2 KV heads of 32). `kinds`, one letter per layer: R a Mamba-2
# block (head_count_kv 0), G attention, F an FFN alone (nemotron_h: head_count_kv 0 and a
# feed_forward_length).
#   granitehybrid: Granite 4.0 H's layout, 4 layers RGRR, a SwiGLU FFN after every block,
#           granite's four scales (Granite 4.0 H Tiny's: embeddings x12, each block's output
#           x0.22, attention 1/128, logits / 6) and rope.scaling.finetuned false (what its
#           converter writes: no layer rotates); the output tied.
#   granitehybrid-rope: the same with rope.scaling.finetuned true (Bamba's files), so the
#           attention layer rotates (adjacent pairs, as granite).
#   nemotron_h: Nemotron-H's layout, 5 layers RFRGF: Mamba-2 blocks, squared-ReLU FFNs
#           without a gate (256 wide), attention without RoPE, each layer one block;
#           feed_forward_length and head_count_kv one per layer, only layer_norm_epsilon
#           (what its converter writes); the output untied.
GRANITE_H_SCALES = {"embedding_scale": 12.0, "residual_scale": 0.22, "attention.scale": 0.0078125,
                    "logit_scale": 6.0}
MAMBA2_HYBRID_SSM = {"kernel": 4, "inner": 256, "state": 16, "heads": 8, "groups": 2}
MAMBA2_HYBRID = {
    "granitehybrid": ("granitehybrid", "refact", {"tied": True, "n_layer": 4, "kinds": "RGRR",
                                                  "mamba2": MAMBA2_HYBRID_SSM, "scales": GRANITE_H_SCALES,
                                                  "rope_finetuned": False}),
    "granitehybrid-rope": ("granitehybrid", "refact", {"tied": True, "n_layer": 4, "kinds": "RGRR",
                                                       "mamba2": MAMBA2_HYBRID_SSM, "scales": GRANITE_H_SCALES,
                                                       "rope_finetuned": True}),
    # Seed 4305, not its place's 4302: that draw puts an 8-bit rounding tie at position 10
    # (both engines bit-identical before it), which the Mamba-2 states carry to every later
    # position (NMSE 6.7e-5 mean, 2.3e-4 worst against llama.cpp, one flip at a 0.009 tie).
    "nemotron_h": ("nemotron_h", "llama-spm", {"tied": False, "n_layer": 5, "kinds": "RFRGF", "seed": 4305,
                                               "ff_layers": [0, N_FF, 0, 0, N_FF],
                                               "mamba2": MAMBA2_HYBRID_SSM, "norm_eps_only": True}),
}
# Faults for the parity test to catch, drawn like the model they spoil (same seed):
# tiny-granitehybrid without residual_scale (what a pass ignoring the residual scale computes),
# tiny-nemotron_h with its FFN-only layers' ffn_down zeroed (a pass that skips those layers).
MAMBA2_HYBRID["granitehybrid-residual-fault"] = (
    "granitehybrid", "refact",
    {**MAMBA2_HYBRID["granitehybrid"][2], "seed": 4300,
     "scales": {k: v for k, v in GRANITE_H_SCALES.items() if k != "residual_scale"}})
MAMBA2_HYBRID["nemotron_h-ffn-fault"] = ("nemotron_h", "llama-spm",
                                        {**MAMBA2_HYBRID["nemotron_h"][2], "fault": "ffn_off"})

# Mamba-2 hybrids with experts (seeds from 4400): tiny-granitehybrid's layers and scales
# with every FFN made of experts, as Granite 4.0 H Tiny/Small: expert_count 4, each
# feed_forward_length (64) wide, top 2 of a softmax renormalised, and one ungated SwiGLU
# shared expert expert_shared_feed_forward_length (128: twice an expert, as H Tiny's 1024 to
# 512) wide beside them.
MAMBA2_HYBRID_MOE = {
    "granitehybrid-moe": ("granitehybrid", "refact", {**MAMBA2_HYBRID["granitehybrid"][2], "moe": True,
                                                      "mixtral": True, "shexp": 128}),
}
# The fault: the same weights with the shared expert's ffn_down zeroed (a pass that skips it).
MAMBA2_HYBRID_MOE["granitehybrid-moe-shexp-fault"] = (
    "granitehybrid", "refact", {**MAMBA2_HYBRID_MOE["granitehybrid-moe"][2], "seed": 4400, "fault": "no_shexp"})
#   nemotron_h_moe: Nemotron 3 Nano 30B-A3B's layout on tiny-nemotron_h's RFRGF: each F layer
#           8 experts (expert_feed_forward_length 64) chosen by sigmoid + exp_probs_b, the top 2
#           renormalised (expert_weights_norm) and scaled by 2.5, in one group (as Nano's
#           converter writes), and one shared expert 128 wide, all squared-ReLU without a gate.
MAMBA2_HYBRID_MOE["nemotron_h_moe"] = (
    "nemotron_h_moe", "llama-spm",
    {**MAMBA2_HYBRID["nemotron_h"][2], "seed": 4402, "ff_layers": [0, N_FF_EXP, 0, 0, N_FF_EXP],
     "moe": True, "n_expert": 8, "shexp": 128,
     "glm": {"expert_shared_count": 1, "expert_weights_norm": True, "expert_weights_scale": 2.5,
             "expert_group_count": 1}})
# Its fault: the shared expert's ffn_down zeroed (a pass that skips the shared expert).
MAMBA2_HYBRID_MOE["nemotron_h_moe-shexp-fault"] = (
    "nemotron_h_moe", "llama-spm", {**MAMBA2_HYBRID_MOE["nemotron_h_moe"][2], "fault": "no_shexp"})

MLA = {"q_lora": 64, "kv_lora": 64, "rot": 32, "nope": 32, "v": 32}
DEEPSEEK = {
    # DeepSeek V3's experts: 3 layers, the first dense; 8 experts in 2 groups of 4 of which the
    # better one is used (its two best sigmoid + bias scores sum highest), top 2 of its 4, a
    # sigmoid gate with a selection bias (exp_probs_b), renormalised weights scaled by 2.5, one
    # shared expert.
    "deepseek2-moe": ("deepseek2", "llama-spm", {
        "tied": False, "n_layer": 3, "rope_base": 10000.0, "mla": MLA, "moe": True, "n_expert": 8,
        "dense_lead": 1,
        "glm": {"expert_shared_count": 1, "expert_weights_scale": 2.5, "expert_weights_norm": True,
                "expert_gating_func": 2, "expert_group_count": 2, "expert_group_used_count": 1}}),
    # DeepSeek V2's gate (no gating key: softmax; no selection bias; weights not renormalised) over
    # 4 groups of 2 with 2 used, and DeepSeek's YaRN: factor 4 over an original context of 16
    # (the 48 parity positions pass it), mscale_all_dim 0.707 (the file says 0.1 x that).
    "deepseek2-yarn": ("deepseek2", "llama-spm", {
        "tied": False, "n_layer": 2, "rope_base": 10000.0, "mla": MLA, "moe": True, "n_expert": 8,
        "dense_lead": 1, "no_selection_bias": True,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "orig": 16, "log_mul": 0.0707},
        "glm": {"expert_shared_count": 1, "expert_group_count": 4, "expert_group_used_count": 2}}),
    # GLM-4.7-Flash's MoE layout: 4 blocks, the last a NextN block (kept, not run), one group
    # (no group choice, as Kimi K2), sigmoid by key, weights renormalised and scaled by 1.8, a
    # selection bias, one shared expert; with V2-Lite's direct q (attention.q_lora_rank 0).
    "deepseek2-glmflash": ("deepseek2", "llama-spm", {
        "tied": False, "n_layer": 4, "nextn": 1, "rope_base": 1e6, "mla": dict(MLA, q_lora=0),
        "moe": True, "n_expert": 8, "dense_lead": 1,
        "glm": {"expert_shared_count": 1, "expert_weights_scale": 1.8, "expert_weights_norm": True,
                "expert_gating_func": 2, "expert_group_count": 1, "expert_group_used_count": 1}}),
}


# More deepseek2 files llama.cpp runs (seeds from 3800). The older converter's: one attn_kv_b per layer in place of
# attn_k_b / attn_v_b and no attention.*_mla keys -- head_count_kv = head_count, key_length the
# 32 unrotated + 32 rotated dims of q.k, value_length 32 -- which llama.cpp runs un-absorbed
# (a cache of every head's key and value).
#   deepseek2-kvb:       V2's attention (q through a normed low rank 64), every layer dense.
#   deepseek2-lite-kvb:  V2-Lite's layout: q direct (q_lora_rank 0), then V2's experts -- a
#                        dense first layer, 8 experts with a softmax gate (no gating key), top 2
#                        not renormalised, 2 shared experts, no selection bias.
#   deepseek2-temp:      Mistral Large 3's attention temperature on tiny-deepseek2's layout (split
#                        k_b / v_b): q x (1 + 0.5 ln(floor(pos / 16) + 1)), the length from
#                        attention.temperature_length, the whole head scaled (not only its rotated
#                        part).
#   deepseek2-kvb-fault: deepseek2-kvb's weights (same seed) with each head's kv_b rows in
#                        [value | key] order: what reading the layout the wrong way round runs.
#   deepseek2-temp-fault: deepseek2-temp's weights (same seed) without the temperature keys.
MLA_KVB = dict(MLA, kv_b=True)
DEEPSEEK_KVB = {
    "deepseek2-kvb": ("deepseek2", "llama-spm", {"tied": False, "n_layer": 2, "rope_base": 10000.0,
                                                 "mla": MLA_KVB}),
    "deepseek2-lite-kvb": ("deepseek2", "llama-spm", {
        "tied": False, "n_layer": 3, "rope_base": 10000.0, "mla": dict(MLA_KVB, q_lora=0), "moe": True,
        "n_expert": 8, "dense_lead": 1, "no_selection_bias": True, "glm": {"expert_shared_count": 2}}),
    "deepseek2-temp": ("deepseek2", "llama-spm", {"tied": False, "n_layer": 2, "rope_base": 10000.0, "mla": MLA,
                                                  "temperature_scale": 0.5, "temperature_length": 16}),
}
DEEPSEEK_KVB["deepseek2-kvb-fault"] = ("deepseek2", "llama-spm", {**DEEPSEEK_KVB["deepseek2-kvb"][2], "seed": 3800,
                                                                 "fault": "kv_b_order"})
DEEPSEEK_KVB["deepseek2-temp-fault"] = ("deepseek2", "llama-spm", {
    **{k: v for k, v in DEEPSEEK_KVB["deepseek2-temp"][2].items() if not k.startswith("temperature_")}, "seed": 3802})


# Gemma 4 as released (seeds from 3201, see main()): gemma4's options plus per-layer geometry.
GEMMA4 = {
    # The dense 31B's attention: the sliding layers' heads 32 wide over 2 KV heads
    # (attention.key_length_swa, head_count_kv listed per layer), the global layers' 64 wide
    # over 1 KV head (key_length), K standing for V there; proportional RoPE over the global
    # head (8 of 32 pairs rotate, as the 31B's 0.25), the whole sliding head rotated.
    "gemma4-swa-heads": ("gemma4", "llama-spm", {"tied": True, "n_layer": 5, "post_norms": True, "window": 8,
                                                 "swa_layers": [True, True, False, True, False],
                                                 "full_head": {"head_dim": 2 * HEAD_DIM, "kv_heads": 1},
                                                 "proportional_rope": 8, "final_softcap": 5.0}),
    # E2B/E4B's layout: per-layer embeddings 32 wide (per_layer_token_embd, its projection
    # from the embedding and norm; each layer's inp_gate, proj and post_norm), the last 2 of
    # 7 layers sharing KV with their FFN twice as wide (use_double_wide_mlp: feed_forward_length
    # listed per layer), the global layers' heads 64 wide as the sliding ones' 32.
    "gemma4-ple": ("gemma4", "llama-spm", {"tied": True, "n_layer": 7, "post_norms": True, "window": 8,
                                           "swa_layers": [True, True, False, True, False, True, False],
                                           "shared_kv": 2, "full_head": {"head_dim": 2 * HEAD_DIM, "kv_heads": 2},
                                           "ff_layers": [N_FF] * 5 + [2 * N_FF] * 2, "per_layer": 32,
                                           "proportional_rope": 8, "final_softcap": 5.0}),
}


# Embedding encoders, non-causal (seeds from 3500); their files give pooled output only
# (`ferrox embed`, tests/parity/test_embedding_parity.py), never text.
#   gemma-embedding: EmbeddingGemma's layout on the generic tiny shape: gemma3's layers
#           attending both ways, layer 0 through a symmetric window of 8 (positions p-4..p+4,
#           the parity inputs are longer), layer 1 global (sliding_window_pattern 2), mean
#           pooling, and sentence-transformers' dense projections 128 -> 256 -> 128 (f32).
#   gemma-embedding-nodense: the same weights (same seed) without the projections -- what
#           a pass that dropped them would compute; llama.cpp on it must disagree with ferrox
#           on gemma-embedding.
EMBEDDING = {
    "gemma-embedding": ("gemma-embedding", "llama-spm", {"tied": True, "window": 8, "swa_pattern": 2,
                                                         "pooling": 1, "dense": 2 * N_EMBD}),
}
EMBEDDING["gemma-embedding-nodense"] = ("gemma-embedding", "llama-spm",
                                        {**EMBEDDING["gemma-embedding"][2], "seed": 3500, "no_dense": True})
# BERT encoders (seeds from 3700), non-causal, pooled output only (tests/parity/test_bert_parity.py).
#   bert: BGE / all-MiniLM's layout on the generic tiny shape (GQA 4:2 kept: llama.cpp's bert
#           graph takes head_count_kv): q/k/v and output biases, token type and learned position
#           rows (f32, as the converter keeps them), LayerNorms with biases after each block,
#           a GELU FFN with biases, mean pooling, eps 1e-12 (BERT's).
#   bert-notypes: the same weights (same seed) without token_types -- what a pass that left
#           the type row out would compute; llama.cpp on it must disagree with ferrox on bert.
#   nomic-bert: nomic-embed-text's layout: bert's post-LayerNorms and token types, fused
#           attn_qkv without biases, NeoX RoPE (base 1000, as nomic's files), a SwiGLU FFN
#           without biases, mean pooling.
#   nomic-bert-base10k: the same weights (same seed) with rope.freq_base 10000 -- what a pass
#           that ignored the file's base would compute; llama.cpp on it must disagree.
BERT = {
    "bert": ("bert", "bert-bge", {"tied": True, "bias": True, "pooling": 1, "encoder": True,
                                  "learned_pos": True}),
}
BERT["bert-notypes"] = ("bert", "bert-bge", {**BERT["bert"][2], "seed": 3700, "no_types": True})
BERT["nomic-bert"] = ("nomic-bert", "bert-bge", {"tied": True, "fused": True, "pooling": 1, "encoder": True,
                                                "rope_base": 1000.0})
BERT["nomic-bert-base10k"] = ("nomic-bert", "bert-bge", {**BERT["nomic-bert"][2], "seed": 3702,
                                                        "rope_base": 10000.0})
# BERT rerankers (seeds from 3900), bge-reranker's layout as llama.cpp runs it (`bert`, pooling
# rank; tests/parity/test_bert_rerank_parity.py, tests/server/test_bert_rerank_client.py).
#   bert-rerank: tiny-bert's layout (its options, a seed of its own) with rank pooling and a
#           sequence classifier's head (f32): the CLS row through cls.weight [128, 128] and
#           cls.bias, tanh, then cls.output.weight [128, 1] and cls.output.bias; one label
#           (LABEL_0, as bge-reranker's files).
#   bert-rerank-nobias: the same weights (same seed) without cls.bias -- what a pass that left
#           the classifier's bias out would compute; llama.cpp on it must disagree.
#   bert-rerank-eos: the same weights (same seed) with tokenizer.ggml.add_eos_token true (as
#           XLM-RoBERTa's converter writes, bge-reranker-v2-m3's): llama-server joins a pair as
#           [CLS] query [SEP] [SEP] document [SEP] (SEP standing in for the absent EOS).
BERT_RERANK = {
    "bert-rerank": ("bert", "bert-bge", {**BERT["bert"][2], "pooling": 4, "rank_head": {"labels": ["LABEL_0"]}}),
}
BERT_RERANK["bert-rerank-nobias"] = ("bert", "bert-bge", {**BERT_RERANK["bert-rerank"][2], "seed": 3900,
                                                          "no_cls_bias": True})
BERT_RERANK["bert-rerank-eos"] = ("bert", "bert-bge", {**BERT_RERANK["bert-rerank"][2], "seed": 3900,
                                                       "tokenizer_flags": {"add_eos_token": True}})
# XLM-RoBERTa-style rerankers (seeds from 4500): bge-reranker-v2-m3's layout -- bert-rerank's
# options -- with a SentencePiece unigram vocabulary (tokenizer.ggml.model t5, trained by
# tests/model/ugm_vocab.py on text seeded by the model's seed; a precompiled nmt_nfkc charsmap),
# XLM-RoBERTa's ids (<s>=0 <pad>=1 </s>=2 <unk>=3), add_bos and add_eos, one token type.
#   bert-rerank-ugm: llama-server joins a pair as <s> query </s> </s> document </s>.
BERT_UGM = {
    "bert-rerank-ugm": ("bert", "ugm-xlmr", {**BERT_RERANK["bert-rerank"][2]}),
}
# Gemma 4's experts (seeds from 3600).
GEMMA4_MOE = {
    # 26B-A4B's layers: every layer's experts beside its dense GeGLU FFN (8 experts of 64, 2
    # chosen by a softmax and renormalised), the router reading rms_norm(x) / sqrt(n_embd) x
    # ffn_gate_inp.scale (drawn in [0.2, 3] so that it changes which experts are chosen), gate
    # and up experts fused into ffn_gate_up_exps as the converter writes them, a scalar per
    # expert on its output (ffn_down_exps.scale), the branches' own norms; 4 layers, local,
    # global, local, global.
    "gemma4-moe": ("gemma4", "llama-spm", {"tied": True, "n_layer": 4, "post_norms": True, "window": 8,
                                           "swa_layers": [True, False, True, False],
                                           "full_head": {"head_dim": 2 * HEAD_DIM, "kv_heads": 1},
                                           "moe": True, "n_expert": 8, "fused_experts": True,
                                           "down_scales": True, "proportional_rope": 8,
                                           "final_softcap": 5.0}),
}
# A fault for the parity test to catch: tiny-gemma4-moe's weights (same seed) with the router's
# input scale at 1 -- what a pass that ignored ffn_gate_inp.scale would compute.
GEMMA4_MOE["gemma4-moe-router-fault"] = ("gemma4", "llama-spm",
                                         {**GEMMA4_MOE["gemma4-moe"][2], "seed": 3600, "fault": "router_scale"})
# The same layout with gate and up experts in tensors of their own (ffn_gate_exps, ffn_up_exps),
# which llama.cpp's gemma4 loader takes where a file has no ffn_gate_up_exps; no down scales.
GEMMA4_MOE["gemma4-moe-unfused"] = ("gemma4", "llama-spm",
                                    {**GEMMA4_MOE["gemma4-moe"][2], "fused_experts": False, "down_scales": False})

# Llama 4 (text), seeds from 4000:
#   llama4: Maverick's interleave (interleave_moe_layer_step 2: layers 0 and 2 dense, 1 and 3
#           experts) with Scout's q/k L2 norm (4 experts, not 128): every fourth layer without
#           RoPE, 4 experts of which the top 1 by router logit reads its input times the
#           logit's sigmoid, one shared expert, llama3-style rope_freqs (divisors that matter
#           from position ~16), untied output; a context of 16384 so that the long parity test
#           crosses llama.cpp's fixed chunk of 8192 and the temperature's first step. The layer
#           without RoPE has attn_q x 4 (nope_q_gain): over 8000 positions random attention is
#           nearly uniform, and the temperature's 7% would move nothing visible.
#   llama4-scout: Scout's layout, experts on every layer.
#   llama4-shexp-fault: llama4's weights (same seed) with the shared expert's ffn_down zeroed:
#           what a pass that left the shared expert out computes.
LLAMA4 = {
    "llama4": ("llama4", "llama-spm", {"tied": False, "moe": True, "n_layer": 4, "n_used": 1, "n_ctx": 16384,
                                       "llama4": {"moe_step": 2, "nope_q_gain": 4.0}, "rope_base": 5e5,
                                       "rope_freqs": {"factor": 8.0, "low": 1.0, "high": 4.0, "orig": 64}}),
}
LLAMA4["llama4-scout"] = ("llama4", "llama-spm", {**LLAMA4["llama4"][2], "llama4": {"moe_step": 1, "nope_q_gain": 4.0}})
LLAMA4["llama4-shexp-fault"] = ("llama4", "llama-spm", {**LLAMA4["llama4"][2], "seed": 4000, "fault": "no_shexp"})


@dataclass(frozen=True)
class Family:
    entries: dict  # name -> (arch, vocab, options)
    first_seed: int
    maker: str = "make"  # "mamba2": make_mamba2 writes it (its converter's keys)


# In the order the files are made.
FAMILIES = [
    Family({arch: (arch, vocab, opt) for arch, (vocab, opt) in MODELS.items()}, 1000),
    Family(SHAPED, 1000 + len(MODELS)),
    Family(REARRANGED, 2000),
    Family(DEEPSEEK, 3100),
    Family(HYBRID, 3000),
    # From 3201: at 3200 the draw amplifies last-bit differences between the engines (the
    # plain gemma4 layout there measured NMSE 4.6e-4 mean and a flip at a tie on the path both
    # engines already shared bit for bit at other seeds).
    Family(GEMMA4, 3201),
    Family(GEMMA4_MOE, 3600),
    Family(MAMBA2, 4200, maker="mamba2"),
    Family(EMBEDDING, 3500),
    # From 3401: at 3400 the draw puts an 8-bit rounding tie in an early layer at position 9,
    # which the recurrent state carries to every later position (NMSE 1.8e-4 mean against
    # llama.cpp, one greedy flip at a near tie, 0.069), where 3401-3403 measure 1.1e-4 to 9.5e-4.
    Family(HYBRID_MOE, 3401),
    Family(SHORTCONV, 4100),
    Family(DEEPSEEK_KVB, 3800),
    Family(BERT, 3700),
    Family(LLAMA4, 4000),
    Family(MAMBA2_HYBRID, 4300),
    Family(BERT_RERANK, 3900),
    Family(BERT_UGM, 4500),
    Family(MAMBA2_HYBRID_MOE, 4400),
]
