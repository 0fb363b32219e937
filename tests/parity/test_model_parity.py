"""ferrox's decoder against llama.cpp (llama-cpp-python) on the same GGUF.

For each model and prompt: llama.cpp tokenizes the prompt and greedily
continues it for 32 tokens; both engines then compute teacher-forced logits
at every position of that sequence, compared by NMSE = sum((a-b)^2)/sum(b^2).

What the thresholds mean (measured, docs/models.md): ferrox computes in f32
with an exact dequantized dot; llama.cpp's CPU path quantizes activations to
8 bits and tabulates GELU in f16. Against a float64 evaluation of the same
Gemma 3 weights (test_gemma3_matches_float64_where_llama_cpp_drifts) ferrox
sits at ~2e-12 NMSE with exact f32 kernels (~9e-4 with the CPU plugin's
int8-activation kernels) and llama.cpp at ~1.6e-3 mean / 4.5e-3 worst -- so the
two engines cannot agree to better than llama.cpp's own error. We ask for a
mean NMSE <= 5e-3 over positions, a worst <= 2e-2, and greedy tokens that
agree wherever llama.cpp's top-2 gap is larger than the engines' difference
(3x the RMS logit difference at that position, at least 0.5 logits).

Skips (exit 77 via run_pytest.py) when llama_cpp, a model or the ferrox binary is absent.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile

import numpy as np
import pytest

import llama_ref

GREEDY_TOKENS = 32
MEAN_NMSE_MAX = 5e-3
WORST_NMSE_MAX = 2e-2
NEAR_TIE = 0.5  # logits: a top-2 gap below this may flip on rounding alone

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


def ferrox_logits(model: pathlib.Path, tokens: list[int], n_vocab: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "logits.f32"
        subprocess.run(
            ferrox_cmd("logits", "-m", str(model), "--tokens", ",".join(map(str, tokens)), "--out", str(out),
                       "-t", "2", "-c", str(max(len(tokens), 64))),
            check=True, capture_output=True)
        return np.fromfile(out, dtype=np.float32).reshape(len(tokens), n_vocab)


class LlamaReference:
    def __init__(self, model: pathlib.Path, n_ctx: int = 256):
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(model), logits_all=True, n_ctx=n_ctx, n_threads=2,
                                   verbose=False)

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
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    return ((got64 - want64) ** 2).sum(axis=1) / (want64 ** 2).sum(axis=1)


def compare(model: pathlib.Path, prompt_tokens: list[int], label: str) -> dict:
    ref = LlamaReference(model)
    continuation = ref.greedy(prompt_tokens, GREEDY_TOKENS)
    seq = prompt_tokens + continuation
    want = ref.logits(seq)
    got = ferrox_logits(model, seq, want.shape[1])
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
    return {"nmse": nmse, "flips": flips}


def check(result: dict) -> None:
    assert result["nmse"].mean() <= MEAN_NMSE_MAX
    assert result["nmse"].max() <= WORST_NMSE_MAX
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
    check(compare(gemma3, tokens, f"gemma3 {prompt[:24]!r}"))


def test_gemma3_run_greedy_continuation_matches_llama_cpp(gemma3):
    """End to end: `ferrox run --temp 0` (its own tokenizer) against llama.cpp's greedy
    text; identical up to the first near tie: where they part, llama.cpp itself must rate
    ferrox's token within NEAR_TIE logits of its own pick (rounding, not a wrong forward)."""
    prompt = "The capital of France is"
    reply = subprocess.run(ferrox_cmd("run", "-m", str(gemma3), "-p", prompt, "-n", str(GREEDY_TOKENS),
                                      "--temp", "0", "-t", "2", "-c", "128", "--json"),
                           check=True, capture_output=True, text=True)
    ours = json.loads(reply.stdout)["tokens"]
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
    from the architecture's definition: the exact answer both engines approximate."""
    import gguf
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}

    def weight(name: str) -> np.ndarray:
        t = tensors[name]
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else a.reshape(-1)

    def rms(x, w, eps=1e-6):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    def rope_neox(x, base):  # x [n, heads, d]
        n, _, d = x.shape
        angle = np.arange(n)[:, None] * base ** (-2.0 * np.arange(d // 2) / d)[None, :]
        c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)

    n_embd, n_layer, n_head, hd, window = 640, 18, 4, 256, 512
    n = len(tokens)
    embd = weight("token_embd.weight")
    x = embd[tokens] * np.sqrt(float(n_embd))
    pos = np.arange(n)
    for il in range(n_layer):
        p = f"blk.{il}."
        is_global = (il + 1) % 6 == 0
        h = rms(x, weight(p + "attn_norm.weight"))
        q = rms((h @ weight(p + "attn_q.weight").T).reshape(n, n_head, hd), weight(p + "attn_q_norm.weight"))
        k = rms((h @ weight(p + "attn_k.weight").T).reshape(n, 1, hd), weight(p + "attn_k_norm.weight"))
        v = (h @ weight(p + "attn_v.weight").T).reshape(n, 1, hd)
        base = 1e6 if is_global else 1e4
        q, k = rope_neox(q, base), rope_neox(k, base)
        visible = (pos[None, :] <= pos[:, None]) & (is_global | (pos[:, None] - pos[None, :] < window))
        out = np.empty((n, n_head, hd))
        for head in range(n_head):
            scores = q[:, head] @ k[:, 0].T / np.sqrt(hd)
            scores = np.where(visible, scores, -np.inf)
            w = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[:, head] = (w / w.sum(axis=1, keepdims=True)) @ v[:, 0]
        o = out.reshape(n, n_head * hd) @ weight(p + "attn_output.weight").T
        x = x + rms(o, weight(p + "post_attention_norm.weight"))
        h = rms(x, weight(p + "ffn_norm.weight"))
        g, u = h @ weight(p + "ffn_gate.weight").T, h @ weight(p + "ffn_up.weight").T
        f = (gelu(g) * u) @ weight(p + "ffn_down.weight").T
        x = x + rms(f, weight(p + "post_ffw_norm.weight"))
    return rms(x, weight("output_norm.weight")) @ embd.T


def test_gemma3_matches_float64_where_llama_cpp_drifts(gemma3):
    """Both engines against an exact float64 evaluation of the same weights: ferrox
    must sit at f32 rounding; llama.cpp's distance is printed (it is what bounds parity)."""
    ref = LlamaReference(gemma3)
    tokens = list(ref.llm.tokenize(b"The capital of France is a city of", add_bos=True, special=True))
    want = gemma3_float64_logits(gemma3, tokens)
    ours = nmse_rows(ferrox_logits(gemma3, tokens, want.shape[1]), want)
    theirs = nmse_rows(ref.logits(tokens), want)
    print(f"\ngemma3 vs float64 over {len(tokens)} positions: ferrox worst NMSE {ours.max():.2e}, "
          f"llama.cpp worst {theirs.max():.2e} (mean {theirs.mean():.2e})")
    # Exact f32 kernels land near 1e-12; kernels that quantize activations to
    # 8 bits (the CPU plugin's fast path, like llama.cpp's) near 1e-3. A decoder
    # bug (rope, mask, norm) lands far above both.
    assert ours.max() < 2e-3
    assert ours.max() <= theirs.max()


TINY_ARCHS = ["llama", "qwen2", "qwen3", "qwen3moe"]


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_tiny_model_logits_match_llama_cpp(arch):
    """Random-weight models from tests/model/make_tiny_models.py."""
    llama_ref.require_llama_cpp()
    path = tiny_models_dir() / f"tiny-{arch}.gguf"
    if not path.exists():
        pytest.skip(f"{path} is absent (python3 tests/model/make_tiny_models.py)")
    rng = np.random.default_rng(1234)
    prompt = [1] + [int(t) for t in rng.integers(10, 1000, size=15)]
    check(compare(path, prompt, f"tiny {arch}"))
