"""`ferrox serve --models-dir` (issue 38 item 2): many models behind one server, through
the official `openai` client and plain HTTP.

Two tiny models (copied into a temporary folder: the shared tiny-models folder is never
written) answer by their ids; GET /v1/models shows each one's state; an unknown id, a
path or a file name is a 404 in OpenAI's error shape; keep_alive 0 unloads a model
after its request; a budget (--models-memory) that holds one model makes the second
model's request unload the first, and one that holds none answers 503 with the bytes;
a stream on one model keeps producing while another loads; a group-writable file or a
symlink out of the folder refuses the start, naming the file.

The configuration file's `server.models` list (issue 38 item 2): two models by their
aliases, each with its own context, parallel and KV kind, its own gauges on /metrics;
a bad list refuses the start naming the line; an entry's `model_draft` drafts for its
model alone (its plain answers, every draft of the model itself accepted). Issue 37:
`-ctk`/`-ctv` set the K and V kinds, each its own (q8_0 keys over f16 values).
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import FERROX, Server, free_port

openai = pytest.importorskip("openai")

TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
SOURCES = {"qwen": TINY / "tiny-qwen3.gguf", "llama": TINY / "tiny-llama.gguf"}


@pytest.fixture(scope="module")
def models_dir():
    for source in SOURCES.values():
        if not source.exists():
            pytest.skip(f"no {source} (tests/model/make_tiny_models.py makes it)")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ferrox-models-"))
    os.chmod(folder, 0o700)
    for name, source in SOURCES.items():
        shutil.copyfile(source, folder / f"{name}.gguf")
        os.chmod(folder / f"{name}.gguf", 0o644)
    (folder / "notes.txt").write_text("not a model")  # only .gguf files are models
    yield folder
    shutil.rmtree(folder)


class ManyServer(Server):
    """conftest's Server, started with --models-dir (and/or a configuration file's
    server.models: `config`) instead of -m."""

    def __init__(self, folder: pathlib.Path | None, *args: str,
                 config: pathlib.Path | None = None):
        if not FERROX or not pathlib.Path(FERROX).exists():
            pytest.skip("FERROX_BIN is not set to the built ferrox")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"ferrox-serve-{self.port}.log"
        self.log = open(self.log_path, "w+b")
        self.proc = subprocess.Popen(
            [FERROX, *(["--config", str(config)] if config else []), "serve",
             *(["--models-dir", str(folder)] if folder else []), "--port", str(self.port),
             "-t", "2", "-c", "512", "--parallel", "2", *args],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=clean_env())
        self.wait_ready()


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH", "FERROX_API_KEY")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    return env


class many:
    def __init__(self, folder, *args, config=None):
        self.server = ManyServer(folder, *args, config=config)

    def __enter__(self):
        return self.server

    def __exit__(self, *exc):
        code = self.server.stop()
        assert code == 0, f"exit {code}:\n{self.server.text_log()}"


def states(server) -> dict[str, str]:
    status, raw = server.get("/v1/models")
    assert status == 200, raw
    body = json.loads(raw)
    assert body["object"] == "list"
    return {m["id"]: m["state"] for m in body["data"]}


def wait_state(server, model: str, state: str, timeout: float = 10) -> dict[str, str]:
    end = time.time() + timeout
    while (now := states(server))[model] != state and time.time() < end:
        time.sleep(0.05)
    return now


def ask(client, model: str, **kw) -> str:
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Name three colours."}],
        max_tokens=8, temperature=0, **kw)
    assert r.model == model
    assert r.usage.completion_tokens > 0
    return r.choices[0].message.content


def test_models_answer_by_id_and_show_their_state(models_dir):
    with many(models_dir, "--models-memory", "4GiB") as server:
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
        assert states(server) == {"llama": "unloaded", "qwen": "unloaded"}
        assert sorted(m.id for m in client.models.list().data) == ["llama", "qwen"]
        ask(client, "qwen")
        assert states(server) == {"llama": "unloaded", "qwen": "loaded"}
        ask(client, "llama")
        assert states(server) == {"llama": "loaded", "qwen": "loaded"}
        # Completions, and a tokenizer endpoint, pick their model the same way.
        c = client.completions.create(model="llama", prompt="one two", max_tokens=4)
        assert c.model == "llama" and c.usage.completion_tokens > 0
        status, body = server.post("/tokenize", {"model": "qwen", "content": "hello"})
        assert status == 200 and body["tokens"], body

        for wrong in ("nope", "qwen.gguf", "../qwen", str(models_dir / "qwen.gguf"),
                      str(SOURCES["llama"])):
            with pytest.raises(openai.NotFoundError) as caught:
                ask(client, wrong)
            error = caught.value.body
            assert error["param"] == "model", error
            assert "does not exist" in error["message"], error
            assert error["type"] == "invalid_request_error", error
        status, body = server.post("/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": "hi"}]})
        assert status == 400 and body["error"]["param"] == "model", body
        status, body = server.post("/v1/messages", {"model": "nope", "max_tokens": 4,
                                                    "messages": [{"role": "user", "content": "hi"}]})
        assert status == 404 and body["type"] == "error", body
        assert body["error"]["type"] == "not_found_error", body
        assert states(server) == {"llama": "loaded", "qwen": "loaded"}
        m = server.metrics()
        assert m['ferrox:model_requests_total{model="llama"}'] == 2, m
        assert m['ferrox:model_requests_total{model="qwen"}'] == 2, m  # a chat, /tokenize
        assert m['ferrox:model_generation_tokens_total{model="llama"}'] >= 2, m
        assert m['ferrox:model_prompt_tokens_total{model="qwen"}'] > 0, m
        assert m['ferrox:model_loaded{model="qwen"}'] == 1, m


def test_keep_alive_zero_unloads_after_the_request(models_dir):
    with many(models_dir, "--models-memory", "4GiB", "--keep-alive", "-1") as server:
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
        ask(client, "qwen")
        ask(client, "llama", extra_body={"keep_alive": 0})
        assert wait_state(server, "llama", "unloaded") == {"llama": "unloaded", "qwen": "loaded"}
        ask(client, "llama", extra_body={"keep_alive": "1s"})
        assert states(server)["llama"] == "loaded"
        assert wait_state(server, "llama", "unloaded", timeout=5)["llama"] == "unloaded"
        status, body = server.post("/v1/chat/completions",
                                   {"model": "qwen", "keep_alive": "5 minutes",
                                    "messages": [{"role": "user", "content": "hi"}]})
        assert status == 400 and body["error"]["param"] == "keep_alive", body
        assert states(server)["qwen"] == "loaded"  # --keep-alive -1: kept


def test_a_budget_for_one_model_unloads_the_other(models_dir):
    # Room for either file, never for one loaded model beside the other's file.
    budget = max(p.stat().st_size for p in SOURCES.values()) + (1 << 20)
    with many(models_dir, "--models-memory", str(budget)) as server:
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
        ask(client, "llama")
        assert states(server) == {"llama": "loaded", "qwen": "unloaded"}
        ask(client, "qwen")
        assert wait_state(server, "llama", "unloaded") == {"llama": "unloaded", "qwen": "loaded"}


def test_a_budget_for_no_model_answers_503_with_the_bytes(models_dir):
    with many(models_dir, "--models-memory", "1MiB") as server:
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            ask(client, "qwen")
        assert caught.value.status_code == 503
        message = caught.value.body["message"]
        size = (models_dir / "qwen.gguf").stat().st_size
        assert f"needs {size} bytes" in message, message
        assert "1048576 of the 1048576-byte budget" in message, message
        assert states(server) == {"llama": "unloaded", "qwen": "unloaded"}


def test_a_stream_goes_on_while_another_model_loads(models_dir):
    with many(models_dir, "--models-memory", "4GiB") as server:
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
        ask(client, "qwen")
        chunks: list[float] = []

        def stream():
            s = client.chat.completions.create(
                model="qwen", messages=[{"role": "user", "content": "Count to a thousand."}],
                max_tokens=200, temperature=0, stream=True)
            for _ in s:
                chunks.append(time.monotonic())

        t = threading.Thread(target=stream)
        t.start()
        while len(chunks) < 5 and t.is_alive():
            time.sleep(0.01)
        before = len(chunks)
        load_start = time.monotonic()
        ask(client, "llama")  # loads llama, then answers
        load_end = time.monotonic()
        t.join()
        log = server.text_log()
        assert "loading model 'llama'" in log and "model 'llama' loaded" in log, log
        during = [c for c in chunks if load_start < c < load_end]
        assert before >= 5
        assert chunks[-1] > load_end, "the stream ended before llama's load: make it longer"
        assert during, (f"no qwen chunk in the {load_end - load_start:.3f}s llama took to load "
                        "and answer")


def refused_start(folder: pathlib.Path) -> str:
    r = subprocess.run([FERROX, "serve", "--models-dir", str(folder), "--port", str(free_port())],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode != 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def test_an_untrusted_file_or_an_escaping_symlink_refuses_the_start(models_dir, tmp_path):
    if not FERROX or not pathlib.Path(FERROX).exists():
        pytest.skip("FERROX_BIN is not set to the built ferrox")
    folder = tmp_path / "models"
    folder.mkdir(mode=0o700)
    os.chmod(tmp_path, 0o700)
    shutil.copyfile(models_dir / "llama.gguf", folder / "llama.gguf")
    os.chmod(folder / "llama.gguf", 0o664)
    out = refused_start(folder)
    assert f"refused: {folder / 'llama.gguf'} is group-writable" in out, out

    os.chmod(folder / "llama.gguf", 0o644)
    outside = tmp_path / "outside.gguf"
    shutil.copyfile(models_dir / "qwen.gguf", outside)
    os.symlink(outside, folder / "qwen.gguf")
    out = refused_start(folder)
    assert f"the symlink {folder / 'qwen.gguf'} leads to {outside}, outside the folder" in out, out

    os.unlink(folder / "qwen.gguf")  # a symlink inside the folder is followed
    os.symlink(folder / "llama.gguf", folder / "llama2.gguf")
    os.chmod(folder, 0o770)
    out = refused_start(folder)
    assert "is group-writable" in out and str(folder) in out, out
    os.chmod(folder, 0o700)
    with many(folder) as server:
        assert states(server) == {"llama": "unloaded", "llama2": "unloaded"}

    r = subprocess.run([FERROX, "serve", "--models-dir", str(folder), "-m", str(folder / "llama.gguf")],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode != 0 and "not both" in r.stdout + r.stderr


def write_config(folder: pathlib.Path, text: str) -> pathlib.Path:
    path = folder / "ferrox.yaml"
    path.write_text(text)
    return path


def test_a_yaml_list_serves_models_by_alias_with_their_own_settings(models_dir, tmp_path):
    # qwen.gguf by a relative path (a file of models_dir) under two ids, llama.gguf by its
    # absolute path under one: each loads with its own context, parallel and KV kind (and
    # llama with its own backend order, here the one backend there is).
    config = write_config(tmp_path, f"""
server:
  models:
    - path: qwen.gguf
      alias: [chat, qwen-small]
      context: 256
      parallel: 1
      kv_type: f16
    - path: {models_dir / "llama.gguf"}
      alias: tiny-llama
      context: 384
      kv_type: q8_0
      backends: [cpu]
""")
    with many(models_dir, "--models-memory", "4GiB", config=config) as server:
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
        # The entries name both files, so neither is listed again under its file name.
        assert states(server) == {"chat": "unloaded", "qwen-small": "unloaded",
                                  "tiny-llama": "unloaded"}
        assert sorted(m.id for m in client.models.list().data) == [
            "chat", "qwen-small", "tiny-llama"]
        ask(client, "chat")
        assert states(server) == {"chat": "loaded", "qwen-small": "loaded",
                                  "tiny-llama": "unloaded"}
        ask(client, "qwen-small")  # the same model, not a second load
        ask(client, "tiny-llama")
        for wrong in ("qwen", "llama", "qwen.gguf"):
            with pytest.raises(openai.NotFoundError):
                ask(client, wrong)
        log = server.text_log()
        assert log.count("loading model 'chat'") == 1, log
        assert "model 'chat' loaded" in log and "1 sequences over 256 KV cells" in log, log
        assert "model 'tiny-llama' loaded" in log and "2 sequences over 384 KV cells" in log, log
        # Each model's gauges, labelled by its first id; the unlabelled ones sum them.
        m = server.metrics()
        for model in ("chat", "tiny-llama"):
            for gauge in ("num_requests_running", "num_requests_waiting"):
                assert m[f'ferrox:model_{gauge}{{model="{model}"}}'] == 0, m
            usage = m[f'ferrox:model_kv_cache_usage_perc{{model="{model}"}}']
            assert 0 < usage <= 1, m  # the finished prompts' cells stay for reuse
        assert m['ferrox:model_requests_total{model="chat"}'] == 2, m
        assert 'ferrox:model_requests_total{model="qwen-small"}' not in m, m
        assert m["ferrox:num_requests_running"] == 0, m
        assert 0 < m["ferrox:kv_cache_usage_perc"] <= 1, m
        # While a stream runs on one model, its running gauge says so and the other's does not.
        done = threading.Event()

        def stream():
            s = client.chat.completions.create(
                model="tiny-llama", messages=[{"role": "user", "content": "Count to a thousand."}],
                max_tokens=200, temperature=0, stream=True)
            for _ in s:
                if done.is_set():
                    break
            done.set()

        t = threading.Thread(target=stream)
        t.start()
        seen = None
        end = time.time() + 20
        while time.time() < end and not done.is_set():
            m = server.metrics()
            if m['ferrox:model_num_requests_running{model="tiny-llama"}'] == 1:
                seen = m
                break
            time.sleep(0.01)
        done.set()
        t.join()
        assert seen is not None, "never saw tiny-llama's running gauge at 1"
        assert seen['ferrox:model_num_requests_running{model="chat"}'] == 0, seen
        assert seen["ferrox:num_requests_running"] == 1, seen


def refused_with_config(config: pathlib.Path, *args: str) -> str:
    r = subprocess.run([FERROX, "--config", str(config), "serve", "--port", str(free_port()), *args],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode == 2, r.stdout + r.stderr
    return r.stdout + r.stderr


def test_a_bad_yaml_list_refuses_the_start_naming_the_line(models_dir, tmp_path):
    if not FERROX or not pathlib.Path(FERROX).exists():
        pytest.skip("FERROX_BIN is not set to the built ferrox")
    qwen = models_dir / "qwen.gguf"
    config = write_config(tmp_path, f"server:\n  models:\n    - path: {qwen}\n      contxt: 64\n")
    out = refused_with_config(config)
    assert f"{config}:4:7: unknown key 'contxt' in server.models[0]; did you mean 'context'?" in out, out
    # One id, two models: both entries named with their lines.
    config = write_config(tmp_path, f"""server:
  models:
    - path: {qwen}
      alias: a
    - path: {models_dir / "llama.gguf"}
      alias: [b, a]
""")
    out = refused_with_config(config)
    assert (f"{config}:5:7: server.models[1] answers to 'a', as server.models[0] ({config}:3) "
            "does") in out, out
    # An entry's id against a file of models_dir.
    config = write_config(tmp_path, f"server:\n  models:\n    - path: {qwen}\n      alias: llama\n")
    out = refused_with_config(config, "--models-dir", str(models_dir))
    assert (f"the file llama.gguf of models_dir answers to 'llama', as server.models[0] "
            f"({config}:3) does") in out, out
    # -m and a list exclude each other.
    config = write_config(tmp_path, f"server:\n  models:\n    - path: {qwen}\n")
    out = refused_with_config(config, "-m", str(qwen))
    assert "not both" in out, out


def test_a_yaml_entry_names_its_draft_model(models_dir, tmp_path):
    # tiny-llama drafting for itself (every greedy guess right) under one id,
    # tiny-qwen3 without a draft under another; a request's speculative.n_max
    # 0 on the first is its plain answer.
    config = write_config(tmp_path, f"""
server:
  models:
    - path: llama.gguf
      alias: drafted
      model_draft: llama.gguf
      parallel: 4
    - path: qwen.gguf
      alias: plain
""")
    with many(models_dir, "--models-memory", "4GiB", config=config) as server:
        def chat(model, n_max, prompt):
            status, body = server.post("/v1/chat/completions", {
                "model": model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 24, "temperature": 0, "speculative": {"n_max": n_max}})
            assert status == 200, body
            return body

        prompts = [f"Count the {w} in the garden." for w in ("birds", "stones", "trees", "bees")]
        plain = [chat("drafted", 0, p)["choices"][0]["message"]["content"] for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda p: chat("drafted", 2, p), prompts))
        assert [a["choices"][0]["message"]["content"] for a in answers] == plain
        for a in answers:
            details = a["usage"]["completion_tokens_details"]
            assert details["accepted_prediction_tokens"] > 0, a["usage"]
            assert details["rejected_prediction_tokens"] == 0, a["usage"]
        # The entry without one: no draft model, n-gram lookup (a random
        # model seldom repeats itself) -- and it loaded no draft.
        chat("plain", 2, prompts[0])
        log = server.text_log()
        assert "loading model 'drafted''s draft model" in log, log
        assert "loading model 'plain''s draft model" not in log, log
        m = server.metrics()
        assert m["ferrox:spec_decode_num_accepted_tokens_total"] > 0, m
    # The server-wide --model-draft is one model's: refused with many.
    out = refused_with_config(config, "--model-draft", str(models_dir / "llama.gguf"))
    assert "a server.models entry names its own model_draft" in out, out


def test_ctk_and_ctv_set_the_k_and_v_kinds_each(models_dir):
    if not FERROX or not pathlib.Path(FERROX).exists():
        pytest.skip("FERROX_BIN is not set to the built ferrox")
    r = subprocess.run([FERROX, "serve", "--help"], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    assert "--cache-type-k" in r.stdout and "--cache-type-v" in r.stdout, r.stdout
    # A kind outside the list is refused naming the flag.
    r = subprocess.run([FERROX, "serve", "--models-dir", str(models_dir), "--port",
                        str(free_port()), "-ctk", "q8_0", "-ctv", "q5_1"],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode == 2 and "--cache-type-v" in r.stdout + r.stderr, r.stdout + r.stderr
    # Each cache takes its own kind, as the capacity plan counts it (per 32 elements:
    # q8_0 34 bytes, f16 64, f32 128); K and V are equally wide on tiny qwen, so
    # q8_0 keys over f16 values hold (34 + 64) / (2 x 128) of the f32 cache. The
    # server answers with them.
    kv_mib = {}
    for k, v in (("f32", "f32"), ("q8_0", "f16")):
        with many(models_dir, "--models-memory", "4GiB", "-ctk", k, "-ctv", v) as server:
            client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
            ask(client, "qwen")  # it answers (completion tokens > 0)
            found = re.search(r"model 'qwen' loaded: weights [0-9.]+ MiB \+ KV cache ([0-9.]+) MiB",
                              server.text_log())
            assert found, server.text_log()
            kv_mib[(k, v)] = float(found.group(1))
    f32 = kv_mib[("f32", "f32")]
    assert f32 > 0, kv_mib
    assert kv_mib[("q8_0", "f16")] == pytest.approx(f32 * (34 + 64) / 256, abs=0.06), kv_mib
