"""Files ferrox must not run, and tensors it must not drop (issue 13, points 1 and 6).

Every file is written by the independent `gguf` package, with the metadata
llama.cpp's own tools put there: convert_lora_to_gguf.py marks a LoRA adapter
`general.type = adapter` (architecture: the base model's); its mmproj
converter writes architecture `clip` with `general.type = mmproj` (older
projectors carry only the architecture); llama-imatrix writes
`general.type = imatrix` and no architecture; an embedding or reranking model
is a decoder architecture with a nonzero `<arch>.pooling_type` (Qwen3-Embedding:
`qwen3.pooling_type = 3`, last) or an encoder's without a row
(`jina-bert-v2.pooling_type`). Each must
be refused by `ferrox run` and `ferrox logits` with a message that names the
file and the key, says what the file is and that ferrox does not run it --
not "tokenizer.ggml.model is missing", which is what an adapter or projector
(no tokenizer) got before the check moved ahead of the tokenizer.

Then the tensor rule: a tensor the decoder does not use is refused naming the
tensor and the file; an optional one the decoder uses (llama's
`rope_freqs.weight`) is bound and changes the logits.
"""
from __future__ import annotations

import os
import pathlib
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)

N_EMBD, N_HEAD, N_FF, N_LAYER = 64, 2, 128, 2
HEAD_DIM = N_EMBD // N_HEAD


def ferrox(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    cmd = [FERROX, *args]
    if os.environ.get("FERROX_PLUGIN_DIR"):
        cmd[1:1] = ["--plugin-dir", os.environ["FERROX_PLUGIN_DIR"]]
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, env=env)


def finish(w) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def add_tokenizer(w) -> int:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581hello", "\u2581world"]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types([2, 3, 3] + [6] * 256 + [1, 1])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    return len(tokens)


def write_decoder(path: pathlib.Path, arch: str = "llama", *, keys: dict | None = None,
                  tensors: dict | None = None) -> pathlib.Path:
    """A tiny random decoder (llama's tensors; qwen3's q/k norms when arch is qwen3) plus
    `keys` ({name: (value, GGUFValueType)}) and extra `tensors` ({name: array})."""
    rng = np.random.default_rng(13)
    w = gguf.GGUFWriter(str(path), arch)
    n_vocab = add_tokenizer(w)
    w.add_context_length(512)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_feed_forward_length(N_FF)
    for key, (value, vtype) in (keys or {}).items():
        w.add_key_value(key, value, vtype)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(n_vocab, N_EMBD))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("output.weight", mat(n_vocab, N_EMBD))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + name + ".weight", mat(N_EMBD, N_EMBD))
        if arch == "qwen3":
            w.add_tensor(p + "attn_q_norm.weight", norm(HEAD_DIM))
            w.add_tensor(p + "attn_k_norm.weight", norm(HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF))
    for name, data in (tensors or {}).items():
        w.add_tensor(name, data)
    finish(w)
    return path


def write_lora_adapter(path: pathlib.Path) -> pathlib.Path:
    """As convert_lora_to_gguf.py writes one: the base architecture, no tokenizer, lora_a/b pairs."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 16.0)
    rng = np.random.default_rng(1)
    for il in range(N_LAYER):
        w.add_tensor(f"blk.{il}.attn_q.weight.lora_a", rng.standard_normal((8, N_EMBD)).astype(np.float32))
        w.add_tensor(f"blk.{il}.attn_q.weight.lora_b", rng.standard_normal((N_EMBD, 8)).astype(np.float32))
    finish(w)
    return path


def write_mmproj(path: pathlib.Path, with_type: bool = True) -> pathlib.Path:
    """As llama.cpp's mmproj converter writes one: architecture clip, vision keys, v.* tensors."""
    w = gguf.GGUFWriter(str(path), "clip")
    if with_type:
        w.add_type(gguf.GGUFType.MMPROJ)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", "gemma3")
    w.add_uint32("clip.vision.image_size", 32)
    w.add_uint32("clip.vision.patch_size", 8)
    w.add_uint32("clip.vision.embedding_length", N_EMBD)
    w.add_uint32("clip.vision.block_count", 1)
    rng = np.random.default_rng(2)
    w.add_tensor("v.patch_embd.weight", rng.standard_normal((N_EMBD, 3 * 8 * 8)).astype(np.float32))
    w.add_tensor("v.blk.0.attn_q.weight", rng.standard_normal((N_EMBD, N_EMBD)).astype(np.float32))
    w.add_tensor("mm.input_projection.weight", rng.standard_normal((N_EMBD, N_EMBD)).astype(np.float32))
    finish(w)
    return path


def write_imatrix(path: pathlib.Path) -> pathlib.Path:
    """As llama-imatrix writes one (gguf format): general.type imatrix, no architecture."""
    w = gguf.GGUFWriter(str(path), arch="")
    # GGUFWriter always writes general.architecture; llama-imatrix does not.
    w.kv_data[0].pop(gguf.Keys.General.ARCHITECTURE, None)
    w.add_type(gguf.GGUFType.IMATRIX)
    w.add_array("imatrix.datasets", ["wiki.train.raw"])
    w.add_uint32("imatrix.chunk_count", 10)
    w.add_uint32("imatrix.chunk_size", 512)
    w.add_tensor("blk.0.attn_q.weight.in_sum2", np.ones((1, N_EMBD), np.float32))
    w.add_tensor("blk.0.attn_q.weight.counts", np.full((1, 1), 5120.0, np.float32))
    finish(w)
    return path


U32 = gguf.GGUFValueType.UINT32


def non_chat_files(d: pathlib.Path):
    """(file, key the message names, what it must say the file is)."""
    return [
        (write_lora_adapter(d / "lora-adapter.gguf"), "general.type", "LoRA adapter"),
        (write_mmproj(d / "mmproj.gguf"), "general.type", "vision projector (mmproj)"),
        (write_mmproj(d / "mmproj-old.gguf", with_type=False), "general.architecture",
         "vision projector (mmproj)"),
        (write_imatrix(d / "imatrix.gguf"), "general.type", "importance matrix"),
        (write_decoder(d / "qwen3-embedding.gguf", "qwen3", keys={"qwen3.pooling_type": (3, U32)}),
         "qwen3.pooling_type", "is 3 (last): an embedding or reranking model"),
        (write_bert_like(d / "jina-bert-v2-embedding.gguf"), "jina-bert-v2.pooling_type",
         "is 2 (cls): an embedding or reranking model"),
    ]


def write_bert_like(path: pathlib.Path) -> pathlib.Path:
    """An encoder embedding model's marker: an architecture ferrox has no row for
    (jina-bert-v2) with its pooling type."""
    w = gguf.GGUFWriter(str(path), "jina-bert-v2")
    w.add_uint32("jina-bert-v2.pooling_type", 2)
    w.add_uint32("jina-bert-v2.embedding_length", N_EMBD)
    w.add_tensor("token_embd.weight", np.ones((4, N_EMBD), np.float32))
    finish(w)
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("non_chat")


def test_files_that_are_not_chat_models_are_refused_for_what_they_are(workdir):
    for path, key, says in non_chat_files(workdir):
        for cmd in (["run", "-m", str(path), "-p", "hello", "-n", "1", "-t", "1", "-c", "64"],
                    ["logits", "-m", str(path), "--tokens", "1,2", "--out", str(workdir / "x.f32"),
                     "-t", "1", "-c", "64"]):
            proc = ferrox(*cmd)
            err = proc.stderr
            assert proc.returncode != 0, (path.name, cmd[0], err)
            assert path.name in err and f"'{key}'" in err and says in err, (path.name, cmd[0], err)
            assert "does not run" in err or "does not apply" in err or "does not read" in err, err
            assert "tokenizer" not in err, (path.name, err)


def test_pooling_type_none_is_a_plain_decoder_and_runs(workdir):
    path = write_decoder(workdir / "qwen3-pooling-none.gguf", "qwen3", keys={"qwen3.pooling_type": (0, U32)})
    out = workdir / "none.f32"
    proc = ferrox("logits", "-m", str(path), "--tokens", "1,259,260", "--out", str(out), "-t", "1", "-c", "64")
    assert proc.returncode == 0, proc.stderr
    logits = np.fromfile(out, dtype=np.float32)
    assert logits.size == 3 * 261 and np.isfinite(logits).all() and logits.std() > 0


def test_an_unused_tensor_is_refused_naming_it_and_the_file(workdir):
    path = write_decoder(workdir / "extra-tensor.gguf",
                         tensors={"blk.1.ffn_gate_scale.weight": np.ones(N_EMBD, np.float32)})
    proc = ferrox("logits", "-m", str(path), "--tokens", "1,2", "--out", str(workdir / "x.f32"), "-t", "1")
    assert proc.returncode != 0
    assert "extra-tensor.gguf" in proc.stderr and "'blk.1.ffn_gate_scale.weight'" in proc.stderr, proc.stderr
    assert "not used by ferrox's 'llama' decoder" in proc.stderr, proc.stderr


def llama3_divisors(n_pairs: int) -> np.ndarray:
    """A step: the fast half of the pairs kept (1), the slow half divided by 8 -- the two
    ends of Llama 3.1's recipe. The recipe itself, against llama.cpp over 1033 positions,
    is test_model_parity.py's tiny-llama31 case."""
    return np.where(np.arange(n_pairs) < n_pairs // 2, 1.0, 8.0).astype(np.float32)


def logits_of(path: pathlib.Path, out: pathlib.Path, tokens: list[int]) -> np.ndarray:
    proc = ferrox("logits", "-m", str(path), "--tokens", ",".join(map(str, tokens)), "--out", str(out),
                  "-t", "1", "-c", "64")
    assert proc.returncode == 0, proc.stderr
    return np.fromfile(out, dtype=np.float32).reshape(len(tokens), -1)


def test_an_optional_tensor_the_decoder_uses_is_bound_and_changes_the_output(workdir):
    rng = np.random.default_rng(7)
    tokens = [1] + [int(t) for t in rng.integers(3, 261, size=40)]
    plain = logits_of(write_decoder(workdir / "plain.gguf"), workdir / "plain.f32", tokens)
    freqs = write_decoder(workdir / "rope-freqs.gguf",
                          tensors={"rope_freqs.weight": llama3_divisors(HEAD_DIM // 2)})
    scaled = logits_of(freqs, workdir / "freqs.f32", tokens)
    # Position 0 is not rotated at all, so it agrees; later positions must not.
    assert np.allclose(plain[0], scaled[0], rtol=1e-5, atol=1e-5)
    moved = np.abs(plain[1:] - scaled[1:]).max(axis=1)
    print(f"rope_freqs moves positions 1.. by {moved.min():.3g} .. {moved.max():.3g} (max |logit| change)")
    assert (moved > 1e-3).mean() > 0.9, moved
    # All ones is llama.cpp's identity, so the same logits as without the tensor.
    ones = write_decoder(workdir / "rope-freqs-ones.gguf",
                         tensors={"rope_freqs.weight": np.ones(HEAD_DIM // 2, np.float32)})
    assert np.array_equal(logits_of(ones, workdir / "ones.f32", tokens), plain)


def test_a_malformed_optional_tensor_is_refused_naming_it(workdir):
    for name, data, says in (
            ("short", np.ones(HEAD_DIM // 2 - 1, np.float32), "elements, expected"),
            ("zero", np.zeros(HEAD_DIM // 2, np.float32), "not a frequency divisor")):
        path = write_decoder(workdir / f"rope-freqs-{name}.gguf", tensors={"rope_freqs.weight": data})
        proc = ferrox("logits", "-m", str(path), "--tokens", "1,2", "--out", str(workdir / "x.f32"), "-t", "1")
        assert proc.returncode != 0
        assert path.name in proc.stderr and "'rope_freqs.weight'" in proc.stderr and says in proc.stderr, \
            proc.stderr
