"""A scripted OpenAI-style chat server for the bench/ tests (stdlib only, loopback).

It streams chat chunks as the OpenAI API documents them and records what it was sent,
so a test knows the true token counts, delays and concurrency: usage counts differ on
purpose from the number of content chunks, the first content chunk is held back by a
known delay, and a chosen prompt fails with HTTP 500.

Run as a program it stands in for `ferrox serve` (bench/serve_vs_llama_server.py
--ferrox): `fake_openai_server.py serve ... --port P ...` serves on 127.0.0.1:P with
GET /ready and GET /health, and exits with $FAKE_EXIT_ON_TERM (default 0) on SIGTERM.
"""
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
            if self.path in ("/ready", "/health"):
                self.send_json(200, {"status": "ok"})
            elif self.path == "/v1/models":
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
            counted = True

            # A request stops counting before the bytes that end its response go out:
            # once the client sees them it may send its next request at once, which
            # must not find this one still counted (that read 5 in flight for 4 clients).
            def uncount():
                nonlocal counted
                if counted:
                    counted = False
                    with script.lock:
                        script.in_flight -= 1

            try:
                if prompt == script.fail_prompt:
                    uncount()
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
                uncount()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
            finally:
                uncount()

        def write_event(self, obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

    return Handler



def main(argv: list[str]) -> int:
    port = int(argv[argv.index("--port") + 1])
    httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(Script()))
    httpd.daemon_threads = True
    code = int(os.environ.get("FAKE_EXIT_ON_TERM", "0"))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown).start())
    httpd.serve_forever()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
