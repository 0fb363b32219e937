"""`ferrox batched-bench`'s memory report against the file itself (issue 11's RSS budget).

The report's figures are recomputed here from the `gguf` package's reading of the
model: the file size, the tensor bytes, and the KV cache of the cells the largest
row used (layers x cells x KV heads x (key + value head dims) x element bytes),
then the budget (file + KV) x 1.1 and whether the peak RSS (VmHWM) is within it.
The peak itself is held only to what /proc shows (at least every row's RSS): its
size is a benchmark figure, not a test.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

gguf = pytest.importorskip("gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import gguf_in_memory  # noqa: E402

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS") or pathlib.Path.home() / ".cache/ferrox/tiny-models")
MODELS = [TINY / f"tiny-{a}.gguf" for a in ("llama", "gemma3", "qwen3moe")]


def bench(model: pathlib.Path, kv_type: str) -> dict:
    cmd = [FERROX, "--log-level", "warn"]
    if os.environ.get("FERROX_PLUGIN_DIR"):
        cmd += ["--plugin-dir", os.environ["FERROX_PLUGIN_DIR"]]
    cmd += ["batched-bench", "-m", str(model), "--npp", "8", "--ntg", "4", "--npl", "1,3",
            "--kv-type", kv_type, "--json"]
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def kv_bytes_per_cell(model: pathlib.Path, element_bytes: int) -> int:
    reader = gguf_in_memory.read(model)
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")

    def key(name: str, default=None):
        field = reader.fields.get(f"{arch}.{name}")
        return default if field is None else int(field.parts[-1][0])

    n_head = key("attention.head_count")
    head_k = key("attention.key_length", key("embedding_length") // n_head)
    head_v = key("attention.value_length", head_k)
    return key("block_count") * key("attention.head_count_kv", n_head) * (head_k + head_v) * element_bytes


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("kv_type,element_bytes", [("f16", 2), ("f32", 4)])
def test_memory_report_matches_the_file(model: pathlib.Path, kv_type: str, element_bytes: int):
    if not model.exists():
        pytest.skip(f"{model} is absent (tests/model/make_tiny_models.py)")
    report = bench(model, kv_type)
    memory = report["memory"]
    reader = gguf_in_memory.read(model)
    cells = max(row["cells_used"] for row in report["rows"])
    assert cells == 3 * (8 + 4)  # the largest row: 3 sequences of 8 + 4 tokens
    assert memory["kv_cells"] == cells
    assert memory["model_file_bytes"] == model.stat().st_size
    assert memory["tensor_bytes"] == sum(int(t.n_bytes) for t in reader.tensors)
    assert memory["kv_bytes"] == cells * kv_bytes_per_cell(model, element_bytes)
    assert memory["budget_bytes"] == (memory["model_file_bytes"] + memory["kv_bytes"]) * 11 // 10
    peak = memory["peak_rss_bytes"]
    assert peak >= max(row["rss_kib"] for row in report["rows"]) * 1024
    assert memory["within_budget"] == (peak <= memory["budget_bytes"])
