"""ferrox replicas behind Ray Serve (ferrox.serve.ray, issue 39), on one machine,
loopback only, bounded: seeded requests through Ray equal the same requests to
one `ferrox serve`; the router ranks by ferrox's gauges; a replica's ferrox is
killed mid-load (retries before the first byte, an error the client sees on the
streams it was serving, nothing hangs, the replica is replaced and serves
again); 2 -> 1 -> 2 replicas under load without a failed request.

The model is tiny-llama31 (tests/model/make_tiny_models.py; 2048 positions),
1 thread a replica. A missing `ray[serve]` fails this test (CI installs it:
ci/install-deps.sh); FERROX_RAY_OPTIONAL=1 turns that into a skip.
"""
from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

try:
    import httpx
    import openai
    import ray
    from ray import serve
except ImportError as e:  # never a silent skip in CI
    if os.environ.get("FERROX_RAY_OPTIONAL") == "1":
        pytest.skip(f"ray[serve] or openai missing: {e}", allow_module_level=True)
    raise ImportError(f"{e}: this test needs ray[serve] and openai (ci/install-deps.sh "
                      "installs them; FERROX_RAY_OPTIONAL=1 skips instead)") from e

from ferrox.serve import _headroom  # noqa: E402  (pure: no Ray, no C library)
from ferrox.serve._settings import FerroxSettings, SettingsError  # noqa: E402

FERROX = os.environ.get("FERROX_BIN", "")
MODEL = str(pathlib.Path.home() / ".cache/ferrox/tiny-models/tiny-llama31.gguf")
SERVE_FLAGS = {"threads": 1, "parallel": 4, "context": 4096, "kv_type": "f16",
               "extra_args": ["--chat-template", "chatml"]}
CLIENT_TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ferrox_children(exclude: set[int]) -> set[int]:
    """Pids of the `ferrox serve` processes serving MODEL, but those in `exclude`."""
    found = set()
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in exclude:
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [FERROX.encode(), b"serve"] and MODEL.encode() in argv:
            found.add(int(proc.name))
    return found


class Reference:
    """One plain `ferrox serve` with the replicas' flags: the batch-invariance reference."""

    def __init__(self):
        settings = FerroxSettings.from_mapping({"model": MODEL, "ferrox_bin": FERROX, **SERVE_FLAGS})
        self.port = free_port()
        self.proc = subprocess.Popen(settings.serve_argv(self.port), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        end = time.time() + 60
        while time.time() < end:
            try:
                if httpx.get(self.base + "/ready").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("the reference ferrox serve did not become ready")


@pytest.fixture(scope="module")
def app():
    if not FERROX or not pathlib.Path(FERROX).exists():
        pytest.fail("FERROX_BIN is not set to the built ferrox")
    if not pathlib.Path(MODEL).exists():
        pytest.fail(f"no {MODEL}: FERROX_BIN=... python3 tests/model/make_tiny_models.py makes it")
    reference = Reference()
    env = {"PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[2] / "python"),
           "FERROX_BIN": FERROX}
    if os.environ.get("FERROX_LIBRARY"):
        env["FERROX_LIBRARY"] = os.environ["FERROX_LIBRARY"]  # `import ferrox` loads the core
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 << 20,
             runtime_env={"env_vars": env})
    from ferrox.serve.ray import build_app
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    # Streams joined for up to 50 ms on their way through Ray: the seeded and
    # the killed-replica tests below check that path end to end.
    args = {"model": MODEL, "ferrox_bin": FERROX, **SERVE_FLAGS, "stream_interval_ms": 50}
    options = {"num_replicas": 2, "health_check_period_s": 1, "health_check_timeout_s": 5}
    serve.run(build_app(args, options), name="ferrox", route_prefix="/")
    try:
        yield {"base": f"http://127.0.0.1:{port}", "reference": reference,
               "redeploy": lambda n: serve.run(build_app(args, dict(options, num_replicas=n)),
                                               name="ferrox", route_prefix="/")}
    finally:
        serve.shutdown()
        ray.shutdown()
        reference.proc.send_signal(signal.SIGTERM)
        assert reference.proc.wait(30) == 0


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0,
                         timeout=CLIENT_TIMEOUT)


def request(i: int, max_tokens: int = 24) -> dict:
    """Seeded sampling and greedy, chat and completion, streamed and not."""
    req = {"kind": "chat" if i % 2 else "completion", "stream": i % 3 != 1,
           "max_tokens": max_tokens}
    req.update({"temperature": 0.9, "seed": 7000 + i} if i % 4 else {"temperature": 0})
    text = f"Item {i}: " + " ".join(f"w{(i * 37 + k) % 101}" for k in range(i % 9 + 2))
    if req["kind"] == "chat":
        req["messages"] = [{"role": "user", "content": text}]
    else:
        req["prompt"] = text
    return req


def send(c: openai.OpenAI, req: dict, started: threading.Event | None = None) -> tuple[str, str]:
    """(text, finish_reason); raises whatever the client raises."""
    args = {k: v for k, v in req.items() if k in ("max_tokens", "temperature", "seed")}
    chat = req["kind"] == "chat"
    if not req["stream"]:
        if chat:
            r = c.chat.completions.create(model="m", messages=req["messages"], **args)
            return r.choices[0].message.content, r.choices[0].finish_reason
        r = c.completions.create(model="m", prompt=req["prompt"], **args)
        return r.choices[0].text, r.choices[0].finish_reason
    parts, finish = [], None
    stream = (c.chat.completions.create(model="m", messages=req["messages"], stream=True, **args)
              if chat else c.completions.create(model="m", prompt=req["prompt"], stream=True, **args))
    for chunk in stream:
        if started is not None:
            started.set()
        for choice in chunk.choices:
            parts.append((choice.delta.content if chat else choice.text) or "")
            finish = choice.finish_reason or finish
    assert finish in ("stop", "length"), f"a stream ended without a finish_reason: {finish}"
    return "".join(parts), finish


def wait_for(condition, seconds: float, what: str) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, f"no {what} within {seconds} s"
        time.sleep(0.2)


def replica_of(base: str, i: int) -> str:
    r = httpx.post(base + "/v1/completions", json={"prompt": f"p{i}", "max_tokens": 4, "seed": i},
                   timeout=CLIENT_TIMEOUT)
    assert r.status_code == 200, r.text
    return r.headers["x-ferrox-replica"]


def test_settings_are_checked_before_anything_starts():
    with pytest.raises(SettingsError, match="unknown key.*'treads'"):
        FerroxSettings.from_mapping({"model": MODEL, "ferrox_bin": FERROX, "treads": 2})
    with pytest.raises(SettingsError, match="`parallel` must be an integer 1..64, got 0"):
        FerroxSettings.from_mapping({"model": MODEL, "ferrox_bin": FERROX, "parallel": 0})
    with pytest.raises(SettingsError, match="may not set --host"):
        FerroxSettings.from_mapping({"model": MODEL, "ferrox_bin": FERROX,
                                     "extra_args": ["--host=0.0.0.0"]})
    with pytest.raises(SettingsError, match="`stream_interval_ms` must be an integer 0..1000, got 5000"):
        FerroxSettings.from_mapping({"model": MODEL, "ferrox_bin": FERROX, "stream_interval_ms": 5000})
    with pytest.raises(SettingsError, match="`model`"):
        FerroxSettings.from_mapping({"ferrox_bin": FERROX})
    argv = FerroxSettings.from_mapping({"model": "m.gguf", "ferrox_bin": "/x/ferrox",
                                        "api_key_file": "/k", "threads": 3}).serve_argv(9)
    assert argv[:8] == ["/x/ferrox", "serve", "-m", "m.gguf", "--host", "127.0.0.1", "--port", "9"]
    assert argv[argv.index("-t") + 1] == "3" and argv[argv.index("--api-key-file") + 1] == "/k"
    # K's and V's cache kinds apart, each checked.
    argv = FerroxSettings.from_mapping({"model": "m.gguf", "ferrox_bin": "/x/ferrox",
                                        "kv_type_k": "q8_0", "kv_type_v": "f16"}).serve_argv(9)
    assert argv[argv.index("--cache-type-k") + 1] == "q8_0"
    assert argv[argv.index("--cache-type-v") + 1] == "f16"
    with pytest.raises(SettingsError, match="`kv_type_v` must be one of f32, f16, q8_0, q4_0, got 'q5'"):
        FerroxSettings.from_mapping({"model": MODEL, "ferrox_bin": FERROX, "kv_type_v": "q5"})


def test_router_ranks_by_ferrox_gauges():
    page = ("# TYPE ferrox:num_requests_waiting gauge\nferrox:num_requests_waiting 3\n"
            "ferrox:num_requests_running 4\nferrox:kv_cache_usage_perc 0.25\n"
            'ferrox:request_outcomes_total{code="200"} 9\n')
    assert _headroom.parse_gauges(page) == {"waiting": 3, "running": 4, "kv": 0.25}
    with pytest.raises(KeyError, match="kv_cache_usage_perc"):
        _headroom.parse_gauges("ferrox:num_requests_waiting 0\nferrox:num_requests_running 0\n")
    stats = {
        "busy": {"ready": True, "parallel": 4, "waiting": 3, "running": 4, "kv": 0.5},
        "idle": {"ready": True, "parallel": 4, "waiting": 0, "running": 1, "kv": 0.1},
        "full_cache": {"ready": True, "parallel": 4, "waiting": 0, "running": 1, "kv": 0.97},
        "dead": {"ready": False, "parallel": 4},
        "new": None,
    }
    in_flight = {"busy": 0, "idle": 0, "full_cache": 0, "dead": 0, "new": 3}
    order = [r[0] for r in _headroom.rank(list(stats), stats.get, in_flight.get)]
    # idle 1/4 + 0.1; full_cache 1/4 + 0.97; busy 7/4 + 0.5; new 3 sent, no report
    # yet; dead left out while others are ready, and the last resort when none is.
    assert order == ["idle", "full_cache", "busy", "new"]
    assert _headroom.rank(["dead"], stats.get, in_flight.get) == [["dead"]]
    # Requests this router sent since the last sample count when they exceed the gauges.
    in_flight["idle"] = 8
    assert [r[0] for r in _headroom.rank(["idle", "full_cache"], stats.get, in_flight.get)] == \
        ["full_cache", "idle"]


def test_seeded_requests_through_ray_equal_one_ferrox_serve(app):
    reqs = [request(i) for i in range(12)]
    alone = [send(client(app["reference"].base), r) for r in reqs]
    with ThreadPoolExecutor(6) as pool:
        through_ray = list(pool.map(lambda r: send(client(app["base"]), r), reqs))
    for i, (a, b) in enumerate(zip(alone, through_ray)):
        assert b == a, f"request {i} through Ray differs from one ferrox serve"
    assert any(text for text, _ in alone)
    # Both replicas take work when requests overlap. Up to 5 bursts: until a
    # replica's first gauges reach the router it ranks last, and on a loaded
    # CI machine that report can trail the first burst.
    replicas: set = set()
    for _ in range(5):
        with ThreadPoolExecutor(8) as pool:
            replicas |= set(pool.map(lambda i: replica_of(app["base"], i), range(16)))
        if len(replicas) == 2:
            break
    assert len(replicas) == 2, replicas


def test_ingress_refuses_what_it_does_not_relay(app):
    r = httpx.post(app["base"] + "/tokenize", json={"content": "x"})
    assert r.status_code == 404 and "not served here" in r.json()["error"]["message"]
    r = httpx.get(app["base"] + "/v1/models")
    assert r.status_code == 200 and r.json()["data"][0]["id"]


def test_killed_replica_engine_mid_load(app):
    base, ref = app["base"], app["reference"]
    # Both engines up before one is killed: on a loaded machine one may still be
    # (re)starting when the test begins (seen once in a clean-clone CI run).
    deadline = time.monotonic() + 30
    children = ferrox_children({ref.proc.pid})
    while len(children) != 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        children = ferrox_children({ref.proc.pid})
    assert len(children) == 2, children
    replicas_before = {replica_of(base, i) for i in range(6)}
    # Long streams, so the kill lands mid-answer on the victim's streams.
    load = [dict(request(i, max_tokens=400), stream=True, kind="completion") for i in range(12)]
    load = [dict(r, prompt=f"Item {i} " * 4) for i, r in enumerate(load)]
    started = [threading.Event() for _ in load]
    outcomes: list = [None] * len(load)

    def run(i: int) -> None:
        try:
            outcomes[i] = ("ok", send(client(base), load[i], started[i]))
        except (openai.APIError, httpx.HTTPError) as e:
            outcomes[i] = ("error", repr(e))
        except AssertionError as e:  # the stream ended as if whole, without a finish_reason
            outcomes[i] = ("truncated", str(e))
        except Exception as e:  # noqa: BLE001  reported below
            outcomes[i] = ("other", repr(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(load))]
    for t in threads:
        t.start()
    end = time.monotonic() + CLIENT_TIMEOUT
    while sum(e.is_set() for e in started) < 6:  # 4 a replica run at once; 6 are under way
        assert time.monotonic() < end, "the streams did not start"
        time.sleep(0.02)
    victim = min(children)
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    # Requests sent after the kill: retried before their first byte, all succeed.
    after = [request(100 + i) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        after_out = list(pool.map(lambda r: send(client(base), r), after))
    for t in threads:
        t.join(CLIENT_TIMEOUT * 2)
        assert not t.is_alive(), "a request hung"
    assert time.monotonic() - killed_at < CLIENT_TIMEOUT * 2
    # Every success is the whole answer (what one ferrox serve gives); every
    # failure is an error the client saw.
    with ThreadPoolExecutor(4) as pool:
        expected = list(pool.map(lambda r: send(client(ref.base), r), load))
    assert not [o for o in outcomes if o[0] != "ok" and o[0] != "error"], outcomes
    errors = [o for o in outcomes if o[0] == "error"]
    for i, (kind, value) in enumerate(outcomes):
        if kind == "ok":
            assert value == expected[i], f"stream {i} succeeded with a different answer"
    assert errors, f"no stream was cut by the kill: {outcomes}"
    assert len(errors) < len(load), "the surviving replica's streams failed too"
    with ThreadPoolExecutor(4) as pool:
        assert after_out == list(pool.map(lambda r: send(client(ref.base), r), after))
    # The replica is replaced (its health check fails) and serves again.
    end = time.monotonic() + 90
    while time.monotonic() < end:
        now = ferrox_children({ref.proc.pid})
        if len(now) == 2 and now - children:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"no replacement ferrox serve within 90 s: {now}")
    end = time.monotonic() + 60
    seen: set[str] = set()
    while time.monotonic() < end and not (seen - replicas_before and len(seen) >= 2):
        with ThreadPoolExecutor(8) as pool:
            seen |= set(pool.map(lambda i: replica_of(base, i), range(8)))
    assert seen - replicas_before, f"the replacement replica serves nothing: {seen}"


def test_scale_two_one_two_under_load(app):
    base = app["base"]
    stop = threading.Event()
    failures: list[str] = []
    done = [0]

    def load(k: int) -> None:
        i = 0
        while not stop.is_set():
            req = request(200 + 10 * k + i % 10)
            try:
                text, finish = send(client(base), req)
                assert finish in ("stop", "length")
                done[0] += 1
            except Exception as e:  # noqa: BLE001  every failure is reported
                failures.append(repr(e))
            i += 1

    threads = [threading.Thread(target=load, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        for replicas in (1, 2):
            app["redeploy"](replicas)
            # The stopped replica's ferrox drains (SIGTERM) and exits; the new one is up.
            wait_for(lambda: len(ferrox_children({app["reference"].proc.pid})) == replicas, 60,
                     f"{replicas} ferrox serve processes")
            time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join(CLIENT_TIMEOUT * 2)
    assert not failures, failures[:3]
    assert done[0] > 8
