"""One exit-status rule for every command (cli/exit_status.h, README "Exit status").

A table of usage errors -- a flag's value malformed or out of range, a required
flag missing, two flags that exclude each other, a file a flag names that is
absent -- run against every command: each exits 2 and its message names the
flag. Then the other side of the rule: a required backend that does not load
is a run-time failure, exit 1, in every command that opens a model.
The model is the hardening suite's, written by the `gguf` package.
"""
from __future__ import annotations

import pytest

from test_hardening_cli import ferrox, write_model  # noqa: F401  (skips without FERROX_BIN)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("exit-status")
    model = write_model(d / "model.gguf")
    prompt = d / "prompt.txt"
    prompt.write_text("hello\n")
    # A backend the order lists and the configuration requires, which no plugin provides.
    missing_backend = d / "missing-backend.yaml"
    missing_backend.write_text("backends:\n  order: [nosuchnpu]\nnosuchnpu:\n  required: true\n")
    return {"M": str(model), "F": str(prompt), "O": str(d / "out.f32"), "D": str(d),
            "C": str(missing_backend)}


# (command line with {M} model, {F} prompt file, {O} output, {D} folder; text stderr must hold)
USAGE = [
    (["--config", "{D}/absent.yaml", "backends"], "--config"),
    (["--config", "{D}/absent.yaml", "run", "-m", "{M}", "-p", "hi"], "--config"),
    (["--log-level", "loud", "backends"], "--log-level"),
    (["--plugin-dir", "", "backends"], "--plugin-dir"),
    (["frobnicate"], "unknown subcommand 'frobnicate'"),
    (["run", "-p", "hi"], "--model"),
    (["run", "-m", "{M}"], "-p/--prompt"),
    (["run", "-m", "{M}", "-p", "hi", "-f", "{F}"], "--file"),
    (["run", "-m", "{M}", "-f", "{D}/absent.txt"], "--file"),
    (["run", "-m", "{M}", "-p", "hi", "--temp", "nan"], "--temp"),
    (["run", "-m", "{M}", "-p", "hi", "-n", "-5"], "--n-predict"),
    (["run", "-m", "{M}", "-p", "hi", "-t", "2000"], "--threads"),
    (["run", "-m", "{M}", "-p", "hi", "-c", "many"], "--ctx-size"),
    (["run", "-m", "{M}", "-p", "hi", "--kv-type", "f8"], "--kv-type"),
    (["run", "-m", "{M}", "-p", "hi", "--resident", "always"], "--resident"),
    (["run", "-m", "{M}", "-p", "hi", "--chat-template", "no-such-template"], "--chat-template"),
    (["run", "-m", "{M}", "-p", "hi", "--seed", "-1"], "--seed"),
    (["run", "-m", "{M}", "-p", "hi", "--stop", "s" * 2000], "--stop"),
    (["run", "-m", "{M}", "-p", "hi", "--chat", "--special"], "--special"),
    (["logits", "-m", "{M}", "--tokens", "1", "--special", "--out", "{O}"], "--special"),
    (["chat", "-m", "{M}", "--special"], "--special"),
    (["batched-bench", "-m", "{M}", "--special"], "--special"),
    (["bench", "--kinds", "Q8_0", "--seed", "-1"], "--seed"),
    (["logits", "-m", "{M}", "--out", "{O}"], "--tokens or --prompt"),
    (["logits", "-m", "{M}", "--tokens", "1,x", "--out", "{O}"], "--tokens"),
    (["logits", "-m", "{M}", "--tokens", "1", "-p", "hi", "--out", "{O}"], "--tokens"),
    (["logits", "-m", "{M}", "--tokens", "1,4000000", "--out", "{O}"], "--tokens"),
    (["logits", "-m", "{M}", "--tokens", "1"], "--out"),
    (["chat", "-m", "{M}", "--top-p", "2"], "--top-p"),
    (["chat", "-m", "{M}", "-t", "-3"], "--threads"),
    (["chat"], "--model"),
    (["inspect"], "model"),
    (["inspect", "{M}", "--kv-type", "q8"], "--kv-type"),
    (["bench", "--kinds", "Q9_Z"], "--kinds"),
    (["bench", "--kinds", "Q8_0", "--shape", "3x"], "--shape"),
    (["bench", "--kinds", "Q4_K", "--shape", "16x100"], "--shape"),
    (["bench", "--kinds", "Q8_0", "-t", "5000"], "--threads"),
    (["bench", "--kinds", "Q8_0", "--reps", "0"], "--reps"),
    (["bench", "--kinds", "Q8_0", "--batch", "0"], "--batch"),
    (["batched-bench", "-m", "{M}", "--npl", "0"], "--npl"),
    (["batched-bench", "-m", "{M}", "--reps", "1000"], "--reps"),
    (["batched-bench", "--npp", "8"], "--model"),
    (["serve", "-m", "{M}", "-t", "5000"], "--threads"),
    (["serve", "-m", "{M}", "--port", "70000"], "--port"),
    (["serve"], "give -m"),
    (["architectures", "mamba"], "mamba"),
    (["backends", "--jsn"], "--jsn"),
]


def fill(args, files):
    return [a.format(**files) for a in args]


@pytest.mark.parametrize("args,names", USAGE, ids=[" ".join(a)[:60] for a, _ in USAGE])
def test_a_usage_error_exits_2_naming_the_flag(files, args, names):
    r = ferrox(*fill(args, files), timeout=60)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2, (r.returncode, err)
    assert names in err, err


RUNTIME = [
    ["run", "-m", "{M}", "-p", "hi", "-n", "1"],
    ["logits", "-m", "{M}", "--tokens", "1", "--out", "{O}"],
    ["chat", "-m", "{M}"],
    ["batched-bench", "-m", "{M}", "--npp", "4", "--ntg", "2", "--npl", "1"],
    ["serve", "-m", "{M}", "--port", "0"],
]


@pytest.mark.parametrize("args", RUNTIME, ids=[a[0] for a in RUNTIME])
def test_a_required_backend_that_does_not_load_exits_1(files, args):
    r = ferrox("--config", files["C"], *fill(args, files), timeout=60)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 1, (r.returncode, err)
    assert "nosuchnpu" in err, err
