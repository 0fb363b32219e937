"""Every front end opens the model through Engine::open (issue 33): the same
default context whichever command asks, and a batch derived from the context.

The models are written here by the independent `gguf` package: a small llama
with random weights whose training context is chosen per test. One trained
on 8192 positions tells min(4096, training) apart from the training context;
one trained on 256 is shorter than the server's batch of 512, which used to
keep `ferrox serve --parallel 1` (or `-c 256`) from starting at all.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.request

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)

SEED = int(os.environ.get("FERROX_TEST_SEED", "33"))
WORDS = ["\u2581hello", "\u2581world", "\u2581the", "\u2581cat", "\u2581sat", "\u2581on", "\u2581mat"]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_API_KEY")}
    e["XDG_CONFIG_HOME"] = "/nonexistent"
    return e


def ferrox(*args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([FERROX, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env())


def write_model(path: pathlib.Path, n_ctx: int, n_embd: int = 64, n_ff: int = 128) -> pathlib.Path:
    rng = np.random.default_rng(SEED)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + WORDS
    types = [2, 3, 3] + [6] * 256 + [1] * len(WORDS)
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * n_vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_feed_forward_length(n_ff)

    def weight(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    w.add_tensor("output_norm.weight", norm(n_embd))
    w.add_tensor("output.weight", weight(n_vocab, n_embd))
    w.add_tensor("blk.0.attn_norm.weight", norm(n_embd))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{name}.weight", weight(n_embd, n_embd))
    w.add_tensor("blk.0.ffn_norm.weight", norm(n_embd))
    w.add_tensor("blk.0.ffn_gate.weight", weight(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_up.weight", weight(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_down.weight", weight(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("engine_open")


@pytest.fixture(scope="module")
def long_trained(workdir) -> pathlib.Path:
    return write_model(workdir / "trained-8192.gguf", 8192)


@pytest.fixture(scope="module")
def short_trained(workdir) -> pathlib.Path:
    return write_model(workdir / "trained-256.gguf", 256)


class Serve:
    """`ferrox serve` on a free port (--port 0, read back from the log)."""

    def __init__(self, model: pathlib.Path, *args: str, log: pathlib.Path):
        self.log_path = log
        self.log = open(log, "w+b")
        self.proc = subprocess.Popen([FERROX, "serve", "-m", str(model), "--port", "0", "-t", "1", *args],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env())
        self.port = 0

    def text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60) -> str:
        end = time.time() + timeout
        while time.time() < end:
            text = self.text()
            if "serve: ready" in text:
                self.port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)", text).group(1))
                return text
            if self.proc.poll() is not None:
                raise AssertionError(f"ferrox serve exited {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise AssertionError("ferrox serve did not become ready:\n" + self.text())

    def complete(self, prompt: str, max_tokens: int) -> dict:
        body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200
            return json.loads(r.read())

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def serve_ready_line(model: pathlib.Path, workdir: pathlib.Path, *args: str) -> str:
    server = Serve(model, *args, log=workdir / f"serve-{'-'.join(args) or 'default'}.log")
    try:
        text = server.wait_ready()
    finally:
        assert server.stop() == 0, server.text()
    return re.search(r"serve: ready: .*", text).group(0)


def test_every_front_end_gets_the_same_default_context(long_trained, workdir):
    want = 4096  # min(4096, 8192): not the training context
    run = ferrox("run", "-m", str(long_trained), "-p", "hello world", "-n", "2", "--temp", "0", "-t", "1")
    assert run.returncode == 0, run.stderr
    assert re.search(rf"loaded .*: .* context {want};", run.stderr), run.stderr

    # More tokens than the default context: each command names the context it got.
    too_many = ",".join(["1"] + ["260"] * want)
    logits = ferrox("logits", "-m", str(long_trained), "--tokens", too_many,
                    "--out", str(workdir / "logits.bin"), "-t", "1")
    assert logits.returncode != 0
    assert f"{want + 1} tokens do not fit the context of {want}" in logits.stderr, logits.stderr

    chat = ferrox("chat", "-m", str(long_trained), "-t", "1", "--temp", "0",
                  stdin=" ".join(["hello"] * (want + 10)) + "\n")
    assert re.search(rf"no longer fits the context \({want}\)", chat.stderr), chat.stderr

    assert f"1 sequences over {want} KV cells, up to {want} positions" in \
        serve_ready_line(long_trained, workdir, "--parallel", "1")
    # serve's cells are shared: each sequence adds the same default. (One request
    # may reach min(cells, training) positions.)
    assert f"2 sequences over {2 * want} KV cells, up to {2 * want} positions" in \
        serve_ready_line(long_trained, workdir, "--parallel", "2")

    for out in (run.stderr, logits.stderr, chat.stderr):
        assert "exceeds the" not in out, out  # no training-context warning at the default


@pytest.mark.parametrize("args", [("--parallel", "1"), ("-c", "256"), ("-c", "100", "--parallel", "2")])
def test_serve_starts_when_the_context_is_shorter_than_its_batch(short_trained, workdir, args):
    """Before Engine::open the batch was 512 whatever the context: "n_batch 512
    exceeds n_ctx 256" and the server did not start."""
    server = Serve(short_trained, *args, log=workdir / f"serve-short-{'-'.join(args)}.log")
    try:
        server.wait_ready()
        answer = server.complete("hello world", 4)
        assert answer["usage"]["completion_tokens"] >= 1, answer
    finally:
        assert server.stop() == 0, server.text()
    assert "exceeds n_ctx" not in server.text()


def test_a_context_past_the_training_context_is_warned_once(short_trained):
    run = ferrox("run", "-m", str(short_trained), "-p", "hello", "-n", "1", "--temp", "0", "-c", "512",
                 "-t", "1")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("context 512 exceeds the 256 positions") == 1, run.stderr
