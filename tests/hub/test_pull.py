"""`ferrox pull`, the model store and model references, against a loopback hub
(fake_hub.py: the hub's API and resolve answers on one origin, a 302 to a CDN
on another, Range, X-Linked-Etag). The files are real GGUFs the `gguf` package
writes with random tensors; digests are hashlib's.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import stat
import subprocess
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "cli"))
from fake_hub import FakeHub  # noqa: E402

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)

SEED = int(os.environ.get("FERROX_TEST_SEED", "38"))
TOKEN = "hf_secret_Zq81xT"


def gguf_bytes(tmp: pathlib.Path, seed: int, split: tuple[int, int, int] | None = None,
               tensors: int = 3) -> bytes:
    """A small GGUF with random float tensors; `split` is (no, count, total tensors)."""
    rng = np.random.default_rng(seed)
    path = tmp / f"w{seed}-{split}.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    if split:
        w.add_uint16("split.no", split[0])
        w.add_uint16("split.count", split[1])
        w.add_int32("split.tensors.count", split[2])
    for i in range(tensors):
        w.add_tensor(f"t{seed}.{i}", rng.standard_normal(4096 + 64 * i).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


@pytest.fixture
def hub(tmp_path):
    h = FakeHub()
    src = tmp_path / "src"
    src.mkdir()
    h.files = {  # name -> bytes, for the assertions
        "model-Q8_0.gguf": gguf_bytes(src, SEED),
        "model-Q4_K_M.gguf": gguf_bytes(src, SEED + 1),
        "mmproj-Q8_0.gguf": gguf_bytes(src, SEED + 2),
    }
    h.add("acme/tiny-GGUF", {**h.files, "README.md": b"# tiny\n"})
    h.add("acme/gated-GGUF", {"gated-Q8_0.gguf": h.files["model-Q8_0.gguf"]}, token=TOKEN)
    shards = {f"big-Q8_0-{k:05}-of-00003.gguf": gguf_bytes(src, SEED + 10 + k, (k - 1, 3, 6), 2)
              for k in (1, 2, 3)}
    h.add("acme/split-GGUF", shards)
    h.shards = shards
    yield h
    h.close()


@pytest.fixture
def store(tmp_path) -> pathlib.Path:
    return tmp_path / "home" / "models"  # created by the first pull


def ferrox(hub, store, *args, token: str | None = None, extra_env=None, timeout=120):
    env = {k: v for k, v in os.environ.items()
           if k not in ("FERROX_CONFIG", "HF_TOKEN", "FERROX_OFFLINE") and "proxy" not in k.lower()}
    env.update({"XDG_CONFIG_HOME": "/nonexistent", "FERROX_MODELS": str(store),
                "HF_ENDPOINT": hub.endpoint})
    if token:
        env["HF_TOKEN"] = token
    env.update(extra_env or {})
    return subprocess.run([FERROX, *args], capture_output=True, text=True, timeout=timeout, env=env)


def stored(store: pathlib.Path, repo: str, name: str) -> pathlib.Path:
    return store / repo / name


# ---- references and a whole download -------------------------------------

def test_a_quant_tag_pulls_the_matching_file_verified_and_reports_json(hub, store):
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:q8_0", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    data = hub.files["model-Q8_0.gguf"]
    path = stored(store, "acme/tiny-GGUF", "model-Q8_0.gguf")
    assert doc["model"] == str(path.resolve())
    assert [f["name"] for f in doc["files"]] == ["model-Q8_0.gguf"]  # not the mmproj file
    assert doc["files"][0]["sha256"] == hashlib.sha256(data).hexdigest()
    assert doc["files"][0]["downloaded"] == len(data)
    assert path.read_bytes() == data
    assert (path.parent / "model-Q8_0.gguf.sha256").read_text().split()[0] == hashlib.sha256(data).hexdigest()
    assert not (path.parent / "model-Q8_0.gguf.part").exists()
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    # the 302 was followed to the other origin, which served the bytes
    assert any("/resolve/main/model-Q8_0.gguf" in q.path for q in hub.hub_requests)
    assert [q.path.split("?")[0] for q in hub.cdn_requests] == [f"/blobs/{hashlib.sha256(data).hexdigest()}"]

    # A second pull finds it stored: nothing fetched but the listing.
    cdn_before = len(hub.cdn_requests)
    again = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["files"][0]["cached"] is True
    assert len(hub.cdn_requests) == cdn_before


def test_an_hf_url_names_one_file(hub, store):
    r = ferrox(hub, store, "pull", "hf://acme/tiny-GGUF/model-Q4_K_M.gguf", "-q")
    assert r.returncode == 0, r.stderr
    assert pathlib.Path(r.stdout.strip()).read_bytes() == hub.files["model-Q4_K_M.gguf"]


def test_an_ambiguous_or_absent_quant_is_named(hub, store):
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:IQ2_XXS")
    assert r.returncode == 2
    assert "IQ2_XXS" in r.stderr and "model-Q8_0.gguf" in r.stderr  # lists what there is
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q")  # Q8_0 and Q4_K_M both hold it
    assert r.returncode == 2 and "matches 2 models" in r.stderr


# ---- interrupted, corrupted, refused --------------------------------------

def test_an_interrupted_transfer_is_resumed_with_a_range_request(hub, store):
    data = hub.files["model-Q8_0.gguf"]
    cut = len(data) // 3
    hub.faults.append(("drop", cut))
    first = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0")
    assert first.returncode == 1, first.stderr
    assert "run the same pull again to resume" in first.stderr
    part = stored(store, "acme/tiny-GGUF", "model-Q8_0.gguf.part")
    assert part.stat().st_size == cut
    assert not stored(store, "acme/tiny-GGUF", "model-Q8_0.gguf").exists()

    second = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0", "--json")
    assert second.returncode == 0, second.stderr
    doc = json.loads(second.stdout)["files"][0]
    assert doc["resumed_from"] == cut and doc["downloaded"] == len(data) - cut
    assert hub.cdn_requests[-1].header("Range") == f"bytes={cut}-"
    assert hub.cdn_requests[0].header("Range") is None
    assert stored(store, "acme/tiny-GGUF", "model-Q8_0.gguf").read_bytes() == data
    assert not part.exists()


def test_a_corrupted_byte_is_refused_and_nothing_is_left(hub, store):
    data = hub.files["model-Q8_0.gguf"]
    at = len(data) // 2 + 7
    hub.faults.append(("corrupt", at))
    bad = bytearray(data)
    bad[at] ^= 0x5A
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0")
    assert r.returncode == 1
    assert "checksum mismatch" in r.stderr
    assert hashlib.sha256(data).hexdigest() in r.stderr  # expected
    assert hashlib.sha256(bytes(bad)).hexdigest() in r.stderr  # actual
    folder = store / "acme" / "tiny-GGUF"
    assert list(folder.iterdir()) == []


def test_a_hub_whose_digest_lies_is_refused(hub, store):
    hub.published_sha[("acme/tiny-GGUF", "model-Q8_0.gguf")] = "ab" * 32
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0")
    assert r.returncode == 1 and "ab" * 32 in r.stderr
    assert not stored(store, "acme/tiny-GGUF", "model-Q8_0.gguf").exists()


def test_404_and_401_are_reported_by_name_with_exit_2(hub, store):
    r = ferrox(hub, store, "pull", "acme/nothing-GGUF:Q8_0")
    assert r.returncode == 2 and "404 Not Found" in r.stderr, r.stderr
    r = ferrox(hub, store, "pull", "hf://acme/tiny-GGUF/absent-Q8_0.gguf")
    assert r.returncode == 2 and "has no file absent-Q8_0.gguf" in r.stderr, r.stderr
    r = ferrox(hub, store, "pull", "acme/gated-GGUF:Q8_0")
    assert r.returncode == 2 and "401 Unauthorized" in r.stderr, r.stderr
    r = ferrox(hub, store, "pull", "acme/gated-GGUF:Q8_0", token="hf_wrong")
    assert r.returncode == 2 and "401 Unauthorized" in r.stderr, r.stderr


def test_the_token_goes_to_the_hub_and_not_to_the_redirect_target(hub, store):
    r = ferrox(hub, store, "--log-level", "debug", "pull", "acme/gated-GGUF:Q8_0", token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert hub.hub_requests and all(q.header("Authorization") == f"Bearer {TOKEN}" for q in hub.hub_requests)
    assert hub.cdn_requests and all(q.header("Authorization") is None for q in hub.cdn_requests)
    assert TOKEN not in r.stderr and TOKEN not in r.stdout
    assert "X-Amz-Signature" not in r.stderr  # the CDN's signed query is not logged either


def test_a_token_is_not_sent_in_clear_text_off_this_host(hub, store):
    # Refused before any connection: nothing listens at that name, and nothing needs to.
    r = ferrox(hub, store, "pull", "acme/gated-GGUF:Q8_0", token=TOKEN,
               extra_env={"HF_ENDPOINT": "http://hub.example.invalid:8080"})
    assert r.returncode != 0 and "refused to send HF_TOKEN" in r.stderr and "https" in r.stderr, r.stderr
    assert TOKEN not in r.stderr and not hub.hub_requests


@pytest.mark.parametrize("hostile", ["../x-Q8_0.gguf", "/tmp/abs-Q8_0.gguf", "a/../../x-Q8_0.gguf",
                                     "esc\x1b[31m-Q8_0.gguf", "sub/.hidden-Q8_0.gguf"])
def test_hostile_file_names_from_the_hub_are_refused(hub, store, tmp_path, hostile):
    hub.add("acme/evil-GGUF", {hostile: hub.files["model-Q8_0.gguf"]})
    r = ferrox(hub, store, "pull", "acme/evil-GGUF:Q8_0")
    assert r.returncode == 1, r.stderr
    assert "refused the file name" in r.stderr
    assert "\x1b" not in r.stderr  # escaped when named
    assert hub.cdn_requests == [] and not any("/resolve/" in q.path for q in hub.hub_requests)
    assert not (tmp_path / "home" / "x-Q8_0.gguf").exists() and not pathlib.Path("/tmp/abs-Q8_0.gguf").exists()


def test_hostile_references_are_usage_errors(hub, store):
    for ref in ("hf://acme/tiny-GGUF/../x.gguf", "hf://acme/tiny-GGUF//etc/x.gguf", "../acme:Q8_0",
                "acme/tiny-GGUF:Q8_0/x"):
        r = ferrox(hub, store, "pull", ref)
        assert r.returncode == 2, (ref, r.stderr)
    assert hub.requests() == 0


def test_a_symlink_in_the_store_is_refused_not_followed(hub, store, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (store / "acme").mkdir(parents=True, mode=0o700)
    os.chmod(store, 0o700)
    os.chmod(store.parent, 0o700)
    (store / "acme" / "tiny-GGUF").symlink_to(target)
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0")
    assert r.returncode == 2 and "symlink" in r.stderr, r.stderr
    assert list(target.iterdir()) == []


def test_a_group_writable_store_is_refused(hub, store):
    store.mkdir(parents=True)
    os.chmod(store, 0o770)
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0")
    assert r.returncode == 2 and "group-writable" in r.stderr and str(store) in r.stderr, r.stderr
    assert hub.requests() == 0


# ---- offline, split sets, the store, run -----------------------------------

def test_offline_never_touches_the_network(hub, store):
    for how in (["--offline"], []):
        r = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0", *how,
                   extra_env=None if how else {"FERROX_OFFLINE": "1"})
        assert r.returncode == 2 and "offline" in r.stderr and "not in the model store" in r.stderr
    r = ferrox(hub, store, "run", "-m", "acme/tiny-GGUF:Q8_0", "--pull", "--offline", "-p", "x")
    assert r.returncode == 2
    assert hub.requests() == 0
    assert ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0").returncode == 0
    before = hub.requests()
    r = ferrox(hub, store, "pull", "acme/tiny-GGUF:Q8_0", "--offline", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"][0]["cached"] is True
    assert hub.requests() == before


def test_a_split_model_is_pulled_as_a_set(hub, store):
    r = ferrox(hub, store, "pull", "hf://acme/split-GGUF/big-Q8_0-00002-of-00003.gguf", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [f["name"] for f in doc["files"]] == sorted(hub.shards)
    for name, data in hub.shards.items():
        assert stored(store, "acme/split-GGUF", name).read_bytes() == data
    listed = json.loads(ferrox(hub, store, "models", "--json").stdout)["models"]
    assert [(m["ref"], m["files"]) for m in listed] == [
        ("hf://acme/split-GGUF/big-Q8_0-00001-of-00003.gguf", 3)]
    shown = json.loads(ferrox(hub, store, "models", "show", "acme/split-GGUF:Q8_0", "--json").stdout)
    assert shown["tensors"] == 6 and shown["architecture"] == "llama"


def test_a_file_that_is_not_gguf_is_removed_after_its_checksum_matches(hub, store):
    hub.add("acme/junk-GGUF", {"junk-Q8_0.gguf": os.urandom(4096)})
    r = ferrox(hub, store, "pull", "acme/junk-GGUF:Q8_0")
    assert r.returncode == 1 and "not a GGUF file" in r.stderr, r.stderr
    assert list((store / "acme" / "junk-GGUF").iterdir()) == []


def test_run_uses_a_stored_reference_offline_and_models_rm_removes_it(hub, store, tmp_path):
    from test_engine_open import write_model  # the tiny llama the engine-open tests run
    model = write_model(tmp_path / "src" / "llama.gguf", 256).read_bytes()
    hub.add("acme/llama-GGUF", {"llama-F32.gguf": model})
    r = ferrox(hub, store, "run", "-m", "acme/llama-GGUF:F32", "-p", "hello", "-n", "2")
    assert r.returncode == 2 and "--pull" in r.stderr, r.stderr
    assert hub.requests() == 0  # no download without --pull
    r = ferrox(hub, store, "run", "-m", "acme/llama-GGUF:F32", "--pull", "-p", "hello", "-n", "2")
    assert r.returncode == 0, r.stderr
    before = hub.requests()
    r = ferrox(hub, store, "run", "-m", "hf://acme/llama-GGUF/llama-F32.gguf", "-p", "hello", "-n", "2")
    assert r.returncode == 0, r.stderr
    assert hub.requests() == before
    r = ferrox(hub, store, "models", "rm", "acme/llama-GGUF:F32")
    assert r.returncode == 0 and "llama-F32.gguf" in r.stdout
    assert not (store / "acme" / "llama-GGUF").exists()
    assert json.loads(ferrox(hub, store, "models", "--json").stdout)["models"] == []
    r = ferrox(hub, store, "models", "rm", "acme/llama-GGUF:F32")
    assert r.returncode == 2 and "not in the model store" in r.stderr


def test_serve_does_not_download_at_start_unless_asked(hub, store):
    r = ferrox(hub, store, "serve", "-m", "acme/tiny-GGUF:Q8_0", "--port", "0", timeout=60)
    assert r.returncode == 2 and "not in the model store" in r.stderr and "--pull" in r.stderr, r.stderr
    assert hub.requests() == 0


def test_the_progress_bar_is_drawn_on_a_terminal_only(hub, store):
    import pty
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and k != "HF_TOKEN"}
    env.update({"XDG_CONFIG_HOME": "/nonexistent", "FERROX_MODELS": str(store),
                "HF_ENDPOINT": hub.endpoint})

    def stderr_on_a_tty(*args: str) -> bytes:
        main, sub = pty.openpty()
        try:
            p = subprocess.run([FERROX, *args], stdout=subprocess.PIPE, stderr=sub, env=env, timeout=120)
            assert p.returncode == 0
        finally:
            os.close(sub)
        out = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the writer side is closed and drained
                break
            if not chunk:
                break
            out += chunk
        os.close(main)
        return out

    drawn = stderr_on_a_tty("pull", "hf://acme/tiny-GGUF/model-Q8_0.gguf")
    assert b"\r" in drawn and b"model-Q8_0.gguf" in drawn
    assert drawn.count(b"100%") == 1  # the finished line once, not at every callback of curl
    quiet = stderr_on_a_tty("pull", "--quiet", "hf://acme/tiny-GGUF/model-Q4_K_M.gguf")
    assert b"%" not in quiet
    piped = ferrox(hub, store, "pull", "hf://acme/tiny-GGUF/mmproj-Q8_0.gguf")
    assert piped.returncode == 0 and "\r" not in piped.stderr and "%" not in piped.stderr


def test_a_server_models_entry_names_a_stored_reference(hub, store, tmp_path):
    """server.models[].path may be a reference: looked up in the store at start, with no
    network unless --pull; the model then answers by its alias, with the entry's own
    keep_alive (issue 38: hf:// in server.models, per-model keep_alive)."""
    import socket
    import time
    import urllib.request

    from test_engine_open import write_model
    model = write_model(tmp_path / "src" / "llama.gguf", 256).read_bytes()
    hub.add("acme/llama-GGUF", {"llama-F32.gguf": model})
    config = tmp_path / "ferrox.yaml"
    config.write_text("server:\n  models:\n"
                      "    - path: hf://acme/llama-GGUF/llama-F32.gguf\n"
                      "      alias: small\n"
                      "      keep_alive: 0\n")
    config.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--config", str(config), "serve", "--port", str(port), "-t", "1"]
    r = ferrox(hub, store, *args, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "server.models[0] (" in r.stderr and "not in the model store" in r.stderr, r.stderr
    assert "--pull" in r.stderr and hub.requests() == 0

    env = {k: v for k, v in os.environ.items()
           if k not in ("FERROX_CONFIG", "HF_TOKEN", "FERROX_OFFLINE") and "proxy" not in k.lower()}
    env.update({"XDG_CONFIG_HOME": "/nonexistent", "FERROX_MODELS": str(store), "HF_ENDPOINT": hub.endpoint})
    log = open(tmp_path / "serve.log", "w+b")
    proc = subprocess.Popen([FERROX, *args, "--pull"], stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"

    def get(path: str):
        try:
            with urllib.request.urlopen(base + path, timeout=5) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except OSError:
            return 0, None

    try:
        deadline = time.time() + 60
        while get("/ready")[0] != 200:
            assert proc.poll() is None and time.time() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        assert stored(store, "acme/llama-GGUF", "llama-F32.gguf").read_bytes() == model
        status, listed = get("/v1/models")
        assert status == 200 and [m["id"] for m in listed["data"]] == ["small"], listed
        body = json.dumps({"model": "small", "prompt": "hello", "max_tokens": 2}).encode()
        req = urllib.request.Request(base + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert resp.status == 200
        # The entry's keep_alive 0: unloaded once its request ended.
        deadline = time.time() + 10
        while get("/v1/models")[1]["data"][0].get("state") != "unloaded":
            assert time.time() < deadline, get("/v1/models")
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
