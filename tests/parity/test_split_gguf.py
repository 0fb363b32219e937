"""Split GGUF models: ferrox on a model split into shards against the same model
in one file, and each way a shard set can be broken.

The model is a small random llama with a hand-made SentencePiece vocabulary,
written twice by the `gguf` package from the same arrays: once whole, once with
split_max_tensors, which writes shards the way llama.cpp's gguf-split does
(name-0000K-of-0000N.gguf; split.no, split.count, split.tensors.count; the
metadata in the first shard only). llama.cpp (llama-cpp-python) must load the
shards too, and ferrox's logits on the split model must be bit-for-bit the
unsplit model's. Broken sets are made from copies with one field spliced.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import struct
import subprocess
import tempfile

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as Q

import llama_ref

N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF, N_LAYER = 64, 4, 2, 16, 128, 2
TENSORS_PER_SHARD = 8  # 21 tensors -> 3 shards
SHARDS = 3
TOKENS = [1, 259, 260, 261, 100, 120, 262, 5, 263, 40, 264, 270, 259, 266]


def vocab() -> tuple[list[str], list[float], list[int]]:
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)
    for i, piece in enumerate(["\u2581", "\u2581the", "\u2581a", "e", "t", "\u2581of", "s", "\u2581to",
                               "n", "\u2581and", "\u2581in", "d"]):
        tokens.append(piece)
        scores.append(-float(i))
        types.append(1)
    return tokens, scores, types


def weights(seed: int, n_layer: int, n_vocab: int) -> list[tuple[str, np.ndarray, Q | None]]:
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    q_dim, kv_dim = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    out = [("token_embd.weight", matrix(n_vocab, N_EMBD), Q.Q8_0), ("output_norm.weight", norm(N_EMBD), None),
           ("output.weight", matrix(n_vocab, N_EMBD), Q.Q8_0)]
    for il in range(n_layer):
        p = f"blk.{il}."
        out += [(p + "attn_norm.weight", norm(N_EMBD), None),
                (p + "attn_q.weight", matrix(q_dim, N_EMBD), Q.Q8_0),
                (p + "attn_k.weight", matrix(kv_dim, N_EMBD), Q.Q8_0),
                (p + "attn_v.weight", matrix(kv_dim, N_EMBD), Q.Q8_0),
                (p + "attn_output.weight", matrix(N_EMBD, q_dim), Q.Q8_0),
                (p + "ffn_norm.weight", norm(N_EMBD), None),
                (p + "ffn_gate.weight", matrix(N_FF, N_EMBD), Q.Q4_0),
                (p + "ffn_up.weight", matrix(N_FF, N_EMBD), Q.Q4_0),
                (p + "ffn_down.weight", matrix(N_EMBD, N_FF), Q.Q4_0)]
    return out


def write_model(path: pathlib.Path, *, seed: int = 7, n_layer: int = N_LAYER, split: int = 0,
                name: str = "tiny split llama", tokenizer_model: str = "llama",
                drop: tuple[str, ...] = ()) -> list[pathlib.Path]:
    """Writes the model (split into shards of `split` tensors when > 0, without the
    tensors named in `drop`); returns its files."""
    tokens, scores, types = vocab()
    w = gguf.GGUFWriter(str(path), "llama", split_max_tensors=split)
    w.add_name(name)
    w.add_tokenizer_model(tokenizer_model)
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_feed_forward_length(N_FF)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for tensor_name, data, qtype in weights(seed, n_layer, len(tokens)):
        if tensor_name in drop:
            continue
        if qtype is None:
            w.add_tensor(tensor_name, data)
        else:
            w.add_tensor(tensor_name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if not split:
        return [path]
    shards = sorted(path.parent.glob(f"{path.stem}-*-of-*.gguf"))
    return shards


def shard_name(stem: str, k: int, n: int = SHARDS) -> str:
    return f"{stem}-{k:05d}-of-{n:05d}.gguf"


# ---- splicing one metadata value ------------------------------------------------

SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
SCALAR_FORMAT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}


def value_offset(data: bytes, wanted: str) -> tuple[int, int]:
    """(offset of the value, GGUF type) of metadata key `wanted`."""
    (n_kv,) = struct.unpack_from("<Q", data, 16)
    pos = 24

    def skip(t: int, pos: int) -> int:
        if t in SCALAR_SIZE:
            return pos + SCALAR_SIZE[t]
        if t == 8:
            return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
        sub, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if sub in SCALAR_SIZE:
            return pos + SCALAR_SIZE[sub] * count
        for _ in range(count):
            pos = skip(sub, pos)
        return pos

    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + n].decode()
        (t,) = struct.unpack_from("<I", data, pos + 8 + n)
        if key == wanted:
            return pos + 12 + n, t
        pos = skip(t, pos + 12 + n)
    raise KeyError(wanted)


def set_integer(path: pathlib.Path, key: str, value: int) -> None:
    data = bytearray(path.read_bytes())
    at, t = value_offset(bytes(data), key)
    struct.pack_into(SCALAR_FORMAT[t], data, at, value)
    path.write_bytes(bytes(data))


# ---- fixtures --------------------------------------------------------------------

@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("split")
    (root / "whole").mkdir()
    (root / "split").mkdir()
    whole = write_model(root / "whole" / "tiny.gguf")[0]
    shards = write_model(root / "split" / "tiny.gguf", split=TENSORS_PER_SHARD)
    assert [s.name for s in shards] == [shard_name("tiny", k) for k in range(1, SHARDS + 1)]
    return whole, shards


def ferrox_bin() -> pathlib.Path:
    tool = llama_ref.find_tool("ferrox", "FERROX_BIN")
    if tool is None or not tool.exists():
        pytest.skip("the ferrox binary is not built (set FERROX_BIN)")
    return tool


def ferrox(*args: str) -> subprocess.CompletedProcess:
    cmd = [str(ferrox_bin())]
    if os.environ.get("FERROX_PLUGIN_DIR"):
        cmd += ["--plugin-dir", os.environ["FERROX_PLUGIN_DIR"]]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)


def logits(model: pathlib.Path) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "logits.f32"
        done = ferrox("logits", "-m", str(model), "--tokens", ",".join(map(str, TOKENS)), "--out", str(out),
                      "-t", "2", "-c", "64")
        assert done.returncode == 0, done.stderr
        return np.fromfile(out, dtype=np.float32)


def refused(model: pathlib.Path) -> str:
    """ferrox inspect's error for a broken set (it must fail, as bad input)."""
    done = ferrox("inspect", str(model))
    assert done.returncode != 0, f"{model} was accepted:\n{done.stdout}"
    return done.stderr


def broken_copy(shards: list[pathlib.Path], tmp_path: pathlib.Path) -> list[pathlib.Path]:
    for s in shards:
        shutil.copy(s, tmp_path / s.name)
    return [tmp_path / s.name for s in shards]


# ---- the split model works --------------------------------------------------------

def test_split_logits_are_bit_identical_to_the_unsplit_model(models):
    whole, shards = models
    want = logits(whole)
    got = logits(shards[0])
    assert want.size == len(TOKENS) * len(vocab()[0])
    assert np.isfinite(want).all() and np.abs(want).max() > 0
    assert got.tobytes() == want.tobytes()


def test_llama_cpp_loads_the_shards(models):
    llama_cpp = llama_ref.require_llama_cpp()
    whole, shards = models
    results = []
    for model in (whole, shards[0]):
        llm = llama_cpp.Llama(model_path=str(model), logits_all=True, n_ctx=64, n_threads=2, verbose=False,
                              type_k=0, type_v=0, flash_attn=False)  # f32 KV, as ferrox
        llm.eval(TOKENS)
        results.append(np.array(llm.scores[:len(TOKENS)], dtype=np.float32))
        del llm
    assert results[0].shape == (len(TOKENS), len(vocab()[0]))
    np.testing.assert_array_equal(results[0], results[1])
    # And ferrox agrees with llama.cpp on the split model (8-bit activations: close, not equal).
    ours = logits(shards[0]).reshape(results[1].shape)
    nmse = float(((ours - results[1]) ** 2).sum() / (results[1] ** 2).sum())
    print(f"SPLIT ferrox vs llama.cpp logits NMSE {nmse:.2e}")
    assert nmse < 1e-3


def test_inspect_lists_the_shards(models):
    _, shards = models
    done = ferrox("inspect", "--json", str(shards[0]))
    doc = json.loads(done.stdout)
    assert [pathlib.Path(s["file"]).name for s in doc["shards"]] == [s.name for s in shards]
    assert sum(s["tensors"] for s in doc["shards"]) == doc["tensor_count"] == 3 + 9 * N_LAYER
    assert [s["file_bytes"] for s in doc["shards"]] == [s.stat().st_size for s in shards]
    text = ferrox("inspect", str(shards[0])).stdout
    assert f"shards: {SHARDS} files" in text
    for s in shards:
        assert s.name in text


# ---- broken sets: each refused with the shard named -----------------------------------

def test_opening_a_later_shard_names_the_first(models):
    _, shards = models
    err = refused(shards[1])
    assert "shard 2 of 3" in err and shards[0].name in err


def test_a_missing_shard_is_named(models, tmp_path):
    copies = broken_copy(models[1], tmp_path)
    copies[2].unlink()
    err = refused(copies[0])
    assert copies[2].name in err and "missing" in err


def test_a_wrong_split_count_is_named(models, tmp_path):
    copies = broken_copy(models[1], tmp_path)
    set_integer(copies[2], "split.count", 4)
    err = refused(copies[0])
    assert copies[2].name in err and "split.count is 4" in err


def test_shards_out_of_order_are_named(models, tmp_path):
    copies = broken_copy(models[1], tmp_path)
    swap = tmp_path / "swap"
    copies[1].rename(swap)
    copies[2].rename(copies[1])
    swap.rename(copies[2])
    err = refused(copies[0])
    assert copies[1].name in err and "split.no is 2, expected 1" in err


def test_a_shard_of_another_model_is_named(models, tmp_path):
    copies = broken_copy(models[1], tmp_path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = write_model(other_dir / "tiny.gguf", seed=8, n_layer=3, split=11)  # 30 tensors, 3 shards
    assert len(other) == SHARDS
    shutil.copy(other[1], copies[1])
    err = refused(copies[0])
    assert copies[1].name in err and "another model" in err and "split.tensors.count" in err


def test_a_duplicated_tensor_is_named(models, tmp_path):
    copies = broken_copy(models[1], tmp_path)
    shutil.copy(copies[1], copies[2])
    set_integer(copies[2], "split.no", 2)
    err = refused(copies[0])
    assert copies[2].name in err and copies[1].name in err and "is also in" in err


def test_a_tensor_count_mismatch_is_named(models, tmp_path):
    copies = broken_copy(models[1], tmp_path)
    for c in copies:
        set_integer(c, "split.tensors.count", 3 + 9 * N_LAYER + 1)
    err = refused(copies[0])
    assert copies[0].name in err and "hold 21 tensors" in err


def test_a_first_shard_under_another_name_is_refused(models, tmp_path):
    renamed = tmp_path / "tiny.gguf"
    shutil.copy(models[1][0], renamed)
    err = refused(renamed)
    assert renamed.name in err and "-00001-of-00003.gguf" in err


def test_a_shard_naming_another_model_is_named(models, tmp_path):
    """A later shard that carries general.name must carry the first shard's."""
    copies = broken_copy(models[1], tmp_path)
    w = gguf.GGUFWriter(str(copies[1]), "llama")
    w.add_name("another model")
    w.add_uint16("split.no", 1)
    w.add_uint16("split.count", SHARDS)
    w.add_int32("split.tensors.count", 3 + 9 * N_LAYER)
    part = weights(7, N_LAYER, len(vocab()[0]))[TENSORS_PER_SHARD:2 * TENSORS_PER_SHARD]
    for tensor_name, data, qtype in part:
        if qtype is None:
            w.add_tensor(tensor_name, data)
        else:
            w.add_tensor(tensor_name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    err = refused(copies[0])
    assert copies[1].name in err and "general.name" in err and "another model" in err
