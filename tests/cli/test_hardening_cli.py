"""The `ferrox` executable against hostile or unlucky input (issue 15).

Every model here is written by the independent `gguf` package: a tiny llama
whose embeddings are all the same vector and whose layers barely perturb it,
so greedy decoding emits the token whose output row matches that vector --
a vocabulary piece made of terminal escape sequences. A file can thus try to
drive the terminal through generated text, metadata keys and values; each
output must escape it, text and JSON alike, and every refusal below must be a
message and an exit status, never a hang, a signal or std::bad_alloc.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)

ESC_PIECE = "\x1b]0;owned\x07\x1b[2J"  # retitle the window, clear the screen
# Same-length placeholders patched to invalid UTF-8 and control bytes after writing.
KEY_PLACEHOLDER = b"general.KEYPLACEHOLDER"
KEY_BYTES = b"general.K\x1b[31m\xff\xfeHOLDER"
VALUE_PLACEHOLDER = b"VALUEPLACEHOLDER"
VALUE_BYTES = b"V\xc0\xaf\x1b[1mC1\xc2\x9bxx\xed\xa0y"


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    e["XDG_CONFIG_HOME"] = "/nonexistent"
    e.update(extra)
    return e


def ferrox(*args: str, timeout: float = 60, stdout=subprocess.PIPE, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([FERROX, *args], stdout=stdout, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=timeout, env=env(), **kw)


def write_model(path: pathlib.Path, *, n_embd=64, n_layer=1, n_ff=128, n_ctx=512,
                eps=1e-6, rope_base=10000.0, extra_tokens=0, patch=True) -> pathlib.Path:
    rng = np.random.default_rng(15)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += ["\u2581hello", "\u2581world", ESC_PIECE]
    esc_id = len(tokens) - 1
    types = [2, 3, 3] + [6] * 256 + [1, 1, 1]
    n_vocab = len(tokens)
    tokens += [f"extra{i}" for i in range(extra_tokens)]  # more tokens than embedding rows
    types += [1] * extra_tokens
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("hardening test model")
    w.add_string(KEY_PLACEHOLDER.decode(), VALUE_PLACEHOLDER.decode())
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(rope_base)
    w.add_layer_norm_rms_eps(eps)
    w.add_feed_forward_length(n_ff)
    head = n_embd // 2

    def small(rows, cols):
        return (1e-3 * rng.standard_normal((rows, cols))).astype(np.float32)

    w.add_tensor("token_embd.weight", np.ones((n_vocab, n_embd), np.float32))
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    out = (0.01 * rng.standard_normal((n_vocab, n_embd))).astype(np.float32)
    out[esc_id] = 1.0  # the row that matches the (constant) final hidden state
    w.add_tensor("output.weight", out)
    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + name + ".weight", small(2 * head, n_embd))
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "ffn_gate.weight", small(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", small(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", small(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if patch:
        data = path.read_bytes()
        assert len(KEY_PLACEHOLDER) == len(KEY_BYTES) and len(VALUE_PLACEHOLDER) == len(VALUE_BYTES)
        data = data.replace(KEY_PLACEHOLDER, KEY_BYTES).replace(VALUE_PLACEHOLDER, VALUE_BYTES)
        path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("hardening")


@pytest.fixture(scope="module")
def model(workdir) -> pathlib.Path:
    return write_model(workdir / "evil.gguf")


@pytest.fixture(scope="module")
def slow_model(workdir) -> pathlib.Path:
    # ~10 M multiply-adds a token on one thread: thousands of tokens take
    # seconds, long enough to interrupt in the middle.
    return write_model(workdir / "slow.gguf", n_embd=512, n_layer=4, n_ff=1024, n_ctx=4096)


def assert_terminal_safe(raw: bytes) -> None:
    raw.decode("utf-8")  # valid UTF-8, or this raises
    for bad in (b"\x1b", b"\x07", b"\xc2\x9b"):
        assert bad not in raw, f"{bad!r} reached the terminal"


# ---- class 5: escaping -----------------------------------------------------

def test_inspect_text_escapes_keys_and_values(model):
    r = ferrox("inspect", str(model))
    assert r.returncode == 0, r.stderr
    assert_terminal_safe(r.stdout)
    text = r.stdout.decode()
    assert "general.K\\e[31m\\xff\\xfeHOLDER" in text
    assert "\\xc0\\xaf" in text and "\\u009b" in text


def test_inspect_json_survives_invalid_utf8(model):
    r = ferrox("inspect", "--json", str(model))
    assert r.returncode == 0, r.stderr
    assert_terminal_safe(r.stdout)
    doc = json.loads(r.stdout)
    value = doc["metadata"]["general.K\x1b[31m\\xff\\xfeHOLDER"]
    assert value.startswith("V\\xc0\\xaf\x1b[1mC1\x9b")


def test_run_streams_generated_escape_sequences_escaped(model):
    r = ferrox("run", "-m", str(model), "-p", "hello", "-n", "3", "--temp", "0")
    assert r.returncode == 0, r.stderr
    assert_terminal_safe(r.stdout)
    assert "\\e]0;owned\\x07\\e[2J" in r.stdout.decode()


def test_run_json_carries_the_text_exactly_and_stays_terminal_safe(model):
    r = ferrox("run", "-m", str(model), "-p", "hello", "-n", "3", "--temp", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert_terminal_safe(r.stdout)
    doc = json.loads(r.stdout)
    assert doc["text"] == ESC_PIECE * 3
    assert doc["model"] == str(model)


# ---- class 9: output never lost silently ---------------------------------------

@pytest.mark.parametrize("args", [["run", "-n", "2", "--temp", "0", "-p", "hi"],
                                  ["run", "-n", "2", "--temp", "0", "-p", "hi", "--json"],
                                  ["inspect"], ["inspect", "--json"]])
def test_a_full_stdout_is_reported_and_fails(model, args):
    cmd = args[:1] + (["-m", str(model)] if args[0] == "run" else [str(model)]) + args[1:]
    with open("/dev/full", "wb") as full:
        r = ferrox(*cmd, stdout=full)
    assert r.returncode == 1
    assert b"cannot write to standard output: No space left on device" in r.stderr


def test_a_closed_stdout_pipe_is_reported_not_a_silent_death(model):
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before ferrox starts: its first write is an EPIPE
    p = subprocess.Popen([FERROX, "inspect", str(model)], stdout=write_end,
                         stderr=subprocess.PIPE, env=env())
    os.close(write_end)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1
    assert b"cannot write to standard output" in err


def test_logits_to_a_full_device_fails_with_the_reason(model):
    r = ferrox("logits", "-m", str(model), "--tokens", "1,259,260", "--out", "/dev/full")
    assert r.returncode == 1
    assert b"No space left on device" in r.stderr


def test_logits_never_overwrites_its_own_model(model, workdir):
    before = model.read_bytes()
    link = workdir / "same-model.gguf"
    if not link.exists():
        link.symlink_to(model)
    for target in (model, link):
        r = ferrox("logits", "-m", str(model), "--tokens", "1,259", "--out", str(target))
        assert r.returncode == 1
        assert b"is the model file" in r.stderr
    assert model.read_bytes() == before


def test_logits_replace_their_file_whole_or_leave_it(model, workdir):
    out = workdir / "logits.bin"
    out.write_bytes(b"previous contents")
    r = ferrox("logits", "-m", str(model), "--tokens", "1,259,99999", "--out", str(out))
    # Token 99999 is past the vocabulary: refused before the file is touched (this
    # used to fail mid-way, exit 1; no other mid-way failure is reachable from here).
    assert r.returncode == 2
    assert out.read_bytes() == b"previous contents"
    assert not [p for p in workdir.iterdir() if p.name.startswith(".logits.bin.")]
    r = ferrox("logits", "-m", str(model), "--tokens", "1,259,260", "--out", str(out))
    assert r.returncode == 0, r.stderr
    logits = np.fromfile(out, dtype=np.float32)
    assert logits.size == 3 * 262 and np.isfinite(logits).all()


def start_and_interrupt(slow_model, *extra):
    p = subprocess.Popen([FERROX, "run", "-m", str(slow_model), "-p", "hello", "-n", "4000",
                          "--temp", "0", "-t", "1", *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env())
    # Wait until the model is loaded and decoding: stderr's "loaded" line comes first.
    deadline = time.monotonic() + 60
    seen = b""
    while b"loaded" not in seen and time.monotonic() < deadline:
        seen += p.stderr.readline()
    time.sleep(1.0)
    assert p.poll() is None, "generation ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, seen + err


def test_first_ctrl_c_stops_after_the_token_and_prints_the_summary(slow_model):
    code, out, err = start_and_interrupt(slow_model)
    assert code == 130
    assert b"interrupted: stopped after" in err
    assert b"prompt eval:" in err and b"kernels:" in err
    assert out.endswith(b"\n") and len(out) > 1


def test_first_ctrl_c_with_json_prints_the_document_so_far(slow_model):
    code, out, err = start_and_interrupt(slow_model, "--json")
    assert code == 130, err
    doc = json.loads(out)
    assert doc["interrupted"] is True
    assert 0 < doc["generated_tokens"] < 4000
    assert doc["text"] == ESC_PIECE * doc["generated_tokens"]


# ---- classes 6 and 7: bounded work ------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "folder", "empty", "huge"])
def test_prompt_files_that_are_not_text_are_refused_at_once(model, workdir, kind):
    path = workdir / f"prompt-{kind}"
    if not path.exists():
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        elif kind == "empty":
            path.write_bytes(b"")
        else:
            with open(path, "wb") as f:
                f.truncate(17 << 20)  # sparse: 17 MiB of nothing
    r = ferrox("run", "-m", str(model), "-f", str(path), timeout=20)
    assert r.returncode == 2
    expected = {"fifo": b"a FIFO", "folder": b"a folder", "empty": b"is empty",
                "huge": b"more than the 16777216 bytes"}[kind]
    assert expected in r.stderr


def test_a_fifo_as_model_or_config_does_not_block(workdir):
    fifo = workdir / "model.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    r = ferrox("inspect", str(fifo), timeout=20)
    assert r.returncode == 2 and b"not a regular file" in r.stderr
    r = ferrox("--config", str(fifo), "backends", timeout=20)
    assert r.returncode == 2 and b"not a regular file" in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--shape", "0x4096"], b"must each be 1 to"),
    (["--shape", "4096x-1"], b"expected ROWSxCOLS"),
    (["--shape", "99999999999999999999x2"], b"expected ROWSxCOLS"),
    (["--shape", "16000000x16000000"], b"exceeds this machine's"),
    (["--rotate-mib", "18446744073709551615"], b"rotate-mib"),
    (["--batch", "0"], b"batch size must be 1 to"),
])
def test_bench_sizes_are_checked_before_anything_is_allocated(args, message):
    r = ferrox("bench", "--kinds", "Q8_0", *args, timeout=20)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert b"bad_alloc" not in r.stderr


# ---- class 8: nonsense hyper-parameters and sampling flags ---------------------------

@pytest.mark.parametrize("variant,message", [
    ({"eps": 0.0}, b"layer_norm_rms_epsilon"),
    ({"eps": float("nan")}, b"layer_norm_rms_epsilon"),
    ({"rope_base": -1.0}, b"rope.freq_base"),
    ({"rope_base": float("inf")}, b"rope.freq_base"),
    ({"extra_tokens": 5}, b"would index past it"),
])
def test_nonsense_hyperparameters_are_refused_at_load_by_key(workdir, variant, message):
    name = "bad-" + "-".join(f"{k}{v}" for k, v in variant.items()) + ".gguf"
    path = write_model(workdir / name, patch=False, **variant)
    r = ferrox("run", "-m", str(path), "-p", "hi", "-n", "1")
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert b"prompt eval" not in r.stderr


@pytest.mark.parametrize("flag,value", [("--temp", "nan"), ("--temp", "-1"), ("--temp", "inf"),
                                        ("--top-p", "1.5"), ("--min-p", "-0.1"),
                                        ("--repeat-penalty", "0"), ("--repeat-penalty", "nan"),
                                        ("--seed", "-1"), ("-n", "-5")])
def test_sampling_flags_out_of_range_are_refused(model, flag, value):
    r = ferrox("run", "-m", str(model), "-p", "hi", flag, value)
    assert r.returncode == 2
    assert flag.encode() in r.stderr or value.encode() in r.stderr


# One declaration of the sampling flags serves run and chat: chat refuses what run refuses.
@pytest.mark.parametrize("flag,value", [("--temp", "nan"), ("--temp", "-1"), ("--top-p", "2"),
                                        ("--min-p", "-0.1"), ("--repeat-penalty", "0"),
                                        ("--seed", "-1"), ("--top-k", "-3"),
                                        ("--repeat-last-n", "-1"), ("-n", "-7")])
def test_chat_refuses_the_sampling_flags_run_refuses(model, flag, value):
    r = ferrox("chat", "-m", str(model), flag, value)
    assert r.returncode == 2, r.stderr
    assert flag.encode() in r.stderr or value.encode() in r.stderr


def test_chat_still_takes_minus_one_answer_tokens_and_in_range_sampling(model):
    r = ferrox("chat", "-m", str(model), "-n", "-1", "--temp", "0", "--top-p", "1",
               "--repeat-last-n", "8")
    assert r.returncode == 0, r.stderr


def test_an_out_of_vocabulary_token_id_is_a_usage_error(model, workdir):
    out = workdir / "oov.f32"
    r = ferrox("logits", "-m", str(model), "--tokens", "1,4000000", "--out", str(out))
    assert r.returncode == 2, r.stderr
    assert b"--tokens: 4000000 (item 2) is outside the vocabulary of" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("command", [["run", "-p", "hi", "-n", "1"], ["chat"],
                                     ["logits", "--tokens", "1", "--out", "/dev/null"]])
def test_threads_past_the_configurable_range_are_a_usage_error(model, command):
    r = ferrox(command[0], "-m", str(model), "-t", "2000", *command[1:])
    assert r.returncode == 2, r.stderr
    assert b"2000" in r.stderr and b"1024" in r.stderr


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def test_threads_past_the_usable_cores_are_capped_with_a_warning(model):
    r = ferrox("run", "-m", str(model), "-p", "hi", "-n", "1", "-t", "1024")
    assert r.returncode == 0, r.stderr
    want = (f"threads 1024 is more than the {usable_cores()} cores this process may use "
            f"(sched_getaffinity); using {usable_cores()}").encode()
    assert want in r.stderr


FIXTURES = os.environ.get("FERROX_FIXTURE_PLUGIN_DIR", "")


def plugin_folder(workdir: pathlib.Path, name: str) -> pathlib.Path:
    """A folder only this user can write, holding the fixture plugin `name`."""
    folder = workdir / f"plugins-{name}"
    folder.mkdir(mode=0o755, exist_ok=True)
    target = folder / f"libferrox_{name}.so"
    shutil.copyfile(pathlib.Path(FIXTURES) / target.name, target)
    target.chmod(0o755)
    return folder


@pytest.mark.skipif(not FIXTURES, reason="FERROX_FIXTURE_PLUGIN_DIR is not set")
def test_a_plugin_that_crashes_in_describe_leaves_a_line_naming_it(workdir):
    folder = plugin_folder(workdir, "crashdescribe")
    cfg = workdir / "crash.yaml"
    cfg.write_text("backends:\n  order: [crashdescribe]\n")
    r = ferrox("--config", str(cfg), "--plugin-dir", str(folder), "backends")
    # Killed by the signal (under AddressSanitizer its handler reports and exits 1).
    assert r.returncode != 0, r.stderr
    want = (f"ferrox: backend crashdescribe ({folder / 'libferrox_crashdescribe.so'}) died in "
            "describe(): signal 11")
    assert want.encode() in r.stderr, r.stderr


@pytest.mark.skipif(not FIXTURES, reason="FERROX_FIXTURE_PLUGIN_DIR is not set")
def test_a_plugin_without_a_note_is_refused_by_default_and_logged_when_allowed(workdir):
    folder = plugin_folder(workdir, "nonote")
    cfg = workdir / "nonote.yaml"
    cfg.write_text("backends:\n  order: [nonote]\n")
    r = ferrox("--config", str(cfg), "--plugin-dir", str(folder), "backends")
    assert b"no-note" in r.stdout + r.stderr
    assert b"plugins.allow_without_note: true" in r.stdout + r.stderr
    cfg.write_text("plugins:\n  allow_without_note: true\nbackends:\n  order: [nonote]\n")
    r = ferrox("--config", str(cfg), "--plugin-dir", str(folder), "backends")
    assert r.returncode == 0, r.stderr
    assert f"backend nonote: loading {folder / 'libferrox_nonote.so'} without a ferrox note".encode() \
        in r.stderr


def test_deep_yaml_is_refused_at_its_line_and_column_with_the_limit(workdir):
    cfg = workdir / "deep.yaml"
    cfg.write_text("backends:\n  order: " + "[" * 600 + "]" * 600 + "\n")
    r = ferrox("--config", str(cfg), "backends")
    assert r.returncode == 2
    assert f"{cfg}:2:72: YAML collections nested deeper than 64 levels".encode() in r.stderr


# ---- class 11: messages -------------------------------------------------------------

def test_an_unknown_subcommand_is_named():
    r = ferrox("--log-level", "warn", "frobnicate")
    assert r.returncode == 2
    assert b"unknown subcommand 'frobnicate'" in r.stderr and b"run" in r.stderr


def test_an_empty_plugin_dir_is_refused():
    r = ferrox("--plugin-dir", "", "backends")
    assert r.returncode == 2
    assert b"current directory" in r.stderr


def test_relative_plugin_path_entries_are_ignored_with_a_warning(workdir):
    r = subprocess.run([FERROX, "backends"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env(FERROX_PLUGIN_PATH="plugins:."), cwd=workdir, timeout=60)
    assert b"ignoring relative entry 'plugins'" in r.stderr
    assert b"ignoring relative entry '.'" in r.stderr


def test_a_missing_file_names_the_errno_text():
    r = ferrox("inspect", "/nonexistent/model.gguf")
    assert r.returncode == 2
    assert b"No such file or directory" in r.stderr


def test_optional_backends_none_ready_are_refused_at_load(model, workdir):
    cfg = workdir / "only-missing.yaml"
    cfg.write_text("backends:\n  order: [nosuch]\n")
    r = ferrox("--config", str(cfg), "run", "-m", str(model), "-p", "hi", "-n", "1")
    assert r.returncode == 1  # a run-time failure, as in logits and backends (cli/exit_status.h)
    assert b"no backend of backends.order [nosuch] is ready" in r.stderr
    assert b"nosuch is not-found" in r.stderr
    assert b"prompt eval" not in r.stderr
