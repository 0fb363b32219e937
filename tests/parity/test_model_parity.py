"""ferrox's decoder against llama.cpp (llama-cpp-python) on the same GGUF.

For each model and prompt: llama.cpp tokenizes the prompt and greedily
continues it for 32 tokens; both engines then compute teacher-forced logits
at every position of that sequence, compared by NMSE = sum((a-b)^2)/sum(b^2).
Models: Gemma 3 270M (real weights) and tiny random-weight llama, qwen2, qwen3,
qwen3moe and gemma3 models (tests/model/make_tiny_models.py).

The reference is configured like for like (REFERENCE_CONFIGS): llama.cpp's KV
cache in f32 and flash attention off, as ferrox computes attention (llama-cpp-
python's default f16 cache alone costs ~2e-4 NMSE on the tiny models). Both
engines then round activations to 8 bits by the same rules (Q8_0 / Q8_K per
weight kind) and GELU through the same f16 table, so they differ only in the
order of float sums.

On the tiny models that leaves NMSE far below the issue's 1e-3 (TINY_*). On
Gemma 3 270M it does not: its large activations make every 8-bit rounding
that a last-bit difference flips propagate, and ferrox disagrees with itself
across its own ISA paths (AVX-512 vs portable: the same rules, another sum
order) by as much as it disagrees with llama.cpp: mean 1.0e-3..1.6e-3, worst
up to 1.5e-2 (docs/models.md). So the Gemma 3 bounds (GEMMA3_*) are set from
that floor, and each Gemma 3 prompt is also held relative to it: ferrox's
distance to llama.cpp may not exceed SELF_RATIO times its distance to its own
portable path. Greedy tokens must agree wherever llama.cpp's top-2 gap is
larger than the engines' difference (3x the RMS logit difference at that
position, at least NEAR_TIE logits).

Skips (exit 77 via run_pytest.py) when llama_cpp, a model or the ferrox binary is absent.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import llama_ref

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import gguf_in_memory  # noqa: E402

GREEDY_TOKENS = 32
# Measured with the f32 reference (docs/models.md): tiny models mean <= 1.6e-4, worst
# <= 8.7e-4 (tiny gemma3); the issue asks for 1e-3.
TINY_MEAN_NMSE_MAX = 1e-3
TINY_WORST_NMSE_MAX = 5e-3
# Gemma 3 270M: against llama.cpp mean 1.2e-3..2.2e-3 per prompt, worst 2.5e-2 (chat);
# ferrox against its own portable path mean 1.0e-3..1.6e-3, worst 6e-3..1.5e-2.
GEMMA3_MEAN_NMSE_MAX = 5e-3
GEMMA3_WORST_NMSE_MAX = 5e-2
SELF_RATIO = 4.0  # ferrox vs llama.cpp mean NMSE <= SELF_RATIO * max(self mean, SELF_FLOOR)
SELF_FLOOR = 1e-3
NEAR_TIE = 0.5  # logits: a top-2 gap below this may flip on rounding alone
# ferrox against the exact float64 evaluation of Gemma 3 270M (9 positions): exact f32
# kernels land at ~2e-12, 8-bit activation kernels at 0.9e-3 (Q8_0 everywhere) to 2.1e-3
# (Q8_K for K-quants, as llama.cpp); llama.cpp itself at 1.9e-3 (f32 KV) to 4.5e-3
# (f16 KV). For ferrox's default f32 cache: --kv-type f16 adds ~3e-3 (5.1e-3 measured),
# so FERROX_PARITY_REFERENCE=f16 fails this test. A decoder bug (window, rope base, layer
# pattern, scale) costs > 1e-1.
FLOAT64_WORST_NMSE_MAX = 5e-3
# tiny-gemma3 against float64: both engines ~1.3e-3 mean (random attention is less
# forgiving of 8-bit activations than trained attention).
TINY_FLOAT64_MEAN_NMSE_MAX = 5e-3
TINY_FLOAT64_WORST_NMSE_MAX = 5e-2

GEMMA3_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
]


def tiny_models_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FERROX_TINY_MODELS", llama_ref.CACHE_DIR / "tiny-models"))


def ferrox_bin() -> pathlib.Path:
    tool = llama_ref.find_tool("ferrox", "FERROX_BIN")
    if tool is None or not tool.exists():
        pytest.skip("the ferrox binary is not built (set FERROX_BIN)")
    return tool


def ferrox_cmd(*args: str) -> list[str]:
    cmd = [str(ferrox_bin())]
    if os.environ.get("FERROX_PLUGIN_DIR"):
        cmd += ["--plugin-dir", os.environ["FERROX_PLUGIN_DIR"]]
    return cmd + list(args)


def ferrox_logits(model: pathlib.Path, tokens: list[int], n_vocab: int, isa: str = "",
                  context: int = 0) -> np.ndarray:
    """Teacher-forced logits from `ferrox logits`; `isa` forces the CPU plugin's path;
    `context` (default: the sequence, at least 64) matters where RoPE depends on it (LongRoPE)."""
    env = dict(os.environ)
    if isa:
        env["FERROX_CPU_ISA"] = isa
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "logits.f32"
        subprocess.run(
            ferrox_cmd("logits", "-m", str(model), "--tokens", ",".join(map(str, tokens)), "--out", str(out),
                       "-t", "2", "-c", str(context or max(len(tokens), 64)), *REFERENCE_CONFIGS[REFERENCE][1]),
            check=True, capture_output=True, env=env)
        return np.fromfile(out, dtype=np.float32).reshape(len(tokens), n_vocab)


# llama.cpp's KV cache and attention path. llama-cpp-python 0.3.36 keeps K and V in f16
# unless told otherwise (type_k/type_v) and runs flash attention only when asked
# (flash_attn=True). ferrox's default cache is f32 with plain softmax attention, so the
# reference is too: f32 K/V, flash attention off -- like for like, leaving the 8-bit
# activation rounding in the matmuls as the systematic difference.
# FERROX_PARITY_REFERENCE=f16 compares both engines with an f16 cache (ferrox --kv-type
# f16); f16-fa adds llama.cpp's flash attention.
REFERENCE_CONFIGS = {  # name: (llama_cpp.Llama arguments, extra ferrox arguments)
    "f32": ({"type_k": 0, "type_v": 0, "flash_attn": False}, []),  # GGML_TYPE_F32 = 0
    "f16": ({"type_k": 1, "type_v": 1, "flash_attn": False}, ["--kv-type", "f16"]),  # GGML_TYPE_F16 = 1
    "f16-fa": ({"type_k": 1, "type_v": 1, "flash_attn": True}, ["--kv-type", "f16"]),
}
REFERENCE = os.environ.get("FERROX_PARITY_REFERENCE", "f32")


class LlamaReference:
    def __init__(self, model: pathlib.Path, n_ctx: int = 256):
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(model), logits_all=True, n_ctx=n_ctx, n_threads=2,
                                   verbose=False, **REFERENCE_CONFIGS[REFERENCE][0])

    def greedy(self, prompt_tokens: list[int], n: int) -> list[int]:
        self.llm.reset()
        self.llm.eval(prompt_tokens)
        out = []
        for _ in range(n):
            t = int(np.argmax(self.llm.scores[self.llm.n_tokens - 1]))
            out.append(t)
            self.llm.eval([t])
        return out

    def logits(self, tokens: list[int]) -> np.ndarray:
        self.llm.reset()
        self.llm.eval(tokens)
        return np.array(self.llm.scores[: len(tokens)], dtype=np.float32)


def nmse_rows(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    out = np.empty(len(got))
    for start in range(0, len(got), 64):  # float64 a block at a time: long runs have large vocabularies
        got64, want64 = got[start:start + 64].astype(np.float64), want[start:start + 64].astype(np.float64)
        out[start:start + 64] = ((got64 - want64) ** 2).sum(axis=1) / (want64 ** 2).sum(axis=1)
    return out


def compare(model: pathlib.Path, prompt_tokens: list[int], label: str, context: int = 0) -> dict:
    """`context`: both engines' context (a multiple of 256: llama.cpp rounds it up so),
    else llama.cpp's 256 and ferrox's sequence length."""
    ref = LlamaReference(model, n_ctx=context or 256)
    continuation = ref.greedy(prompt_tokens, GREEDY_TOKENS)
    seq = prompt_tokens + continuation
    want = ref.logits(seq)
    got = ferrox_logits(model, seq, want.shape[1], context=context)
    nmse = nmse_rows(got, want)
    # Greedy along the teacher-forced sequence: every position predicting a generated token.
    first = len(prompt_tokens) - 1
    flips = []
    for i in range(first, len(seq) - 1):
        a, b = int(got[i].argmax()), int(want[i].argmax())
        if a != b:
            top2 = np.sort(want[i])[::-1][:2]
            tie = max(NEAR_TIE, 3.0 * float(np.sqrt(np.mean((got[i].astype(np.float64) - want[i]) ** 2))))
            flips.append((i, a, b, round(float(top2[0] - top2[1]), 3), round(tie, 3)))
    print(f"\n{label}: {len(seq)} positions, NMSE worst {nmse.max():.2e} (position {int(nmse.argmax())}), "
          f"mean {nmse.mean():.2e}; greedy argmax flips {len(flips)}/{len(seq) - 1 - first} {flips}")
    return {"nmse": nmse, "flips": flips, "seq": seq, "got": got}


def check(result: dict, mean_max: float, worst_max: float) -> None:
    assert result["nmse"].mean() <= mean_max
    assert result["nmse"].max() <= worst_max
    for position, ours, theirs, gap, tie in result["flips"]:
        assert gap < tie, f"position {position}: ferrox picks {ours}, llama.cpp {theirs} by {gap:.3f} logits"


@pytest.fixture(scope="module")
def gemma3() -> pathlib.Path:
    llama_ref.require_llama_cpp()
    path = llama_ref.gemma3_path()
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.mark.parametrize("prompt", GEMMA3_PROMPTS, ids=["france", "code", "chat"])
def test_gemma3_logits_and_greedy_match_llama_cpp(gemma3, prompt):
    import llama_cpp  # noqa: F401

    ref = LlamaReference(gemma3)
    tokens = list(ref.llm.tokenize(prompt.encode(), add_bos=True, special=True))
    result = compare(gemma3, tokens, f"gemma3 {prompt[:24]!r}")
    check(result, GEMMA3_MEAN_NMSE_MAX, GEMMA3_WORST_NMSE_MAX)
    # The floor: the same sequence through ferrox's portable path (same rounding rules,
    # another float summation order).
    portable = ferrox_logits(gemma3, result["seq"], result["got"].shape[1], isa="portable")
    own = nmse_rows(result["got"], portable)
    print(f"ferrox vs its own portable path: worst {own.max():.2e}, mean {own.mean():.2e}")
    assert result["nmse"].mean() <= SELF_RATIO * max(own.mean(), SELF_FLOOR)


def test_gemma3_run_greedy_continuation_matches_llama_cpp(gemma3):
    """End to end: `ferrox run --temp 0` (its own tokenizer) against llama.cpp's greedy
    text; identical up to the first near tie: where they part, llama.cpp itself must rate
    ferrox's token within NEAR_TIE logits of its own pick (rounding, not a wrong forward)."""
    prompt = "The capital of France is"
    reply = subprocess.run(ferrox_cmd("run", "-m", str(gemma3), "-p", prompt, "-n", str(GREEDY_TOKENS),
                                      "--temp", "0", "-t", "2", "-c", "128", "--json",
                                      *REFERENCE_CONFIGS[REFERENCE][1]),
                           check=True, capture_output=True, text=True)
    doc = json.loads(reply.stdout)
    ours = doc["tokens"]
    # Every product and attention call ran on a named CPU kernel (the registry's records).
    assert {(k["op"], k["outcome"]) for k in doc["kernels"]} == {("MATVEC", "hit"), ("GEMM", "hit"),
                                                                 ("ATTENTION", "hit")}
    ref = LlamaReference(gemma3)
    prompt_tokens = list(ref.llm.tokenize(prompt.encode(), add_bos=True, special=True))
    theirs = ref.greedy(prompt_tokens, len(ours))
    same = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), len(ours))
    print(f"\ngreedy run: {same}/{len(ours)} tokens identical before the first difference")
    if same < len(ours):
        logits = ref.logits(prompt_tokens + theirs[:same])[-1]
        gap = float(logits[theirs[same]] - logits[ours[same]])
        print(f"first difference at {same}: ferrox {ours[same]}, llama.cpp {theirs[same]}, "
              f"llama.cpp's own gap between them {gap:.3f} logits")
        assert gap < NEAR_TIE, f"ferrox's token {ours[same]} is {gap:.3f} logits behind llama.cpp's pick"


def gemma3_float64_logits(path: pathlib.Path, tokens: list[int]) -> np.ndarray:
    """Gemma 3 in float64 numpy from the gguf package's dequantized weights, written
    from the architecture's definition: the exact answer both engines approximate.
    Hyper-parameters come from the file; without the optional keys, the five-local-one-
    global layer pattern and the local rope base 10000 are the architecture's."""
    from gguf.quants import dequantize

    reader = gguf_in_memory.read(path)
    tensors = {t.name: t for t in reader.tensors}

    def meta(key: str, default=None):
        field = reader.fields.get("gemma3." + key)
        return default if field is None else field.contents()

    def weight(name: str) -> np.ndarray:
        t = tensors[name]
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else a.reshape(-1)

    eps = float(meta("attention.layer_norm_rms_epsilon"))

    def rms(x, w):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    def rope_neox(x, base, d):  # x [n, heads, head_dim]: the first d dims rotate, the rest pass
        n = x.shape[0]
        angle = np.arange(n)[:, None] * base ** (-2.0 * np.arange(d // 2) / d)[None, :]
        c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        a, b = x[..., : d // 2], x[..., d // 2: d]
        return np.concatenate([a * c - b * s, a * s + b * c, x[..., d:]], axis=-1)

    n_embd, n_layer = int(meta("embedding_length")), int(meta("block_count"))
    n_head = int(meta("attention.head_count"))
    n_kv = int(meta("attention.head_count_kv", n_head))
    hd = int(meta("attention.key_length", n_embd // n_head))
    n_rot = int(meta("rope.dimension_count", hd))
    window, period = int(meta("attention.sliding_window")), int(meta("attention.sliding_window_pattern", 6))
    base_global, base_local = float(meta("rope.freq_base")), float(meta("rope.freq_base_swa", 10000.0))
    # Gemma 3 27B (62 layers) scales by 1/sqrt(n_embd / n_head), the others by 1/sqrt(head_dim)
    # (gemma_pytorch's config: query_pre_attn_scalar).
    scale = 1 / np.sqrt(n_embd // n_head if n_layer == 62 else hd)
    n = len(tokens)
    embd = weight("token_embd.weight")
    x = embd[tokens] * np.sqrt(float(n_embd))
    pos = np.arange(n)
    for il in range(n_layer):
        p = f"blk.{il}."
        is_global = (il + 1) % period == 0
        h = rms(x, weight(p + "attn_norm.weight"))
        q = rms((h @ weight(p + "attn_q.weight").T).reshape(n, n_head, hd), weight(p + "attn_q_norm.weight"))
        k = rms((h @ weight(p + "attn_k.weight").T).reshape(n, n_kv, hd), weight(p + "attn_k_norm.weight"))
        v = (h @ weight(p + "attn_v.weight").T).reshape(n, n_kv, hd)
        base = base_global if is_global else base_local
        q, k = rope_neox(q, base, n_rot), rope_neox(k, base, n_rot)
        visible = (pos[None, :] <= pos[:, None]) & (is_global | (pos[:, None] - pos[None, :] < window))
        out = np.empty((n, n_head, hd))
        for head in range(n_head):
            kv = head // (n_head // n_kv)
            scores = q[:, head] @ k[:, kv].T * scale
            scores = np.where(visible, scores, -np.inf)
            w = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[:, head] = (w / w.sum(axis=1, keepdims=True)) @ v[:, kv]
        o = out.reshape(n, n_head * hd) @ weight(p + "attn_output.weight").T
        x = x + rms(o, weight(p + "post_attention_norm.weight"))
        h = rms(x, weight(p + "ffn_norm.weight"))
        g, u = h @ weight(p + "ffn_gate.weight").T, h @ weight(p + "ffn_up.weight").T
        f = (gelu(g) * u) @ weight(p + "ffn_down.weight").T
        x = x + rms(f, weight(p + "post_ffw_norm.weight"))
    return rms(x, weight("output_norm.weight")) @ embd.T


def float64_distances(path: pathlib.Path, ref: LlamaReference, tokens: list[int], label: str) -> np.ndarray:
    """ferrox's NMSE per position against the float64 evaluation; llama.cpp's is printed."""
    want = gemma3_float64_logits(path, tokens)
    ours = nmse_rows(ferrox_logits(path, tokens, want.shape[1]), want)
    theirs = nmse_rows(ref.logits(tokens), want)
    print(f"\n{label} vs float64 over {len(tokens)} positions: ferrox worst NMSE {ours.max():.2e} "
          f"(mean {ours.mean():.2e}), llama.cpp worst {theirs.max():.2e} (mean {theirs.mean():.2e})")
    return ours


def test_gemma3_matches_float64(gemma3):
    """Both engines against an exact float64 evaluation of the same weights: ferrox must
    sit at 8-bit activation rounding, as llama.cpp does (its distance is printed)."""
    ref = LlamaReference(gemma3)
    tokens = list(ref.llm.tokenize(b"The capital of France is a city of", add_bos=True, special=True))
    ours = float64_distances(gemma3, ref, tokens, "gemma3")
    assert ours.max() <= FLOAT64_WORST_NMSE_MAX


TINY_ARCHS = ["llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "granite", "olmo2", "smollm3", "qwen2vl", "qwen3vl", "gemma2",
              "gpt-oss", "gemma4", "gemma4-shared", "gemma4-swa-heads", "gemma4-ple",
              "glm4moe", "glm4moe-air", "deepseek2", "qwen35"]


def tiny_model(arch: str) -> pathlib.Path:
    llama_ref.require_llama_cpp()
    path = tiny_models_dir() / f"tiny-{arch}.gguf"
    if not path.exists():
        pytest.skip(f"{path} is absent (python3 tests/model/make_tiny_models.py)")
    return path


def tiny_prompt() -> list[int]:
    rng = np.random.default_rng(1234)
    return [1] + [int(t) for t in rng.integers(10, 1000, size=15)]  # 1: BOS of both vocabularies used


def fault_nmse(name: str, faulty_name: str, fault: str) -> np.ndarray:
    """Per-position NMSE of ferrox on tiny-`name` against llama.cpp on tiny-`faulty_name` (the
    same weights with one part wrong), over the prompt and llama.cpp's greedy continuation: a
    fault the parity test must catch shows as a mean past its bound."""
    path, faulty = tiny_model(name), tiny_model(faulty_name)
    ref = LlamaReference(faulty)
    seq = tiny_prompt() + ref.greedy(tiny_prompt(), GREEDY_TOKENS)
    want = ref.logits(seq)
    nmse = nmse_rows(ferrox_logits(path, seq, want.shape[1]), want)
    print(f"\ntiny {name} against its {fault}: NMSE mean {nmse.mean():.2e}, worst {nmse.max():.2e}")
    return nmse


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_tiny_model_logits_match_llama_cpp(arch):
    """Random-weight models from tests/model/make_tiny_models.py."""
    path = tiny_model(arch)
    check(compare(path, tiny_prompt(), f"tiny {arch}"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


@pytest.mark.parametrize("name", ["deepseek2-moe", "deepseek2-yarn", "deepseek2-glmflash"])
def test_tiny_deepseek_family_matches_llama_cpp(name):
    """The DeepSeek V3 family through deepseek2's latent attention (issue 35):
    deepseek2-moe: V3's experts -- a dense first layer, then 8 experts in 2 groups of which
    only the better is eligible (group-limited routing), a sigmoid gate with a selection
    bias, renormalised top-2 weights scaled by 2.5, a shared expert; deepseek2-yarn: V2's
    softmax gate over 4 groups of 2 (2 used) and DeepSeek's YaRN (factor 4 over an original
    context of 16: q.k scaled by mscale^2, the rotated pairs' magnitude left at 1);
    deepseek2-glmflash: GLM-4.7-Flash's NextN block (kept, not run), one group, q direct.
    Measured (7 Dec 2026, AMD EPYC host): NMSE mean 7.7e-5 / 5.4e-15 / 3.0e-5, worst 4.4e-4 /
    5.8e-15 / 1.9e-4, greedy flips 1 (a near tie, 0.012 logits) / 0 / 0. Seen failing: groups
    ignored in route() (deepseek2-moe 4.9e-1 mean, 25 flips; deepseek2-yarn 2.7e-3
    mean); the q.k mscale left out (deepseek2-yarn 2.7e-2 mean, 17 flips)."""
    path = tiny_model(name)
    check(compare(path, tiny_prompt(), f"tiny {name}", context=256), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)
@pytest.mark.parametrize("name", ["deepseek2-kvb", "deepseek2-lite-kvb"])
def test_tiny_deepseek_kv_b_layout_matches_llama_cpp(name):
    """deepseek2 files of the older converter (issue 35): one attn_kv_b per layer, no *_mla
    keys, which llama.cpp runs un-absorbed and so does ferrox (Decoder::expanded_kv): kv_b
    expands the normed latent into every head's unrotated key and value, the rotated part
    shared by the heads. deepseek2-kvb: V2's q through a normed low rank, every layer dense;
    deepseek2-lite-kvb: V2-Lite's direct q and V2's softmax-gated experts with 2 shared ones.
    Measured (7 Dec 2026, AMD EPYC host): NMSE mean 5.5e-15 / 5.5e-15, worst 6.0e-15 /
    5.9e-15, no greedy flips."""
    path = tiny_model(name)
    check(compare(path, tiny_prompt(), f"tiny {name}", context=256), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_deepseek_kv_b_read_the_wrong_way_round_is_caught():
    """The fault the kv_b layout's parity must catch: llama.cpp on tiny-deepseek2-kvb's weights
    with each head's kv_b rows in [value | key] order (what reading the layout the wrong way
    round runs) against ferrox on tiny-deepseek2-kvb fails the parity bound."""
    nmse = fault_nmse("deepseek2-kvb", "deepseek2-kvb-fault", "kv_b order fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_deepseek_attention_temperature_matches_llama_cpp():
    """Mistral Large 3's attention temperature through deepseek2 (issue 35): q x (1 + 0.5
    ln(floor(pos / 16) + 1)) over the whole head -- its rotated part and its absorbed
    unrotated part -- with the length from attention.temperature_length. Measured (7 Dec
    2026, AMD EPYC host): NMSE mean 1.3e-5, worst 2.4e-4, no greedy flips. Seen failing with
    only the rotated part scaled: 4.9e-2 mean, 18 flips."""
    path = tiny_model("deepseek2-temp")
    check(compare(path, tiny_prompt(), "tiny deepseek2-temp", context=256), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_deepseek_attention_temperature_ignored_is_caught():
    """The fault the temperature's parity must catch: llama.cpp on tiny-deepseek2-temp's weights
    without the temperature keys (what a pass ignoring them computes) against ferrox on
    tiny-deepseek2-temp fails the parity bound."""
    nmse = fault_nmse("deepseek2-temp", "deepseek2-temp-fault", "ignored-temperature fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


@pytest.mark.parametrize("name", ["gemma4-moe", "gemma4-moe-unfused"])
def test_tiny_gemma4_experts_match_llama_cpp(name):
    """Gemma 4 26B-A4B's layers (issue 35): every layer's experts beside its dense GeGLU FFN,
    the router over rms_norm(x) / sqrt(n_embd) x ffn_gate_inp.scale, fused gate/up experts,
    a scale per expert's output, the branches' own norms. Measured (7 Dec 2026, AMD EPYC
    host): NMSE mean 6.6e-5, worst 2.1e-4, no greedy flips. At seed 3203 the same layout
    measured mean 4.1e-4, worst 1.0e-2 (one flip on a tie of saturated logits): both
    engines bit-identical up to position 31, where layer 0's attn_output product took an
    8-bit activation rounding the other way (5e-3 there), which this random model amplifies.
    gemma4-moe-unfused: the gate and up experts in tensors of their own, no down scales."""
    path = tiny_model(name)
    check(compare(path, tiny_prompt(), f"tiny {name}"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_gemma4_ignored_router_scale_is_caught():
    """The fault the gemma4 experts' parity must catch: llama.cpp on tiny-gemma4-moe's weights
    with ffn_gate_inp.scale at 1 (what a pass ignoring the router's scale computes) against
    ferrox on tiny-gemma4-moe fails the parity bound."""
    nmse = fault_nmse("gemma4-moe", "gemma4-moe-router-fault", "router-scale fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_qwen35_wrong_gate_is_caught():
    """The fault the qwen35 parity must catch: llama.cpp on tiny-qwen35's weights with the
    attention gate zeroed (every head's output halved) against ferrox on tiny-qwen35 fails
    the parity bound."""
    nmse = fault_nmse("qwen35", "qwen35-gate-fault", "gate fault")
    # Halving one layer's attention in four costs ~6e-3 against float64: the parity bound
    # must not let it through.
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_qwen35moe_matches_llama_cpp():
    """Qwen3.5 / Qwen3.6 MoE (issue 35): qwen35's Gated DeltaNet and gated attention layers,
    listed per layer (attention.recurrent_layers, RGRR, against full_attention_interval's
    pattern), 8 experts (softmax, renormalised top 2) and one shared expert weighed per row by
    sigmoid(ffn_gate_inp_shexp . x), and an MTP block kept and not run."""
    path = tiny_model("qwen35moe")
    check(compare(path, tiny_prompt(), "tiny qwen35moe"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_qwen35moe_wrong_shared_expert_gate_is_caught():
    """The fault the qwen35moe parity must catch: llama.cpp on tiny-qwen35moe's weights with
    the shared expert's gate zeroed (every row takes half its output) against ferrox on
    tiny-qwen35moe fails the parity bound."""
    nmse = fault_nmse("qwen35moe", "qwen35moe-shexp-gate-fault", "shared-gate fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_qwen3next_matches_llama_cpp():
    """Qwen3-Next (issue 35): qwen35moe's layers with plain NeoX RoPE, value heads grouped by
    key head (4 over 2) and beta/alpha from one ssm_ba per key head; an MTP block kept."""
    path = tiny_model("qwen3next")
    check(compare(path, tiny_prompt(), "tiny qwen3next"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_qwen3next_wrong_beta_alpha_layout_is_caught():
    """The fault the qwen3next parity must catch: llama.cpp on tiny-qwen3next's weights with
    ssm_ba's rows rearranged so that it reads the original rows' halves as betas and alphas
    (a pass that skipped the per-key-head layout) against ferrox on tiny-qwen3next."""
    nmse = fault_nmse("qwen3next", "qwen3next-ba-fault", "ssm_ba layout fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_lfm2_matches_llama_cpp():
    """LFM2 (issue 35): short-convolution layers where attention.head_count_kv lists 0 --
    in_proj into b, c, x, a causal depthwise convolution of b*x over a window of 3 carried in
    the sequence's state, times c, out_proj -- and one attention layer with per-head q/k
    norms; the final norm named token_embd_norm."""
    path = tiny_model("lfm2")
    check(compare(path, tiny_prompt(), "tiny lfm2"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_lfm2moe_matches_llama_cpp():
    """LFM2-8B-A1B's layers (issue 35): lfm2's short convolutions and attention, the first
    FFN dense, then 8 experts with a sigmoid gate and a selection bias, the top 2 weights
    renormalised (llama.cpp's lfm2moe graph does whatever expert_weights_norm says)."""
    path = tiny_model("lfm2moe")
    check(compare(path, tiny_prompt(), "tiny lfm2moe"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_mamba2_matches_llama_cpp():
    """Mamba-2 (issue 35): 3 layers of attn_norm then a Mamba-2 block and nothing else --
    ssm_in into z, x|B|C and dt, a causal depthwise convolution (kernel 4, with a bias) and
    SiLU over the sequence's window, the selective scan over 8 heads of 32 with a state of 16
    per channel (B and C shared by 2 groups of 4 heads, decay exp(softplus(dt + dt_bias) x
    ssm_a)), the D skip, y x silu(z) RMS-normed per group, ssm_out -- carried in the
    sequence's state from token to token."""
    path = tiny_model("mamba2")
    check(compare(path, tiny_prompt(), "tiny mamba2"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_mamba2_without_d_skip_is_caught():
    """The fault the mamba2 parity must catch: llama.cpp on tiny-mamba2's weights with ssm_d
    zeroed (a pass that skipped the D term) against ferrox on tiny-mamba2 fails the bound."""
    nmse = fault_nmse("mamba2", "mamba2-no-d-fault", "D-skip fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


@pytest.mark.parametrize("name", ["granitehybrid", "granitehybrid-rope"])
def test_tiny_granitehybrid_matches_llama_cpp(name):
    """Granite 4.0 H (issue 35): Mamba-2 blocks where head_count_kv lists 0 (tiny-mamba2's
    shape), attention on layer 1, a SwiGLU FFN after every block, granite's four scales (the
    residual scale on the mixer's output and the FFN's alike); no layer rotates where
    rope.scaling.finetuned is false (Granite 4.0 H's files), the attention layer does where it
    is true (granitehybrid-rope, Bamba's)."""
    path = tiny_model(name)
    check(compare(path, tiny_prompt(), f"tiny {name}"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_granitehybrid_without_residual_scale_is_caught():
    """The fault the granitehybrid parity must catch: llama.cpp on tiny-granitehybrid's weights
    without residual_scale (a pass that ignored it) against ferrox on tiny-granitehybrid."""
    nmse = fault_nmse("granitehybrid", "granitehybrid-residual-fault", "residual-scale fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_granitehybrid_moe_matches_llama_cpp():
    """Granite 4.0 H Tiny/Small's layout (issue 35): tiny-granitehybrid's Mamba-2 blocks,
    attention and scales, every FFN 4 experts each feed_forward_length wide (softmax, top 2
    renormalised, not scaled) plus one ungated SwiGLU shared expert
    expert_shared_feed_forward_length wide, the sum under the residual scale."""
    path = tiny_model("granitehybrid-moe")
    check(compare(path, tiny_prompt(), "tiny granitehybrid-moe"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_granitehybrid_moe_without_shared_expert_is_caught():
    """The fault the granitehybrid-moe parity must catch: llama.cpp on tiny-granitehybrid-moe's
    weights with the shared expert's ffn_down zeroed (a pass that skipped the shared expert)
    against ferrox on tiny-granitehybrid-moe. The residual scale (0.22) damps every FFN's share,
    so the fault stands at 1.8 times the bound (measured 1.84e-3 mean), not twice as others do;
    the model itself matches at 6e-15."""
    nmse = fault_nmse("granitehybrid-moe", "granitehybrid-moe-shexp-fault", "shared-expert fault")
    assert nmse.mean() > 1.5 * TINY_MEAN_NMSE_MAX


def test_tiny_nemotron_h_moe_matches_llama_cpp():
    """Nemotron 3 Nano 30B-A3B's layout (issue 35): tiny-nemotron_h's RFRGF with each FFN layer
    8 experts chosen by sigmoid + exp_probs_b, the top 2 renormalised and scaled by 2.5, and one
    shared expert, every expert a squared-ReLU FFN without a gate."""
    path = tiny_model("nemotron_h_moe")
    check(compare(path, tiny_prompt(), "tiny nemotron_h_moe"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_nemotron_h_moe_without_shared_expert_is_caught():
    """The fault the nemotron_h_moe parity must catch: llama.cpp on tiny-nemotron_h_moe's weights
    with the shared expert's ffn_down zeroed against ferrox on tiny-nemotron_h_moe."""
    nmse = fault_nmse("nemotron_h_moe", "nemotron_h_moe-shexp-fault", "shared-expert fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_nemotron_h_matches_llama_cpp():
    """Nemotron-H (issue 35): five layers of one block each -- Mamba-2 (head_count_kv and
    feed_forward_length 0), a squared-ReLU FFN without a gate (a width, no KV heads) or
    attention without RoPE (KV heads, width 0) -- each between attn_norm and the residual add."""
    path = tiny_model("nemotron_h")
    check(compare(path, tiny_prompt(), "tiny nemotron_h"), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_nemotron_h_skipped_ffn_layers_are_caught():
    """The fault the nemotron_h parity must catch: llama.cpp on tiny-nemotron_h's weights with
    the FFN-only layers' ffn_down zeroed (a pass that skipped them, as a layer of no kind)
    against ferrox on tiny-nemotron_h."""
    nmse = fault_nmse("nemotron_h", "nemotron_h-ffn-fault", "skipped-FFN fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_lfm2_reversed_conv_taps_are_caught():
    """The fault the lfm2 parity must catch: llama.cpp on tiny-lfm2's weights with every
    channel's convolution taps reversed (a pass reading its window newest first) against
    ferrox on tiny-lfm2 fails the parity bound."""
    nmse = fault_nmse("lfm2", "lfm2-conv-fault", "conv-taps fault")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def qwen35_float64_logits(path: pathlib.Path, tokens: list[int]) -> np.ndarray:
    """Qwen3.5 in float64 numpy from the gguf package's dequantized weights, written from
    llama.cpp's graph (src/models/qwen35.cpp, delta-net-base.cpp): Gated DeltaNet layers
    token by token, gated full attention on every full_attention_interval-th layer."""
    from gguf.quants import dequantize

    reader = gguf_in_memory.read(path)
    tensors = {t.name: t for t in reader.tensors}

    def meta(key: str, default=None):
        field = reader.fields.get("qwen35." + key)
        return default if field is None else field.contents()

    def weight(name: str) -> np.ndarray:
        t = tensors[name]
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else a.reshape(-1)

    eps = float(meta("attention.layer_norm_rms_epsilon"))

    def rms(x, w):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w

    def silu(x):
        return x / (1 + np.exp(-x))

    n_layer, n_head = int(meta("block_count")), int(meta("attention.head_count"))
    n_kv, hd = int(meta("attention.head_count_kv")), int(meta("attention.key_length"))
    n_rot, base = int(meta("rope.dimension_count")), float(meta("rope.freq_base"))
    kernel, S = int(meta("ssm.conv_kernel")), int(meta("ssm.state_size"))
    vh, kh = int(meta("ssm.time_step_rank")), int(meta("ssm.group_count"))
    interval = int(meta("full_attention_interval", 4))
    n = len(tokens)
    x = weight("token_embd.weight")[tokens]
    pos = np.arange(n)
    angle = pos[:, None] * base ** (-2.0 * np.arange(n_rot // 2) / n_rot)[None, :]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]

    def rope(t):  # NeoX over the first n_rot dims (multi-section RoPE, one position for text)
        a, b = t[..., : n_rot // 2], t[..., n_rot // 2: n_rot]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos, t[..., n_rot:]], axis=-1)

    for il in range(n_layer):
        p = f"blk.{il}."
        h = rms(x, weight(p + "attn_norm.weight"))
        if (il + 1) % interval == 0:
            qg = (h @ weight(p + "attn_q.weight").T).reshape(n, n_head, 2, hd)
            q = rope(rms(qg[:, :, 0], weight(p + "attn_q_norm.weight")))
            gate = qg[:, :, 1]
            k = rope(rms((h @ weight(p + "attn_k.weight").T).reshape(n, n_kv, hd), weight(p + "attn_k_norm.weight")))
            v = (h @ weight(p + "attn_v.weight").T).reshape(n, n_kv, hd)
            out = np.empty((n, n_head, hd))
            for head in range(n_head):
                kv = head // (n_head // n_kv)
                scores = np.where(pos[None, :] <= pos[:, None], q[:, head] @ k[:, kv].T / np.sqrt(hd), -np.inf)
                w = np.exp(scores - scores.max(axis=1, keepdims=True))
                out[:, head] = (w / w.sum(axis=1, keepdims=True)) @ v[:, kv]
            o = (out / (1 + np.exp(-gate))).reshape(n, -1) @ weight(p + "attn_output.weight").T
        else:
            mixed = h @ weight(p + "attn_qkv.weight").T  # [n, conv channels]
            z = (h @ weight(p + "attn_gate.weight").T).reshape(n, vh, S)
            beta = 1 / (1 + np.exp(-(h @ weight(p + "ssm_beta.weight").T)))
            g = np.logaddexp(0, h @ weight(p + "ssm_alpha.weight").T + weight(p + "ssm_dt.bias")) * weight(p + "ssm_a")
            conv_w = weight(p + "ssm_conv1d.weight")  # [channels, kernel]
            padded = np.concatenate([np.zeros((kernel - 1, mixed.shape[1])), mixed])
            conv = silu(np.stack([(padded[t:t + kernel].T * conv_w).sum(axis=1) for t in range(n)]))
            q, k = conv[:, : kh * S].reshape(n, kh, S), conv[:, kh * S: 2 * kh * S].reshape(n, kh, S)
            v = conv[:, 2 * kh * S:].reshape(n, vh, S)
            q = q / np.sqrt((q * q).sum(axis=-1, keepdims=True) + eps)
            k = k / np.sqrt((k * k).sum(axis=-1, keepdims=True) + eps)
            state = np.zeros((vh, S, S))  # [head][key i][value j]
            core = np.empty((n, vh, S))
            for t in range(n):
                for head in range(vh):
                    qq, kk = q[t, head % kh], k[t, head % kh]
                    st = state[head] * np.exp(g[t, head])
                    st = st + np.outer(kk, beta[t, head] * (v[t, head] - kk @ st))
                    state[head] = st
                    core[t, head] = qq @ st / np.sqrt(S)
            o = (rms(core, weight(p + "ssm_norm.weight")) * silu(z)).reshape(n, -1) @ weight(p + "ssm_out.weight").T
        x = x + o
        h = rms(x, weight(p + "post_attention_norm.weight"))
        f = (silu(h @ weight(p + "ffn_gate.weight").T) * (h @ weight(p + "ffn_up.weight").T)) @ weight(p + "ffn_down.weight").T
        x = x + f
    return rms(x, weight("output_norm.weight")) @ weight("output.weight").T


def test_tiny_qwen35_matches_float64():
    """tiny-qwen35 against the float64 evaluation of llama.cpp's graph (no llama.cpp needed):
    the recurrent layers' convolution, delta rule and gated norm, the gated attention."""
    path = tiny_models_dir() / "tiny-qwen35.gguf"
    if not path.exists():
        pytest.skip(f"{path} is absent (python3 tests/model/make_tiny_models.py)")
    tokens = tiny_prompt() + [int(t) for t in np.random.default_rng(35).integers(10, 1000, size=32)]
    want = qwen35_float64_logits(path, tokens)
    got = ferrox_logits(path, tokens, want.shape[1])
    nmse = nmse_rows(got, want.astype(np.float32))
    print(f"\ntiny qwen35 against float64: NMSE worst {nmse.max():.2e}, mean {nmse.mean():.2e}")
    # ferrox rounds activations to 8 bits before each Q8_0 product, as llama.cpp does; against
    # the exact evaluation that costs what it costs tiny-gemma3 (the same bounds).
    assert nmse.mean() <= TINY_FLOAT64_MEAN_NMSE_MAX and nmse.max() <= TINY_FLOAT64_WORST_NMSE_MAX


def test_tiny_gemma3_matches_float64():
    """tiny-gemma3's 48-token parity sequence crosses its 8-position window six times:
    ferrox against the exact float64 evaluation, with llama.cpp's distance printed."""
    path = tiny_model("gemma3")
    ref = LlamaReference(path)
    prompt = tiny_prompt()
    seq = prompt + ref.greedy(prompt, GREEDY_TOKENS)
    ours = float64_distances(path, ref, seq, "tiny gemma3")
    # The rounding budget of the llama.cpp comparison: random attention is less forgiving
    # than trained attention, so 8-bit activations cost more here than on the 270M model;
    # a decoder bug (window off by one, wrong rope base or layer pattern) costs > 1e-1 mean.
    assert ours.mean() <= TINY_FLOAT64_MEAN_NMSE_MAX
    assert ours.max() <= TINY_FLOAT64_WORST_NMSE_MAX


# ---- issue 13: the models people run, shaped tiny ---------------------------------------

def test_tiny_llama31_rope_freqs_match_llama_cpp_over_1000_positions():
    """Llama 3.1+ files carry their RoPE scaling as `rope_freqs.weight` (per-pair divisors)
    and no rope.scaling key; tiny-llama31 has the llama-bpe vocabulary and divisors that
    matter from position ~16 on. Ignoring them (the tensor skipped) measured NMSE 6.0e-2 mean,
    3.4e-1 worst over these 1033 positions, against 4.2e-5 / 2.6e-4 with them."""
    path = tiny_model("llama31")
    rng = np.random.default_rng(31)
    prompt = [128000] + [int(t) for t in rng.integers(1000, 120000, size=1000)]  # <|begin_of_text|>
    result = compare(path, prompt, "tiny llama31 (rope_freqs)", context=1280)
    check(result, TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


@pytest.mark.parametrize("name", ["llama-yarn", "llama-longrope", "llama-bias", "llama-attn-out-bias", "phi3",
                                  "phi3-partial", "mistral3", "olmo3", "llama-moe", "llama-lowbit"])
def test_tiny_rope_scaling_and_optional_tensors_match_llama_cpp(name):
    """YaRN (ramp and magnitude) and LongRoPE (long factors: the 256-position context
    exceeds the original 64; attention factor 1.19) on the llama architecture, as
    llama.cpp applies them; llama's optional q/k/v biases, bound and added; and phi3:
    fused attn_qkv and gate||up bound as row views, LongRoPE factors without a scaling
    type, 24 of 32 dims rotated on phi3-partial (Phi-4-mini's shape); mistral3: YaRN
    with a log multiplier and the attention temperature past 16 positions; olmo3: a window
    on three layers of four, rotated without YaRN, and YaRN on the fourth; llama-moe:
    Mixtral's experts in a llama file (expert_count, each expert feed_forward_length wide);
    llama-lowbit: NVFP4, Q1_0, TQ2_0 and TQ1_0 matrices (the kinds added after MXFP4)."""
    path = tiny_model(name)
    check(compare(path, tiny_prompt(), f"tiny {name}", context=256), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_qwen2_yarn_matches_llama_cpp_over_1000_positions():
    """Qwen2.5-style YaRN (NeoX, rope base 1e6, factor 8) over an original context of 128:
    within these 1033 positions the fast pairs keep their angles, the ramp pairs mix, the
    slow ones are interpolated, and cos/sin carry the magnitude 1 + 0.1 ln 8.
    As built: NMSE 6.2e-5 mean / 3.5e-4 worst. With YaRN disabled in rope_spec (plain
    linear scaling, factor 8, magnitude 1) it measured 1.2e-1 / 7.5e-1; with only the
    magnitude dropped 5.3e-2 / 3.5e-1; with only the ramp dropped 1.4e-1 / 7.5e-1."""
    path = tiny_model("qwen2-yarn")
    rng = np.random.default_rng(2)
    prompt = [int(t) for t in rng.integers(1000, 150000, size=1000)]
    result = compare(path, prompt, "tiny qwen2-yarn", context=1280)
    check(result, TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_gemma3_partial_rotary_matches_llama_cpp():
    """rope.dimension_count 32 of head_dim 64 on gemma3 (NeoX): llama.cpp rotates dims 0..31
    as pairs (i, i + 16) and passes 32..63 through. As built: NMSE 2.4e-4 mean / 1.7e-3
    worst. With rope.dimension_count ignored (whole heads rotate) it measured 6.1e-1 / 3.1;
    with whole-head NeoX pairs (i, i + 32) over the prefix tables -- what the ABI's rope
    entry would do, hence the host path -- 4.6e-1 / 2.1."""
    path = tiny_model("gemma3-partial")
    rng = np.random.default_rng(5)
    prompt = [1] + [int(t) for t in rng.integers(100, 30000, size=100)]
    result = compare(path, prompt, "tiny gemma3-partial", context=256)
    check(result, TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)
    # And against float64 numpy of the definition (a rotated prefix of each head), as
    # tiny gemma3 is: no farther from it than llama.cpp is (x1.25).
    want = gemma3_float64_logits(path, result["seq"])
    ours, theirs = nmse_rows(result["got"], want), nmse_rows(LlamaReference(path).logits(result["seq"]), want)
    print(f"tiny gemma3-partial vs float64: ferrox mean {ours.mean():.2e} worst {ours.max():.2e}, "
          f"llama.cpp mean {theirs.mean():.2e} worst {theirs.max():.2e}")
    assert ours.mean() <= 1.25 * theirs.mean()


def test_tiny_llama_partial_rotary_is_refused_like_llama_cpp():
    """llama.cpp refuses a llama file whose rope.dimension_count is not the head dimension
    ("invalid n_rot"); ferrox must refuse it too, naming the key, rather than run a model
    no reference runs."""
    import llama_cpp

    path = tiny_model("llama-partial")
    with pytest.raises(ValueError):
        llama_cpp.Llama(model_path=str(path), n_ctx=64, verbose=False)
    err = ferrox_load_error(path)
    assert "llama.rope.dimension_count" in err and "16 of 32" in err, err


# tiny-gemma3-27b: 62 random layers compound 8-bit activation rounding; measured ferrox vs
# llama.cpp 1.4e-2 worst / 3.4e-3 mean, both ~1.6e-2 mean from float64 (ferrox 1.57e-2,
# llama.cpp 1.68e-2). The head_dim scale (the bug) costs 0.33 mean against either.
GEMMA3_27B_MEAN_NMSE_MAX = 1e-2
GEMMA3_27B_WORST_NMSE_MAX = 5e-2


def test_tiny_gemma3_27b_attention_scale_matches_llama_cpp():
    """62 layers make llama.cpp scale Gemma 3's attention by 1/sqrt(n_embd / n_head):
    1/sqrt(32) here, where 1/sqrt(head_dim) would be 1/8. Over 62 random layers 8-bit
    rounding alone exceeds the tiny bounds, so ferrox is also held against the exact
    float64 evaluation: no farther from it than llama.cpp is (x1.25)."""
    path = tiny_model("gemma3-27b")
    result = compare(path, tiny_prompt(), "tiny gemma3-27b")
    check(result, GEMMA3_27B_MEAN_NMSE_MAX, GEMMA3_27B_WORST_NMSE_MAX)
    want = gemma3_float64_logits(path, result["seq"])
    ours = nmse_rows(result["got"], want)
    theirs = nmse_rows(LlamaReference(path).logits(result["seq"]), want)
    print(f"tiny gemma3-27b vs float64: ferrox mean {ours.mean():.2e}, llama.cpp mean {theirs.mean():.2e}")
    assert ours.mean() <= 1.25 * theirs.mean()


def ferrox_load_error(path: pathlib.Path) -> str:
    """stderr of `ferrox logits` on PATH, which must fail."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(ferrox_cmd("logits", "-m", str(path), "--tokens", "1,2,3", "--out",
                                         str(pathlib.Path(tmp) / "x.f32"), "-t", "2"),
                              capture_output=True, text=True)
    assert proc.returncode != 0, f"ferrox ran {path.name}, which holds a tensor it does not use"
    return proc.stderr


def test_a_tensor_no_architecture_has_is_refused_by_name_as_llama_cpp_refuses_it():
    import llama_cpp

    path = tiny_model("llama-extra")
    assert "blk.1.attn_gate_scale.weight" in ferrox_load_error(path)
    with pytest.raises(ValueError):  # llama.cpp: "wrong number of tensors"
        llama_cpp.Llama(model_path=str(path), verbose=False)


def test_a_tensor_llama_cpp_uses_and_ferrox_does_not_is_refused_not_dropped():
    """llama's optional dense FFN bias: llama.cpp adds it; ferrox does not implement it, so
    running without it would be silently wrong."""
    import llama_cpp

    path = tiny_model("llama-ffn-bias")
    assert "blk.0.ffn_down.bias" in ferrox_load_error(path)
    llama_cpp.Llama(model_path=str(path), verbose=False)  # the reference loads it


# ---- issue 35: Llama 4 (text) ---------------------------------------------------------

@pytest.mark.parametrize("name", ["llama4", "llama4-scout"])
def test_tiny_llama4_matches_llama_cpp(name):
    """Llama 4's text path: every fourth layer without RoPE, the others rotated (llama3-style
    rope_freqs) with q and k L2-normed after RoPE; experts (4, the top 1 by router logit) whose
    input is multiplied by the logit's sigmoid, one shared expert beside them; llama4: dense
    FFNs between the expert layers (interleave_moe_layer_step 2, Maverick's), llama4-scout:
    experts on every layer. Within these 48 positions the chunks (8192) and the temperature
    (from position 8191) do not act: test_tiny_llama4_past_8192_positions holds those."""
    path = tiny_model(name)
    check(compare(path, tiny_prompt(), f"tiny {name}", context=256), TINY_MEAN_NMSE_MAX, TINY_WORST_NMSE_MAX)


def test_tiny_llama4_without_the_shared_expert_is_caught():
    """The fault the parity must catch: llama.cpp on tiny-llama4's weights with the shared
    expert's ffn_down zeroed (what a pass leaving the shared expert out computes) against
    ferrox on tiny-llama4 fails the parity bound."""
    nmse = fault_nmse("llama4", "llama4-shexp-fault", "shared expert left out")
    assert nmse.mean() > 2 * TINY_MEAN_NMSE_MAX


def test_tiny_llama4_past_8192_positions_matches_llama_cpp():
    """llama.cpp's llama4 loader fixes the chunk at 8192 positions and the temperature's step
    at 8192 (1 + 0.1 ln(floor((pos + 1) / 8192) + 1)): no key states them, so only a sequence
    past 8192 positions shows them. 8200 prompt positions and 32 greedy ones: from position
    8191 the layer without RoPE scales q by 1 + 0.1 ln 2, from 8192 the rotated layers see only
    the new chunk's positions. Those rows (from 8190 on) are held to the usual bounds and to
    twice the median of the rows before them (what 8-bit rounding costs over 8000 positions of
    random attention): measured (7 Dec 2026) mean 3.4e-4, worst 6.4e-4, median before 3.5e-4.
    Seen failing: the chunk doubled (1.2 mean there), the temperature left out (9.8e-4 mean,
    2.8 times the median before). Before the boundary top-1 routing over random weights meets
    router near-ties: 74 isolated positions of 8190 above 5e-3 (worst 0.57), spread evenly."""
    path = tiny_model("llama4")
    rng = np.random.default_rng(4000)
    prompt = [1] + [int(t) for t in rng.integers(10, 32000, size=8199)]
    result = compare(path, prompt, "tiny llama4 (past 8192 positions)", context=8448)
    nmse = result["nmse"]
    boundary, before = nmse[8190:], nmse[:8190]
    print(f"positions 8190..: NMSE mean {boundary.mean():.2e}, worst {boundary.max():.2e}; before: median "
          f"{np.median(before):.2e}, {int((before > TINY_WORST_NMSE_MAX).sum())} above {TINY_WORST_NMSE_MAX}")
    assert boundary.mean() <= TINY_MEAN_NMSE_MAX
    assert boundary.max() <= TINY_WORST_NMSE_MAX
    assert boundary.mean() <= 2 * np.median(before)
    assert np.median(before) <= TINY_MEAN_NMSE_MAX
    assert (before > TINY_WORST_NMSE_MAX).mean() <= 0.02  # router near-ties: isolated positions
    for position, ours, theirs, gap, tie in result["flips"]:
        assert gap < tie, f"position {position}: ferrox picks {ours}, llama.cpp {theirs} by {gap:.3f} logits"
