"""`ferrox serve --otlp-endpoint` (issue 38 item 5): OpenTelemetry traces over OTLP/HTTP
with a JSON body, received by a small OTLP receiver on loopback in this file.

Every body is parsed by the OpenTelemetry project's own protobuf definitions
(opentelemetry-proto, google.protobuf.json_format) as an ExportTraceServiceRequest:
an independent reference for the encoding. The spans are checked against what the
client got: the trace id of a given traceparent, the response's traceparent, the
parent links, the usage figures and finish reason, the phases' order in time. A
receiver that is down or hangs must not slow requests, and a drained request's spans
must still arrive before the server exits.
"""
from __future__ import annotations

import http.client
import json
import os
import pathlib
import random
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from conftest import running, free_port

TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
MODEL = str(TINY / "tiny-qwen3.gguf")
SERVER, INTERNAL = 2, 1  # OTLP's SpanKind numbers
rng = random.Random(38)


def hex_id(n_bytes: int) -> str:
    return "".join(f"{rng.randrange(256):02x}" for _ in range(n_bytes))


class Receiver:
    """An OTLP/HTTP receiver: records each POST /v1/traces body; `hold` seconds before
    answering (a hung receiver)."""

    def __init__(self, hold: float = 0):
        self.bodies: list[bytes] = []
        self.content_types: list[str] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if hold:
                    time.sleep(hold)
                if self.path == "/v1/traces":
                    with receiver.lock:
                        receiver.bodies.append(body)
                        receiver.content_types.append(self.headers["Content-Type"])
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def spans(self) -> list[dict]:
        """Every span received, each body first checked by the OTLP schema."""
        out = []
        with self.lock:
            bodies = list(self.bodies)
            assert all(t == "application/json" for t in self.content_types), self.content_types
        for body in bodies:
            json_format.Parse(body, ExportTraceServiceRequest())  # raises on a schema break
            request = json.loads(body)
            for rs in request["resourceSpans"]:
                resource = attributes(rs["resource"]["attributes"])
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        span["attrs"] = attributes(span.get("attributes", []))
                        span["service"] = resource["service.name"]
                        out.append(span)
        return out


def attributes(items: list[dict]) -> dict:
    def value(v: dict):
        if "stringValue" in v:
            return v["stringValue"]
        if "intValue" in v:
            return int(v["intValue"])
        if "arrayValue" in v:
            return [value(x) for x in v["arrayValue"]["values"]]
        raise AssertionError(f"unexpected attribute value {v}")
    return {a["key"]: value(a["value"]) for a in items}


def post(server, path: str, body: dict, headers: dict | None = None, timeout: float = 60):
    req = urllib.request.Request(server.base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"{}")


def words(n: int) -> str:
    return " ".join(rng.choice(["amber", "basalt", "cedar", "delta", "ember", "fjord", "granite",
                                "harbor", "iris", "juniper"]) for _ in range(n))


def tree(spans: list[dict], trace_id: str) -> tuple[dict, dict[str, list[dict]]]:
    """The trace's request span and its other spans by name."""
    mine = [s for s in spans if s["traceId"] == trace_id]
    roots = [s for s in mine if s["kind"] == SERVER]
    assert len(roots) == 1, mine
    by_name: dict[str, list[dict]] = {}
    for s in mine:
        if s is not roots[0]:
            assert s["kind"] == INTERNAL, s
            by_name.setdefault(s["name"], []).append(s)
    return roots[0], by_name


def ns(span: dict, which: str) -> int:
    return int(span[f"{which}TimeUnixNano"])


def within(inner: dict, outer: dict) -> bool:
    return ns(outer, "start") <= ns(inner, "start") <= ns(inner, "end") <= ns(outer, "end")


def check_generation(spans, trace_id, headers, body, route, finish):
    root, children = tree(spans, trace_id)
    version, tid, sid, flags = headers["traceparent"].split("-")
    assert (version, tid, flags) == ("00", trace_id, "01")
    assert root["spanId"] == sid and root["name"] == f"POST {route}"
    a = root["attrs"]
    assert a["http.request.method"] == "POST" and a["http.route"] == route
    assert a["http.response.status_code"] == 200 and "status" not in root
    assert a["gen_ai.request.model"] == body["model"] == a["gen_ai.response.model"]
    assert a["gen_ai.usage.input_tokens"] == body["usage"]["prompt_tokens"]
    assert a["gen_ai.usage.output_tokens"] == body["usage"]["completion_tokens"]
    assert a["gen_ai.response.finish_reasons"] == [finish]
    assert a["ferrox.request.id"] == headers["X-Request-Id"]
    assert sorted(children) == ["decode", "prefill", "prefill chunk", "queue"], children
    for name in ("queue", "prefill", "decode"):
        (span,) = children[name]
        assert span["parentSpanId"] == root["spanId"] and within(span, root), (name, span, root)
    (queue,), (prefill,), (decode,) = children["queue"], children["prefill"], children["decode"]
    assert ns(queue, "end") <= ns(prefill, "start") and ns(prefill, "end") <= ns(decode, "start")
    assert decode["attrs"]["ferrox.decode.tokens"] == body["usage"]["completion_tokens"]
    chunks = sorted(children["prefill chunk"], key=lambda s: s["attrs"]["ferrox.prefill.chunk_index"])
    assert len(chunks) == prefill["attrs"]["ferrox.prefill.chunks"]
    assert [c["attrs"]["ferrox.prefill.chunk_index"] for c in chunks] == list(range(len(chunks)))
    cached = prefill["attrs"]["ferrox.prefill.cached_tokens"]
    computed = sum(c["attrs"]["ferrox.prefill.chunk_tokens"] for c in chunks)
    assert computed + cached == body["usage"]["prompt_tokens"], (computed, cached)
    for c in chunks:
        assert c["parentSpanId"] == prefill["spanId"] and within(c, prefill), (c, prefill)
    for a_, b_ in zip(chunks, chunks[1:]):
        assert ns(a_, "end") <= ns(b_, "start")
    return root, chunks


@pytest.fixture()
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_spans_of_requests_with_and_without_a_traceparent(receiver):
    if not pathlib.Path(MODEL).exists():
        pytest.skip(f"no {MODEL} (tests/model/make_tiny_models.py makes it)")
    given_trace, given_parent = hex_id(16), hex_id(8)
    env = {"OTEL_SERVICE_NAME": "ferrox-under-test"}
    with running("--otlp-endpoint", receiver.url, "--parallel", "2", "-c", "2048",
                 model=MODEL, env_extra=env) as s:
        # A prompt of about 190 tokens (the model takes 256): two 128-token prefill chunks.
        status, h1, done = post(s, "/v1/completions",
                                {"prompt": words(150), "max_tokens": 6, "temperature": 0},
                                {"traceparent": f"00-{given_trace}-{given_parent}-01"})
        assert status == 200, done
        status, h2, chat = post(s, "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": words(20)}],
                                 "max_tokens": 4, "temperature": 0})
        assert status == 200, chat
        malformed = [f"00-{given_trace.upper()}-{given_parent}-01",   # uppercase hex
                     f"00-{'0' * 32}-{given_parent}-01",              # all-zero trace id
                     f"00-{given_trace}-{'0' * 16}-01",               # all-zero parent id
                     f"ff-{given_trace}-{given_parent}-01",           # version ff
                     f"00-{given_trace}-{given_parent}-01-extra",     # version 00 with more
                     f"00-{given_trace}-{given_parent[:-1]}-01",      # short parent id
                     "garbage"]
        odd = []
        for value in malformed:
            status, h, _ = post(s, "/v1/completions", {"prompt": "hi", "max_tokens": 1},
                                {"traceparent": value})
            assert status == 200, value
            odd.append(h["traceparent"].split("-")[1])
        assert given_trace not in odd and len(set(odd)) == len(odd), odd
        # A caller's unsampled trace: propagated, not recorded.
        quiet_trace = hex_id(16)
        status, h_quiet, _ = post(s, "/v1/completions", {"prompt": "hi", "max_tokens": 1},
                                  {"traceparent": f"00-{quiet_trace}-{hex_id(8)}-00"})
        assert status == 200 and h_quiet["traceparent"].startswith(f"00-{quiet_trace}-")
        assert h_quiet["traceparent"].endswith("-00")
        status, probe = s.get("/health")
        assert status == 200
        # A refused request: its span says 400, and has no generation phases.
        status, h_bad, _ = post(s, "/v1/chat/completions", {"messages": "not a list"})
        assert status == 400
        text = s.text_log()
    spans = receiver.spans()  # the server has drained and exited: everything was flushed

    root, chunks = check_generation(spans, given_trace, h1, done, "/v1/completions",
                                    done["choices"][0]["finish_reason"])
    assert root["parentSpanId"] == given_parent and len(chunks) >= 2
    assert root["attrs"]["gen_ai.operation.name"] == "text_completion"
    chat_trace = h2["traceparent"].split("-")[1]
    root2, _ = check_generation(spans, chat_trace, h2, chat, "/v1/chat/completions",
                                chat["choices"][0]["finish_reason"])
    assert "parentSpanId" not in root2 or not root2["parentSpanId"]
    assert root2["attrs"]["gen_ai.operation.name"] == "chat"
    for t in odd:  # each a new trace of its own, with no parent
        r, _ = tree(spans, t)
        assert not r.get("parentSpanId"), r
    assert not [sp for sp in spans if sp["traceId"] == quiet_trace]
    bad, bad_children = tree(spans, h_bad["traceparent"].split("-")[1])
    assert bad["attrs"]["http.response.status_code"] == 400 and "status" not in bad
    assert "gen_ai.usage.input_tokens" not in bad["attrs"] and not bad_children
    assert {sp["service"] for sp in spans} == {"ferrox-under-test"}
    assert not [sp for sp in spans if sp["attrs"].get("http.route") in ("/health", "/ready")]
    assert all("amber" not in json.dumps(sp) for sp in spans)  # no prompt text in a span
    assert "traces go to" in text


def test_a_drained_request_is_traced_before_exit(receiver):
    if not pathlib.Path(MODEL).exists():
        pytest.skip(f"no {MODEL} (tests/model/make_tiny_models.py makes it)")
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url + "/v1/traces"}
    trace = hex_id(16)
    got = {}
    with running("--parallel", "1", "-c", "1024", model=MODEL, env_extra=env) as s:
        def call():
            got["reply"] = post(s, "/v1/completions",
                                {"prompt": words(10), "max_tokens": 200, "temperature": 0},
                                {"traceparent": f"00-{trace}-{hex_id(8)}-01"})
        t = threading.Thread(target=call)
        t.start()
        deadline = time.time() + 20
        while s.metrics()["ferrox:num_requests_running"] < 1 and time.time() < deadline:
            time.sleep(0.01)
        assert not [sp for sp in receiver.spans() if sp["traceId"] == trace]
        assert t.is_alive()  # still generating as the drain begins
        # SIGTERM now (running() stops the server on leaving the block): the drain lets
        # the request finish, and its spans must go out before the process exits.
    t.join(30)
    status, headers, body = got["reply"]
    assert status == 200, body
    check_generation(receiver.spans(), trace, headers, body, "/v1/completions",
                     body["choices"][0]["finish_reason"])


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def timed_requests(s, n: int) -> float:
    """Seconds for `n` small requests one after another on one keep-alive connection:
    the next is read only once the handler of the one before has returned, so a
    handler that waited on the exporter would show here."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    started = time.time()
    try:
        for _ in range(n):
            conn.request("POST", "/v1/completions",
                         json.dumps({"prompt": words(8), "max_tokens": 2}),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            assert r.status == 200 and r.getheader("traceparent")
    finally:
        conn.close()
    return time.time() - started


def test_a_receiver_down_or_hung_never_holds_requests_up():
    if not pathlib.Path(MODEL).exists():
        pytest.skip(f"no {MODEL} (tests/model/make_tiny_models.py makes it)")
    # Down: every POST is refused at once; its spans count as failed.
    with running("--otlp-endpoint", closed_port_url(), "--parallel", "2", "-c", "1024",
                 model=MODEL) as s:
        timed_requests(s, 2)  # warm
        down = timed_requests(s, 6)
        deadline = time.time() + 10
        while s.metrics()["ferrox:trace_spans_failed_total"] == 0 and time.time() < deadline:
            time.sleep(0.1)
        m = s.metrics()
        assert m["ferrox:trace_spans_failed_total"] > 0, m
        assert m["ferrox:trace_spans_exported_total"] == 0, m
    assert "did not take" in s.text_log()
    # Hung: the receiver holds each POST for 30 s, past the exporter's 5 s timeout.
    hung = Receiver(hold=30)
    try:
        with running("--otlp-endpoint", hung.url, "--parallel", "2", "-c", "1024",
                     model=MODEL) as s:
            timed_requests(s, 2)
            time.sleep(1.2)  # the exporter's interval: its first POST is now held
            held = timed_requests(s, 6)
            with hung.lock:
                assert not hung.bodies  # none was answered: the exporter is still waiting
            # Six requests while the exporter waits take about as long as with no wait;
            # one request held for the exporter's timeout would add 5 s.
            assert held < down + 4, (held, down)
            stop_started = time.time()
        # The shutdown waits for the held POST at most the exporter's 5 s timeout.
        assert time.time() - stop_started < 20
    finally:
        hung.close()


def test_a_bad_endpoint_is_a_usage_error():
    import subprocess
    from conftest import FERROX
    if not FERROX or not pathlib.Path(MODEL).exists():
        pytest.skip("no ferrox or tiny model")
    env = {"XDG_CONFIG_HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([FERROX, "serve", "-m", MODEL, "--otlp-endpoint", "ftp://127.0.0.1/x"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "server.otlp_endpoint" in r.stderr, r.stderr
    r = subprocess.run([FERROX, "serve", "-m", MODEL], capture_output=True, text=True, timeout=60,
                       env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"})
    assert r.returncode == 2 and "OTEL_EXPORTER_OTLP_ENDPOINT" in r.stderr, r.stderr
