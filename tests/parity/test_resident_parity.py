"""Resident decoding (ABI 1.2, and 1.3's attention_cells) against host-memory decoding, on the real CLI.

The test fixture plugin libferrox_resident.so implements every ABI 1.3 entry
on host memory with the core's own reference math, and its 1.0 entries with
the same math. So `--resident auto` (the forward pass in the plugin's
buffers) and `--resident off` (activations in host memory, the same plugin
for weight products) must give the same logits to rounding: any difference
is the core's resident plumbing (offsets, op order, KV cache writes, the MoE
round trip). A GPU plugin is checked the same way by tests/cuda/test_cuda_gpu.

The fixture's `fault` option makes one op slightly wrong; each fault must
fail the same comparison, which proves the comparison can fail.
"""
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import llama_ref

# Both sides run the same reference kernels; only summation order may differ
# (none does today), so anything above this is a plumbing bug. A wrong op
# costs > 1e-4 on these random models.
RESIDENT_NMSE_MAX = 1e-9
TINY_ARCHS = ["llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "granite", "olmo2", "smollm3", "qwen2vl", "qwen3vl",
              "phi3", "mistral3", "olmo3", "llama-moe", "glm4moe", "gemma4-moe", "deepseek2", "deepseek2-kvb",
              "deepseek2-temp", "llama4", "llama4-scout"]
FAULTS = ["rms_norm", "rope", "add", "glu", "convert", "get_rows", "attention", "project"]


def ferrox_bin() -> pathlib.Path:
    tool = llama_ref.find_tool("ferrox", "FERROX_BIN")
    if tool is None or not tool.exists():
        pytest.skip("the ferrox binary is not built (set FERROX_BIN)")
    return tool


def tiny_model(arch: str) -> pathlib.Path:
    folder = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", llama_ref.CACHE_DIR / "tiny-models"))
    path = folder / f"tiny-{arch}.gguf"
    if not path.exists():
        pytest.skip(f"{path} is absent (python3 tests/model/make_tiny_models.py)")
    return path


@pytest.fixture(scope="module")
def plugin_dir():
    """A folder holding only the resident fixture, as a user's plugins folder would."""
    fixtures = os.environ.get("FERROX_FIXTURE_PLUGIN_DIR")
    if not fixtures or not (pathlib.Path(fixtures) / "libferrox_resident.so").exists():
        pytest.skip("libferrox_resident.so is not built (set FERROX_FIXTURE_PLUGIN_DIR)")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(pathlib.Path(fixtures) / "libferrox_resident.so", tmp)
        os.chmod(pathlib.Path(tmp) / "libferrox_resident.so", 0o755)
        yield pathlib.Path(tmp)


def config(folder: pathlib.Path, options: str = "") -> pathlib.Path:
    path = folder / "ferrox.yaml"
    path.write_text("backends:\n  order: [resident]\n" + (f"resident: {{{options}}}\n" if options else ""))
    return path


def ferrox(plugins: pathlib.Path, options: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(pathlib.Path(tmp), options)
        return subprocess.run([str(ferrox_bin()), "--config", str(cfg), "--plugin-dir", str(plugins), *args],
                              capture_output=True, text=True)


def tokens() -> list[int]:
    rng = np.random.default_rng(99)
    return [1] + [int(t) for t in rng.integers(10, 1000, size=20)]  # crosses gemma3's window of 8


def logits(plugins: pathlib.Path, model: pathlib.Path, resident: str, options: str = "",
           kv_type: str = "f32", n_vocab: int = 0) -> np.ndarray:
    toks = tokens()
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "logits.f32"
        # One prefill chunk: GEMM, multi-row attention, every row's logits
        # (run_reports... below covers one-token decode steps).
        r = ferrox(plugins, options, "logits", "-m", str(model), "--tokens", ",".join(map(str, toks)),
                   "--out", str(out), "-c", "64", "--kv-type", kv_type, "--resident", resident)
        assert r.returncode == 0, r.stderr
        values = np.fromfile(out, dtype=np.float32)
        return values.reshape(len(toks), -1)


def nmse_rows(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    err = ((got.astype(np.float64) - want) ** 2).sum(axis=1)
    return err / np.maximum((want.astype(np.float64) ** 2).sum(axis=1), 1e-30)


def agrees(got: np.ndarray, want: np.ndarray) -> tuple[bool, str]:
    nmse = nmse_rows(got, want)
    same_argmax = bool((got.argmax(axis=1) == want.argmax(axis=1)).all())
    finite = bool(np.isfinite(got).all())
    ok = finite and same_argmax and float(nmse.max()) <= RESIDENT_NMSE_MAX
    return ok, f"worst NMSE {nmse.max():.3g}, argmax equal {same_argmax}, finite {finite}"


# Issue 13's shaped models: rope_freqs divisors (they matter from position ~16, inside the
# 21 tokens), llama's optional q/k/v biases, Gemma 3 27B's attention scale -- the resident
# pass must take the same angle tables, biases and scale as the host pass.
SHAPED = ["llama31", "llama-bias", "gemma3-27b", "qwen2-yarn"]


@pytest.mark.parametrize("arch", TINY_ARCHS + SHAPED)
def test_resident_logits_equal_host_logits(plugin_dir, arch):
    model = tiny_model(arch)
    host = logits(plugin_dir, model, "off")
    resident = logits(plugin_dir, model, "auto")
    ok, how = agrees(resident, host)
    print(f"tiny {arch}: resident vs host: {how}")
    assert ok, how


def test_soft_capped_attention_runs_resident_on_a_1_4_plugin(plugin_dir):
    """gemma2 caps its attention scores; ABI 1.4's descriptors carry the cap, so on a 1.4
    plugin the whole pass is resident and its logits equal the host pass's (prefill over both
    attention entries' shapes, then decode steps), and a plugin that claims 1.4 but drops the
    cap is caught by the same comparison."""
    model = tiny_model("gemma2")
    host = logits(plugin_dir, model, "off")
    ok, how = agrees(logits(plugin_dir, model, "auto"), host)
    print(f"tiny gemma2 resident (1.4) vs host: {how}")
    assert ok, how
    ok, how = agrees(logits(plugin_dir, model, "auto", options="fault: softcap"), host)
    print(f"tiny gemma2, cap dropped: {how}")
    assert not ok, f"a resident pass without the soft cap passed: {how}"
    args = ["run", "-m", str(model), "-p", "hello world", "-n", "6", "--json"]
    r = ferrox(plugin_dir, "", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["resident"] is True, doc
    host_run = ferrox(plugin_dir, "", *args, "--resident", "off")
    assert host_run.returncode == 0, host_run.stderr
    assert doc["tokens"] == json.loads(host_run.stdout)["tokens"]


def test_gpt_oss_runs_resident_on_a_1_5_plugin(plugin_dir):
    """gpt-oss needs ABI 1.5: attention sinks (through attention_cells) and the clamped
    SwiGLU. On a 1.5 plugin the whole pass is resident with logits equal to the host pass's;
    a plugin that claims 1.5 but drops the sinks is caught by the same comparison; a 1.4
    plugin keeps the model on the host, saying why, with the same tokens."""
    model = tiny_model("gpt-oss")
    host = logits(plugin_dir, model, "off")
    ok, how = agrees(logits(plugin_dir, model, "auto"), host)
    print(f"tiny gpt-oss resident (1.5) vs host: {how}")
    assert ok, how
    ok, how = agrees(logits(plugin_dir, model, "auto", options="fault: sinks"), host)
    print(f"tiny gpt-oss, sinks dropped: {how}")
    assert not ok, f"a resident pass without the sinks passed: {how}"
    args = ["run", "-m", str(model), "-p", "hello world", "-n", "6", "--json"]
    r = ferrox(plugin_dir, "", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["resident"] is True, doc
    ops = {(k["op"], k["role"]) for k in doc["kernels"]}
    assert ("SWIGLU_OAI", "ffn_glu") in ops and ("ADD", "expert_bias") in ops, ops
    old = ferrox(plugin_dir, 'abi: "1.4"', *args)
    assert old.returncode == 0, old.stderr
    old_doc = json.loads(old.stdout)
    # The first thing the 1.4 table lacks: the clamped SwiGLU's kernel (the sinks come next).
    assert old_doc["resident"] is False and "no SWIGLU_OAI kernel" in old_doc["residency"], old_doc
    assert old_doc["tokens"] == doc["tokens"]


def test_soft_capped_attention_on_a_1_3_plugin_decodes_on_the_host_and_says_why(plugin_dir):
    """A plugin built before 1.4 never reads the cap: the core must not hand it such attention.
    The model stays on the host with that reason, attention runs in the core by design, and
    the tokens equal the plain host run's. (The host-entry side, a 1.3 plugin's host attention
    refused for a capped call, is test_dispatch's.)"""
    model = tiny_model("gemma2")
    args = ["run", "-m", str(model), "-p", "hello world", "-n", "6", "--json"]
    r = ferrox(plugin_dir, 'abi: "1.3"', *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    why = "is ABI 1.3: its attention entries cannot be told a soft cap"
    assert doc["resident"] is False and why in doc["residency"], doc
    # In host memory this plugin has no host attention entry at all: the core's loop, by design.
    attention = [k for k in doc["kernels"] if k["op"] == "ATTENTION"]
    assert attention and all(k["outcome"] == "by-design" for k in attention), attention
    host = ferrox(plugin_dir, "", *args, "--resident", "off")
    assert host.returncode == 0, host.stderr
    assert doc["tokens"] == json.loads(host.stdout)["tokens"]


def test_partial_neox_rotary_decodes_on_the_host_and_says_why(plugin_dir):
    """The ABI's rope entry takes no n_rot, so NeoX pairs of a rotated prefix (i, i + n_rot/2)
    cannot be expressed; the probe must keep such a model off the resident path, not run
    it wrong."""
    model = tiny_model("gemma3-partial")
    for args in (["run", "-m", str(model), "-p", "hi", "-n", "2", "--json"], ["inspect", str(model), "--json"]):
        r = ferrox(plugin_dir, "", *args)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        resident = doc["resident"] if "resident" in doc else doc["residency"]["resident"]  # run / inspect
        assert resident is False, doc
        assert "rope entry cannot rotate 32 of 64 dims" in json.dumps(doc), json.dumps(doc)[:800]


@pytest.mark.parametrize("arch", ["gemma3", "qwen3moe", "olmo2", "smollm3"])
def test_resident_without_the_fused_norm_equals_host(plugin_dir, arch):
    """A backend without add_rms_norm: the core issues add and rms_norm instead."""
    model = tiny_model(arch)
    ok, how = agrees(logits(plugin_dir, model, "auto", options="fused_norm: off"),
                     logits(plugin_dir, model, "off"))
    print(f"tiny {arch}, no fused norm: {how}")
    assert ok, how
    r = ferrox(plugin_dir, "fused_norm: off", "run", "-m", str(model), "-p", "hi", "-n", "2", "--json")
    assert r.returncode == 0, r.stderr
    ops = {k["op"] for k in json.loads(r.stdout)["kernels"]}
    assert "ADD_RMS_NORM" not in ops and {"ADD", "RMS_NORM"} <= ops, ops


def test_resident_f16_cache_equals_host_f16_cache(plugin_dir):
    model = tiny_model("gemma3")
    ok, how = agrees(logits(plugin_dir, model, "auto", kv_type="f16"),
                     logits(plugin_dir, model, "off", kv_type="f16"))
    print(f"tiny gemma3, f16 KV: {how}")
    assert ok, how


def test_a_kv_kind_the_resident_backend_lacks_runs_in_host_memory_with_the_reason(plugin_dir):
    # The fixture (like the CUDA plugin) names no CONVERT or ATTENTION kernel for
    # q8_0: the probe keeps the pass in host memory and says why, never silently.
    model = tiny_model("gemma3")
    r = ferrox(plugin_dir, "", "inspect", str(model), "--kv-type", "q8_0", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert not doc["residency"]["resident"], doc["residency"]
    assert "Q8_0" in doc["residency"]["reason"] and "CONVERT" in doc["residency"]["reason"], doc["residency"]
    assert doc["kv_cache"]["block_bytes"] == 34 and doc["kv_cache"]["block_elements"] == 32
    r = ferrox(plugin_dir, "", "inspect", str(model), "--kv-type", "f16", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["residency"]["resident"], r.stderr
    # Asked for residency, the q8_0 cache decodes in host memory: the same logits as off.
    ok, how = agrees(logits(plugin_dir, model, "auto", kv_type="q8_0"),
                     logits(plugin_dir, model, "off", kv_type="q8_0"))
    assert ok, how


def test_mixed_kv_kinds_the_resident_backend_lacks_run_in_host_memory_by_design(plugin_dir):
    # The fixture is ABI 1.8 without attention_kinds: K and V of one kind only. A
    # mixed cache keeps the pass in host memory naming the pair, and the pair is
    # recorded by design (never handed to the fixture), the core's loop attending.
    args = ["run", "-m", str(tiny_model("gemma3")), "-p", "hello world", "-n", "6", "--json",
            "-ctk", "f16", "-ctv", "f32"]
    r = ferrox(plugin_dir, "", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["resident"] is False, doc["residency"]
    assert "no ATTENTION kernel for K F16 / V F32" in doc["residency"], doc["residency"]
    attention = [k for k in doc["kernels"] if k["op"] == "ATTENTION"]
    assert attention and all(k["outcome"] == "by-design" and "K and V of one kind only" in k["detail"]
                             for k in attention), attention
    off = ferrox(plugin_dir, "", *args, "--resident", "off")
    assert off.returncode == 0, off.stderr
    assert doc["tokens"] == json.loads(off.stdout)["tokens"]
    # inspect predicts the same, and prices each cache in its own kind.
    r = ferrox(plugin_dir, "", "inspect", str(tiny_model("gemma3")), "-ctk", "f16", "-ctv", "f32", "--json")
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert not seen["residency"]["resident"] and "K F16 / V F32" in seen["residency"]["reason"], seen
    cache = seen["kv_cache"]
    assert (cache["kind"], cache["value_kind"], cache["block_bytes"], cache["value_block_bytes"]) == \
        ("F16", "F32", 2, 4), cache


@pytest.mark.parametrize("arch", ["gemma3", "qwen3moe"])
def test_resident_decode_steps_match_host_and_report_every_op_as_a_hit(plugin_dir, arch):
    args = ["run", "-m", str(tiny_model(arch)), "-p", "hello world", "-n", "12", "--json"]
    r = ferrox(plugin_dir, "", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    host = ferrox(plugin_dir, "", *args, "--resident", "off")
    assert host.returncode == 0, host.stderr
    assert json.loads(host.stdout)["resident"] is False
    assert doc["tokens"] == json.loads(host.stdout)["tokens"]
    assert doc["resident"] is True, doc["residency"]
    ops = {(k["op"], k["role"]) for k in doc["kernels"]}
    assert all(k["outcome"] == "hit" and k["backend"] == "resident" for k in doc["kernels"]), doc["kernels"]
    for op in [("GET_ROWS", "token_embd"), ("RMS_NORM", "attn_norm"), ("ROPE", "rope"),
               ("ADD_RMS_NORM", "ffn_norm"), ("ADD_RMS_NORM", "attn_norm"),
               ("CONVERT", "kv_store"), ("ATTENTION", "attention"), ("ADD", "residual"),
               ("MATVEC", "output"), ("GEMM", "attn_q")]:
        assert op in ops, f"{op} not recorded: {sorted(ops)}"
    if arch == "gemma3":
        assert ("GEGLU", "ffn_glu") in ops and ("RMS_NORM", "post_ffw_norm") in ops
    else:
        assert ("SWIGLU", "ffn_glu") in ops and ("ADD", "moe_combine") in ops


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_in_any_resident_op_fails_the_comparison(plugin_dir, fault):
    """seed 004's lesson: a parity check must be shown to reject a wrong forward."""
    model = tiny_model("gemma3")
    host = logits(plugin_dir, model, "off")
    faulty = logits(plugin_dir, model, "auto", options=f"fault: {fault}")
    ok, how = agrees(faulty, host)
    print(f"fault {fault}: {how}")
    assert not ok, f"the comparison accepted a forward with a wrong {fault}: {how}"


def test_a_model_that_does_not_fit_the_device_is_refused_with_the_arithmetic(plugin_dir):
    r = ferrox(plugin_dir, "memory_total: 4000000", "run", "-m", str(tiny_model("llama")), "-p", "hi",
               "-n", "1")
    assert r.returncode != 0
    assert "free memory of the resident backend's resident host fixture" in r.stderr, r.stderr
    assert "KV cache" in r.stderr and "lower the context" in r.stderr, r.stderr


def test_inspect_predicts_the_resident_pass_before_loading(plugin_dir):
    model = tiny_model("gemma3")
    r = ferrox(plugin_dir, "", "inspect", str(model), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["residency"]["resident"] is True, doc["residency"]
    probed = {(k["op"], k["role"], k["outcome"]) for k in doc["kernels"]}
    assert ("ATTENTION", "attention", "hit") in probed and ("GEGLU", "ffn_glu", "hit") in probed, probed
    # A fault-free fixture that lacks nothing: the same prediction in text form.
    text = ferrox(plugin_dir, "", "inspect", str(model))
    assert "forward pass: resident on the resident backend" in text.stdout, text.stdout[-600:]


def test_backends_lists_the_resident_ops(plugin_dir):
    r = ferrox(plugin_dir, "", "backends", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    backend = next(b for b in doc["backends"] if b["name"] == "resident")
    assert backend["resident"]["supported"] is True
    assert backend["resident"]["ops"]["ROPE"]["F32"] == "resident.rope.f32"
    assert backend["resident"]["ops"]["ATTENTION"]["F16"] == "resident.attention.f16"
    assert "Q4_K" in backend["resident"]["get_rows_kinds"]
    assert backend["resident"]["many_sequences"] is True
    assert backend["resident"]["abi"] == doc["abi_version"]
    assert backend["resident"]["ops"]["ADD_RMS_NORM"]["F32"] == "resident.add_rms_norm.f32"
    text = ferrox(plugin_dir, "", "backends").stdout
    assert "resident decoding (ABI 1.2): yes" in text, text[-800:]
    assert "many sequences per context (ABI 1.3): yes" in text, text[-800:]
    old = ferrox(plugin_dir, 'abi: "1.2"', "backends").stdout
    assert "many sequences per context (ABI 1.3): no -- the plugin is ABI 1.2" in old, old[-800:]


@pytest.mark.parametrize("arch", ["gemma3", "qwen3moe", "olmo2", "smollm3", "gemma2", "gpt-oss", "gemma4-moe"])
@pytest.mark.parametrize("fused", ["on", "off"])
def test_the_probe_predicts_exactly_the_ops_a_resident_run_dispatches(plugin_dir, arch, fused):
    """The registry's promise: what `inspect` predicts before loading is what runs."""
    model = str(tiny_model(arch))
    options = f"fused_norm: {fused}"
    probe = ferrox(plugin_dir, options, "inspect", model, "--json")
    run = ferrox(plugin_dir, options, "run", "-m", model, "-p", "hello world", "-n", "3", "--json")
    assert probe.returncode == 0 and run.returncode == 0, probe.stderr + run.stderr
    key = lambda k: (k["op"], k["role"], k["kind"])
    predicted = {key(k) for k in json.loads(probe.stdout)["kernels"]}
    dispatched = {key(k) for k in json.loads(run.stdout)["kernels"]}
    assert dispatched <= predicted, f"ran but not predicted: {sorted(dispatched - predicted)}"
    # `run` needs the last position's logits only; the output GEMM (every
    # position's logits) is what `ferrox logits` runs.
    unused = predicted - dispatched
    assert unused <= {("GEMM", "output", k) for (_, _, k) in predicted}, f"predicted, never ran: {unused}"


def serve_completions(plugins: pathlib.Path, options: str, model: pathlib.Path, parallel: int,
                      prompts: list[str]) -> tuple[list[str], str]:
    """`ferrox serve` on the fixture: the prompts sent at once (greedy), their texts and the log."""
    import signal
    import socket
    import threading
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(pathlib.Path(tmp), options)
        log_path = pathlib.Path(tmp) / "serve.log"
        with open(log_path, "w+b") as log:
            proc = subprocess.Popen(
                [str(ferrox_bin()), "--config", str(cfg), "--plugin-dir", str(plugins), "serve", "-m",
                 str(model), "--port", str(port), "--parallel", str(parallel), "-c", "1024"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                base = f"http://127.0.0.1:{port}"
                end = time.time() + 60
                while True:
                    assert proc.poll() is None, log_path.read_text(errors="replace")
                    try:
                        with urllib.request.urlopen(base + "/ready", timeout=5) as r:
                            if r.status == 200:
                                break
                    except OSError:
                        pass
                    assert time.time() < end, "not ready:\n" + log_path.read_text(errors="replace")
                    time.sleep(0.1)
                texts: list[str] = [""] * len(prompts)

                def one(i: int) -> None:
                    body = json.dumps({"prompt": prompts[i], "max_tokens": 8, "temperature": 0}).encode()
                    req = urllib.request.Request(base + "/v1/completions", data=body, method="POST",
                                                 headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=120) as r:
                        texts[i] = json.loads(r.read())["choices"][0]["text"]

                threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
        return texts, log_path.read_text(errors="replace")


def test_serve_runs_several_sequences_resident_and_a_1_2_plugin_in_host_memory(plugin_dir):
    """ABI 1.3: `serve --parallel 2` stays resident; a 1.2 plugin falls back to host memory, saying why."""
    model = tiny_model("llama")
    prompts = ["hello world, this is", "the quick brown fox jumps over"]
    resident, log = serve_completions(plugin_dir, "", model, 2, prompts)
    assert "resident decoding on the resident backend" in log, log[-2000:]
    assert "ready: 2 sequences" in log, log[-2000:]
    host, old_log = serve_completions(plugin_dir, 'abi: "1.2"', model, 2, prompts)
    assert "resident decoding on the resident backend" not in old_log, old_log[-2000:]
    assert "plugin is ABI 1.2" in old_log and "attention_cells" in old_log, old_log[-2000:]
    assert all(resident) and resident == host, (resident, host)


def test_a_non_causal_encoder_embeds_resident_as_on_the_host(plugin_dir):
    """tiny-gemma-embedding attends both ways (a symmetric window on layer 0): resident on a
    1.3+ plugin, each row's span of attention_cells is cut from that view, and the vectors of
    inputs sharing decodes equal the host pass's (which takes ABI 1.7's lookahead; a span cut
    causally would differ). The 1.2 entry cannot be told it: such a plugin keeps the model
    in host memory and says why."""
    model = tiny_model("gemma-embedding")
    texts = ["river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper", "hello there", "a"]

    def vectors(resident: str) -> np.ndarray:
        args = ["embed", "-m", str(model), "--json", "--resident", resident]
        for t in texts:
            args += ["-p", t]
        r = ferrox(plugin_dir, "", *args)
        assert r.returncode == 0, r.stderr
        return np.array(json.loads(r.stdout))

    resident, host = vectors("auto"), vectors("off")
    diff = float(np.abs(resident - host).max())
    print(f"tiny gemma-embedding: resident vs host: max |diff| {diff:.3g}")
    assert diff <= 1e-6
    doc = json.loads(ferrox(plugin_dir, 'abi: "1.2"', "inspect", str(model), "--json").stdout)
    assert doc["residency"]["resident"] is False, doc["residency"]
    assert "non-causal attention reaches a resident backend only through its attention_cells" \
        in doc["residency"]["reason"], doc["residency"]
    doc = json.loads(ferrox(plugin_dir, "", "inspect", str(model), "--json").stdout)
    assert doc["residency"]["resident"] is True, doc["residency"]
