"""ferrox's RoPE angle tables (core/src/model/rope_tables.cpp, through
ferrox_rope_tool) against two independent references:

  - float64 numpy written here from the published recipes: RoFormer's angles,
    Llama 3.1's per-pair divisors, YaRN (Peng et al. 2023 and its reference
    LlamaYaRNScaledRotaryEmbedding: find_correction_range, the linear ramp
    mask, mscale 0.1 ln s + 1, Hugging Face's mscale / mscale_all_dim ratio),
    LongRoPE (Phi-3's short/long factors chosen by the context, its attention
    factor multiplying cos and sin) and partial rotary (the first n_rot
    dimensions rotate, with exponents over n_rot, the rest pass through);
  - llama.cpp's own ggml_rope_ext on the CPU (libggml from llama-cpp-python,
    through ctypes), fed vectors from which its cos and sin can be read back:
    adjacent pairs (1, 0) give (cos, sin) in NORMAL mode, x[i] = 1 and
    x[i + n_rot/2] = 0 in NEOX mode, and the dimensions past n_rot are random
    and must come out unchanged.

Both compare the kernel-level spec (freq_scale, ext_factor, attn_factor,
factors). The context-level step (how llama.cpp turns a file's keys into that
spec: YaRN's magnitude, LongRoPE's choice by context) is held here against the
Python recipe, and end to end against llama.cpp by the tiny llama-yarn and
llama-longrope models in test_model_parity.py.

ggml accumulates angles in float32 (theta *= theta_scale per pair), ferrox in
float64, so ggml's own error grows with the position: the bound against ggml
is set from ggml's distance to the float64 recipe, printed by each case.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import pathlib

import numpy as np
import pytest

import llama_ref

POSITIONS = [0, 1, 2, 3, 7, 31, 63, 64, 100, 255, 1000, 4095]
# ferrox against the float64 recipe: float32 rounding of cos/sin (x the magnitude).
RECIPE_MAX_ERR = 2e-7
# ggml against either, at positions up to 4095: its float32 angle accumulation,
# measured at <= 4e-4 (printed); a wrong exponent, factor or ramp costs > 1e-2.
GGML_MAX_ERR = 2e-3


@pytest.fixture(scope="module")
def tool():
    path = llama_ref.find_tool("ferrox_rope_tool", "FERROX_ROPE_TOOL")
    if path is None or not path.exists():
        pytest.skip("ferrox_rope_tool is not built (set FERROX_ROPE_TOOL)")
    t = llama_ref.JsonLinesTool([str(path)])
    yield t
    t.close()


def ferrox_table(tool, cfg: dict, positions: list[int]) -> tuple[dict, np.ndarray, np.ndarray]:
    """cos, sin [len(positions), head_dim / 2] and the spec, one position per request."""
    half = cfg.get("head_dim", cfg["n_rot"]) // 2
    cos, sin = [], []
    spec = None
    for p in positions:
        r = tool.ask({**cfg, "pos0": p, "n": 1})
        spec = r
        cos.append(r["cos"][:half])
        sin.append(r["sin"][:half])
    return spec, np.array(cos, dtype=np.float64), np.array(sin, dtype=np.float64)


# ---- the published recipes, float64 -------------------------------------------------

def yarn_mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def recipe_spec(cfg: dict) -> dict:
    """What the published scheme asks of the kernel for these hyper-parameters."""
    n_rot = cfg["n_rot"]
    local = cfg.get("local", False)
    base = cfg.get("base_local", 10000.0) if local else cfg.get("base", 10000.0)
    scaling = cfg.get("scaling", "none")
    freq_scale = 1.0 if local else cfg.get("freq_scale", 1.0)
    factors = None
    if not local:
        if cfg.get("freqs"):
            factors = np.array(cfg["freqs"], dtype=np.float64)
        elif scaling == "longrope" and (cfg.get("short") or cfg.get("long")):
            # Phi-3: the long factors once the sequence may exceed the original context.
            key = "long" if cfg["context"] > cfg["n_ctx_orig"] else "short"
            factors = np.array(cfg[key], dtype=np.float64) if cfg.get(key) else None
    # The ramp's weight (HF's extrapolation_factor): the file's yarn_ext_factor, 1 for YaRN
    # when unset, else 0 (no ramp).
    ext = cfg.get("ext_factor", -1.0)
    if ext < 0:
        ext = 1.0 if scaling == "yarn" else 0.0
    yarn = ext != 0
    # YaRN's net magnitude is mscale(s) (HF: mscale(s, mscale) / mscale(s, mscale_all_dim),
    # with mscale 1), applied on the layers the scale applies to; with the ramp off, the
    # file's yarn_attn_factor alone. A file's attention factor multiplies either
    # (LongRoPE's sqrt(1 + ln s / ln L_orig) comes that way).
    magnitude = cfg.get("yarn_attn_factor", 1.0)
    if yarn:
        magnitude = 1.0
        if not local:
            s = 1.0 / cfg["freq_scale"]
            m_all = cfg.get("log_mul", 0.0)
            magnitude = yarn_mscale(s) / yarn_mscale(s, m_all) if m_all else yarn_mscale(s)
    magnitude *= cfg.get("attn_factor", 1.0)
    return {"n_rot": n_rot, "base": base, "freq_scale": freq_scale, "factors": factors, "yarn": yarn, "ext": ext,
            "magnitude": magnitude, "n_ctx_orig": cfg.get("n_ctx_orig", 0),
            "beta_fast": cfg.get("beta_fast", 32.0), "beta_slow": cfg.get("beta_slow", 1.0)}


def recipe_table(spec: dict, positions: list[int], half: int) -> tuple[np.ndarray, np.ndarray]:
    n_rot, base = spec["n_rot"], spec["base"]
    inv_freq = base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)  # RoFormer, over n_rot
    if spec["factors"] is not None:
        inv_freq = inv_freq / spec["factors"]
    inv_interp = inv_freq * spec["freq_scale"]
    if spec["yarn"]:
        # LlamaYaRNScaledRotaryEmbedding: pairs turning more than beta_fast times over the
        # original context keep their angle, fewer than beta_slow are interpolated.
        def corr_dim(rotations: float) -> float:
            return n_rot * math.log(spec["n_ctx_orig"] / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(corr_dim(spec["beta_fast"])), 0)
        high = min(math.ceil(corr_dim(spec["beta_slow"])), n_rot - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(n_rot // 2) - low) / (high - low), 0, 1)
        extrapolate = (1 - ramp) * spec["ext"]
        inv = inv_interp * (1 - extrapolate) + inv_freq * extrapolate
    else:
        inv = inv_interp
    theta = np.array(positions, dtype=np.float64)[:, None] * inv[None, :]
    cos = np.ones((len(positions), half))
    sin = np.zeros((len(positions), half))
    cos[:, : n_rot // 2] = np.cos(theta) * spec["magnitude"]
    sin[:, : n_rot // 2] = np.sin(theta) * spec["magnitude"]
    return cos, sin


# ---- llama.cpp's ggml_rope_ext ---------------------------------------------------------

class GgmlInitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


@functools.lru_cache(maxsize=1)
def ggml():
    import llama_cpp

    lib_dir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    base = ctypes.CDLL(str(sorted(lib_dir.glob("libggml-base.so*"))[0]), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(str(sorted(lib_dir.glob("libggml-cpu.so*"))[0]), mode=ctypes.RTLD_GLOBAL)
    p = ctypes.c_void_p
    base.ggml_init.restype, base.ggml_init.argtypes = p, [GgmlInitParams]
    base.ggml_free.argtypes = [p]
    base.ggml_new_tensor_1d.restype, base.ggml_new_tensor_1d.argtypes = p, [p, ctypes.c_int, ctypes.c_int64]
    base.ggml_new_tensor_3d.restype = p
    base.ggml_new_tensor_3d.argtypes = [p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    base.ggml_get_data.restype, base.ggml_get_data.argtypes = p, [p]
    f = ctypes.c_float
    base.ggml_rope_ext.restype = p
    base.ggml_rope_ext.argtypes = [p, p, p, p, ctypes.c_int, ctypes.c_int, ctypes.c_int, f, f, f, f, f, f]
    base.ggml_new_graph.restype, base.ggml_new_graph.argtypes = p, [p]
    base.ggml_build_forward_expand.argtypes = [p, p]
    cpu.ggml_graph_compute_with_ctx.restype = ctypes.c_int
    cpu.ggml_graph_compute_with_ctx.argtypes = [p, p, ctypes.c_int]
    return base, cpu


GGML_F32, GGML_I32 = 0, 26
GGML_ROPE_NORMAL, GGML_ROPE_NEOX = 0, 2


def ggml_table(kernel: dict, positions: list[int], head_dim: int, neox: bool) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin as ggml_rope_ext rotates by them, read back from probe vectors; asserts
    that the dimensions past n_rot pass through."""
    base, cpu = ggml()
    n_rot, n = kernel["n_rot"], len(positions)
    ctx = base.ggml_init(GgmlInitParams(64 << 20, None, False))
    try:
        x = base.ggml_new_tensor_3d(ctx, GGML_F32, head_dim, 1, n)
        pos = base.ggml_new_tensor_1d(ctx, GGML_I32, n)
        probe = np.zeros((n, head_dim), dtype=np.float32)
        rng = np.random.default_rng(7)
        probe[:, n_rot:] = rng.standard_normal((n, head_dim - n_rot))
        if neox:
            probe[:, : n_rot // 2] = 1.0
        else:
            probe[:, 0:n_rot:2] = 1.0
        ctypes.memmove(base.ggml_get_data(x), probe.ctypes.data, probe.nbytes)
        p = np.array(positions, dtype=np.int32)
        ctypes.memmove(base.ggml_get_data(pos), p.ctypes.data, p.nbytes)
        factors = None
        if kernel["factors"] is not None:
            ff = np.array(kernel["factors"], dtype=np.float32)
            factors = base.ggml_new_tensor_1d(ctx, GGML_F32, ff.size)
            ctypes.memmove(base.ggml_get_data(factors), ff.ctypes.data, ff.nbytes)
        out = base.ggml_rope_ext(ctx, x, pos, factors, n_rot, GGML_ROPE_NEOX if neox else GGML_ROPE_NORMAL,
                                 kernel["n_ctx_orig"], kernel["base"], kernel["freq_scale"], kernel["ext_factor"],
                                 kernel["attn_factor"], kernel["beta_fast"], kernel["beta_slow"])
        graph = base.ggml_new_graph(ctx)
        base.ggml_build_forward_expand(graph, out)
        assert cpu.ggml_graph_compute_with_ctx(ctx, graph, 1) == 0
        y = np.ctypeslib.as_array(ctypes.cast(base.ggml_get_data(out), ctypes.POINTER(ctypes.c_float)),
                                  shape=(n, head_dim)).astype(np.float64)
    finally:
        base.ggml_free(ctx)
    np.testing.assert_array_equal(y[:, n_rot:], probe[:, n_rot:])  # the unrotated tail
    half = head_dim // 2
    cos = np.ones((n, half))
    sin = np.zeros((n, half))
    if neox:
        cos[:, : n_rot // 2], sin[:, : n_rot // 2] = y[:, : n_rot // 2], y[:, n_rot // 2: n_rot]
    else:
        cos[:, : n_rot // 2], sin[:, : n_rot // 2] = y[:, 0:n_rot:2], y[:, 1:n_rot:2]
    return cos, sin


# ---- the cases ------------------------------------------------------------------------

def llama3_freqs(n_rot: int, base: float) -> list[float]:
    import sys

    sys.path.insert(0, str(llama_ref.REPO_ROOT / "tests" / "model"))
    from make_tiny_models import llama3_rope_freqs

    return [float(v) for v in llama3_rope_freqs(n_rot, base, 8.0, 1.0, 4.0, 64)]


def ramp_factors(n: int, top: float) -> list[float]:
    """Phi-3-like factors, as float32 values (a GGUF stores them so)."""
    return [float(np.float32(1 + top * t * t)) for t in np.linspace(0, 1, n)]


CASES = {
    "plain": {"n_rot": 64, "base": 10000.0},
    "linear": {"n_rot": 64, "base": 1e6, "scaling": "linear", "freq_scale": 0.125},
    "rope_freqs": {"n_rot": 64, "base": 5e5, "scaling": "linear", "freqs": llama3_freqs(64, 5e5)},
    "yarn": {"n_rot": 64, "base": 1e6, "scaling": "yarn", "freq_scale": 0.25, "n_ctx_orig": 4096},
    "yarn-betas-attn": {"n_rot": 128, "base": 150000.0, "scaling": "yarn", "freq_scale": 1 / 32, "n_ctx_orig": 4096,
                        "beta_fast": 16.0, "beta_slow": 2.0, "attn_factor": 0.9},
    "yarn-log-mul": {"n_rot": 64, "base": 10000.0, "scaling": "yarn", "freq_scale": 1 / 40, "n_ctx_orig": 4096,
                     "log_mul": 0.707},
    "yarn-local": {"n_rot": 64, "base": 1e6, "base_local": 10000.0, "scaling": "yarn", "freq_scale": 0.25,
                   "n_ctx_orig": 4096, "local": True},
    "longrope-short": {"n_rot": 96, "base": 10000.0, "scaling": "longrope", "n_ctx_orig": 4096, "context": 4096,
                       "attn_factor": 1.19, "short": ramp_factors(48, 0.5), "long": ramp_factors(48, 7.0)},
    "longrope-long": {"n_rot": 96, "base": 10000.0, "scaling": "longrope", "n_ctx_orig": 4096, "context": 4097,
                      "attn_factor": 1.19, "short": ramp_factors(48, 0.5), "long": ramp_factors(48, 7.0)},
    "yarn-half-ramp": {"n_rot": 64, "base": 1e6, "scaling": "yarn", "freq_scale": 0.125, "n_ctx_orig": 256,
                       "ext_factor": 0.5, "beta_fast": 24.0, "beta_slow": 2.0},
    "yarn-ramp-off": {"n_rot": 64, "base": 1e6, "scaling": "yarn", "freq_scale": 0.125, "n_ctx_orig": 256,
                      "ext_factor": 0.0, "yarn_attn_factor": 1.3, "attn_factor": 0.8},
    "partial": {"n_rot": 24, "head_dim": 96, "base": 10000.0},
    "partial-yarn-longrope-factors": {"n_rot": 32, "head_dim": 64, "base": 10000.0, "scaling": "yarn",
                                      "freq_scale": 0.5, "n_ctx_orig": 256, "freqs": ramp_factors(16, 3.0)},
}


@pytest.mark.parametrize("name", list(CASES))
def test_rope_table_matches_the_published_recipe(tool, name):
    cfg = CASES[name]
    half = cfg.get("head_dim", cfg["n_rot"]) // 2
    spec, cos, sin = ferrox_table(tool, cfg, POSITIONS)
    want = recipe_spec(cfg)
    assert spec["freq_scale"] == pytest.approx(want["freq_scale"], rel=1e-7)
    assert (spec["ext_factor"] != 0) == want["yarn"]
    if want["factors"] is None:
        assert spec["factors"] == []
    else:
        np.testing.assert_allclose(spec["factors"], want["factors"], rtol=1e-7)
    rc, rs = recipe_table(want, POSITIONS, half)
    err = max(np.abs(cos - rc).max(), np.abs(sin - rs).max())
    print(f"\n{name}: ferrox vs float64 recipe, max |cos/sin error| {err:.2e} over positions up to {max(POSITIONS)}")
    assert err <= RECIPE_MAX_ERR * max(1.0, want["magnitude"])


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("neox", [False, True], ids=["normal", "neox"])
def test_rope_table_matches_ggml_rope(tool, name, neox):
    llama_ref.require_llama_cpp()
    cfg = CASES[name]
    head_dim = cfg.get("head_dim", cfg["n_rot"])
    spec, cos, sin = ferrox_table(tool, cfg, POSITIONS)
    # ggml_rope_ext's arguments are the kernel-level spec ferrox derived.
    kernel = {"n_rot": cfg["n_rot"], "base": cfg.get("base_local", 10000.0) if cfg.get("local") else cfg["base"],
              "freq_scale": spec["freq_scale"], "ext_factor": spec["ext_factor"],
              "attn_factor": spec["attn_factor"], "beta_fast": cfg.get("beta_fast", 32.0),
              "beta_slow": cfg.get("beta_slow", 1.0), "n_ctx_orig": cfg.get("n_ctx_orig", 0),
              "factors": spec["factors"] or None}
    gc, gs = ggml_table(kernel, POSITIONS, head_dim, neox)
    rc, rs = recipe_table(recipe_spec(cfg), POSITIONS, head_dim // 2)
    err = max(np.abs(cos - gc).max(), np.abs(sin - gs).max())
    ggml_vs_recipe = max(np.abs(gc - rc).max(), np.abs(gs - rs).max())
    print(f"\n{name} ({'neox' if neox else 'normal'}): ferrox vs ggml_rope_ext max err {err:.2e}; "
          f"ggml vs float64 recipe {ggml_vs_recipe:.2e}")
    assert err <= GGML_MAX_ERR


def test_a_wrong_table_is_caught(tool):
    """Fault injection: the comparison must see a factor applied to the wrong pairs."""
    cfg = CASES["rope_freqs"]
    spec, cos, sin = ferrox_table(tool, cfg, POSITIONS)
    wrong = dict(recipe_spec(cfg))
    wrong["factors"] = wrong["factors"][::-1].copy()
    rc, rs = recipe_table(wrong, POSITIONS, cfg["n_rot"] // 2)
    assert max(np.abs(cos - rc).max(), np.abs(sin - rs).max()) > 1e-2
