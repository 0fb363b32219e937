"""bench/openai_load.py against a scripted OpenAI-style SSE server on loopback.

The server (stdlib http.server, written here) streams chat chunks the way the OpenAI
API documents them and records what it was sent, so each test knows the true token
counts, delays and concurrency without trusting the load generator: usage counts are
deliberately different from the number of content chunks, the first content chunk is
held back by a known delay, and some requests are made to fail.
"""
import json
import pathlib
import random
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import openai_load  # noqa: E402

FIRST_TOKEN_DELAY = 0.05  # seconds before the first content chunk
USAGE_EXTRA = 3  # usage.completion_tokens = content chunks + this


class Script:
    """What the fake server does and what it saw."""

    def __init__(self, send_usage=True, fail_prompt=None, no_finish=False, hold=0.0):
        self.send_usage, self.fail_prompt, self.no_finish, self.hold = send_usage, fail_prompt, no_finish, hold
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = []  # request bodies, in arrival order


def chunk(content=None, finish=None, role=None):
    delta = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def make_handler(script: Script):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/v1/models":
                self.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model",
                                                                  "created": 0, "owned_by": "test"}]})
            else:
                self.send_json(404, {"error": {"message": "no such path"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][0]["content"]
            with script.lock:
                script.requests.append(body)
                script.in_flight += 1
                script.max_in_flight = max(script.max_in_flight, script.in_flight)
            try:
                if prompt == script.fail_prompt:
                    self.send_json(500, {"error": {"message": "scripted failure"}})
                    return
                # As many content chunks as max_tokens asks, minus one: never the usage figure.
                n = max(1, body["max_tokens"] - 1)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                events = [chunk(role="assistant", content="")]
                self.write_event(events[0])
                time.sleep(FIRST_TOKEN_DELAY)
                for i in range(n):
                    self.write_event(chunk(content=f"t{i} "))
                    time.sleep(script.hold / n)
                if not script.no_finish:
                    self.write_event(chunk(finish="length"))
                if script.send_usage and body.get("stream_options", {}).get("include_usage"):
                    self.write_event({"id": "c1", "object": "chat.completion.chunk", "created": 0,
                                      "model": "fake", "choices": [],
                                      "usage": {"prompt_tokens": 5, "completion_tokens": n + USAGE_EXTRA,
                                                "total_tokens": n + USAGE_EXTRA + 5}})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
            finally:
                with script.lock:
                    script.in_flight -= 1

        def write_event(self, obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


@pytest.fixture
def serve():
    servers = []

    def start(script: Script) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_tokens_come_from_usage_when_the_server_reports_it(serve):
    script = Script(send_usage=True)
    res = openai_load.run_load(serve(script), clients=2, requests=3, max_tokens=9)
    assert not res.failures
    assert len(res.results) == 6
    assert res.token_source == "usage"
    assert res.tokens == 6 * (9 - 1 + USAGE_EXTRA)
    assert all(b["stream"] and b["stream_options"] == {"include_usage": True} for b in script.requests)
    assert {b["model"] for b in script.requests} == {"fake-model"}  # the first of GET /models


def test_tokens_fall_back_to_content_chunks(serve):
    res = openai_load.run_load(serve(Script(send_usage=False)), clients=3, requests=2, max_tokens=6)
    assert not res.failures
    assert res.token_source == "chunks"
    assert res.tokens == 6 * (6 - 1)


def test_clients_run_concurrently_with_varied_prompts(serve):
    script = Script(hold=0.3)  # every stream lasts long enough for all 4 to overlap
    res = openai_load.run_load(serve(script), clients=4, requests=2, max_tokens=4)
    assert not res.failures
    assert script.max_in_flight == 4
    prompts = [b["messages"][0]["content"] for b in script.requests]
    assert len(set(prompts)) == 8
    # 2 rounds of 4 parallel streams of >= 0.35 s: the wall time shows they overlapped.
    assert 0.7 <= res.wall_s < 4 * 2 * 0.35


def test_ttft_is_the_first_content_chunk(serve):
    res = openai_load.run_load(serve(Script(hold=0.2)), clients=1, requests=2, max_tokens=5)
    for r in res.results:
        assert FIRST_TOKEN_DELAY <= r.ttft_s < r.total_s
        assert r.total_s >= FIRST_TOKEN_DELAY + 0.2 * (5 - 2) / 4  # most of the hold follows the first token
    assert res.ttft(50) is not None and res.ttft(50) <= res.ttft(99)


def test_failures_are_counted_not_raised(serve):
    script = Script(fail_prompt=openai_load.PROMPTS[1])
    res = openai_load.run_load(serve(script), clients=2, requests=2, max_tokens=4)
    assert len(res.failures) == 1
    assert "500" in res.failures[0].error or "InternalServerError" in res.failures[0].error
    assert len(script.requests) == 4  # no retry hid it
    assert res.tokens == 3 * (4 - 1 + USAGE_EXTRA)


def test_a_stream_without_finish_reason_is_a_failure(serve):
    res = openai_load.run_load(serve(Script(no_finish=True)), clients=1, requests=1, max_tokens=4)
    assert len(res.failures) == 1 and "finish_reason" in res.failures[0].error


def test_cli_json_and_exit_status(serve):
    # One subprocess (importing openai is slow on a loaded machine): one request of two fails.
    url = serve(Script(fail_prompt=openai_load.PROMPTS[0]))
    p = subprocess.run([sys.executable, str(BENCH / "openai_load.py"), "--base-url", url, "--clients", "2",
                        "--requests", "1", "--max-tokens", "5", "--json"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1, p.stderr
    s = json.loads(p.stdout)
    assert (s["requests"], s["failed"], s["generated_tokens"], s["token_source"]) == (2, 1, 4 + USAGE_EXTRA, "usage")
    assert len(s["errors"]) == 1 and s["errors"][0].startswith("client 0 request 0: ")


def test_percentile_matches_numpy():
    rng = random.Random(14)
    for n in (1, 2, 3, 10, 57):
        samples = [rng.uniform(0.01, 3.0) for _ in range(n)]
        for q in (0, 50, 90, 99, 100):
            assert openai_load.percentile(samples, q) == pytest.approx(numpy.percentile(samples, q), rel=1e-12)
    assert openai_load.percentile([], 50) is None


def test_printable_escapes_control_characters():
    assert openai_load.printable("a\x1b[2Jb\x00\n") == "a\\x1b[2Jb\\x00\\n"
    assert len(openai_load.printable("x" * 1000, limit=10)) == 13
