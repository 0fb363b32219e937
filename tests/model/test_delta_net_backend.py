"""The gated delta rule on the CPU plugin's threads (ABI 1.10's delta_net entry)
gives the same bits as the core's own loop (the fallback, forced by
FERROX_CPU_DELTA_NET=off), at 1 and 2 threads, on the tiny Gated DeltaNet
models: teacher-forced logits over a prompt longer than one chunk of the
recurrence (kDeltaRows, 64), and greedy tokens over decode steps. The kernel
registry (`run --json`, `inspect --json`) says which of the two ran."""
import json
import os
import pathlib
import random
import subprocess

import pytest

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
MODELS = ["qwen35", "qwen35moe", "qwen3next"]
SEED = int(os.environ.get("FERROX_TEST_SEED", "3501"))
PLUGIN_KERNEL = "cpu.delta_net.f32"
HOST_LOOP = "core host delta rule (1 thread)"


def tiny(name):
    path = TINY / f"tiny-{name}.gguf"
    if not path.exists():
        pytest.skip(f"no {path} (tests/model/make_tiny_models.py)")
    return path


def ferrox(args, fallback, threads):
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_CPU_DELTA_NET")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    if fallback:
        env["FERROX_CPU_DELTA_NET"] = "off"
    threads_flag = ["-t", str(threads)] if threads else []
    r = subprocess.run([FERROX, "--log-level", "error", *args, *threads_flag],
                       capture_output=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def token_ids():
    """Random non-zero ids (the tiny vocabularies hold more than 256), from the printed seed."""
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    return [rng.randrange(1, 256) for _ in range(150)]


def delta_net_entries(doc):
    return [e for e in doc["kernels"] if e["op"] == "DELTA_NET"]


@pytest.mark.parametrize("name", MODELS)
def test_logits_equal_with_the_plugin_and_the_host_loop(name, tmp_path):
    path = tiny(name)
    ids = ",".join(str(t) for t in token_ids())
    logits = {}
    for threads in (1, 2):
        for fallback in (False, True):
            out = tmp_path / f"logits-{threads}-{fallback}.bin"
            ferrox(["logits", "-m", str(path), "--tokens", ids, "--out", str(out)], fallback,
                   threads)
            logits[threads, fallback] = out.read_bytes()
    reference = logits[1, True]  # the core's loop, one thread: today's path
    assert len(reference) > 0
    for key, data in logits.items():
        assert data == reference, f"{name}: logits of (threads, fallback) = {key} differ"


@pytest.mark.parametrize("name", MODELS)
def test_greedy_tokens_equal_and_the_registry_names_the_runner(name):
    path = tiny(name)
    runs = {}
    for threads in (1, 2):
        for fallback in (False, True):
            doc = json.loads(ferrox(["run", "-m", str(path), "-p", "one two three four five",
                                     "-n", "24", "--temp", "0", "--json"], fallback, threads))
            runs[threads, fallback] = doc
            entries = delta_net_entries(doc)
            assert entries, f"{name}: no DELTA_NET entry in the kernel registry"
            if fallback:
                assert all(e["outcome"] == "miss" and e["detail"] == HOST_LOOP for e in entries)
            else:
                assert all(e["outcome"] == "hit" and e["detail"] == PLUGIN_KERNEL
                           for e in entries)
    reference = runs[1, True]["tokens"]
    assert len(reference) == 24
    for key, doc in runs.items():
        assert doc["tokens"] == reference, f"{name}: tokens of (threads, fallback) = {key} differ"


@pytest.mark.parametrize("name", ["qwen35"])
def test_inspect_predicts_the_runner(name):
    path = tiny(name)
    for fallback, outcome, detail in ((False, "hit", PLUGIN_KERNEL), (True, "miss", HOST_LOOP)):
        doc = json.loads(ferrox(["inspect", "--json", str(path)], fallback, None))
        entries = delta_net_entries(doc)
        assert entries and all(e["outcome"] == outcome and e["detail"] == detail
                               for e in entries), entries
