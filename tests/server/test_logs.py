"""`ferrox serve --log-format json` (issue 38): every stderr line is one JSON object, and each
API request is one record of its own fields, never its prompt (docs/server.md, "Logs").

The figures in a record are checked against what the client got (`usage`) and against
each other: queue + prefill is the time to the first token, and the three phases fit in
the total.
"""
from __future__ import annotations

import json
import re
import socket

from conftest import running

PROMPT = "A secret prompt about lighthouses"
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TIMES = ("queue_ms", "prefill_ms", "decode_ms", "ttft_ms", "total_ms")


def raw_get(port: int, path: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        while s.recv(4096):
            pass


def test_every_line_is_json_and_requests_are_records():
    with running("--log-format", "json", "--parallel", "2", "-c", "1024") as s:
        status, done = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 5, "temperature": 0},
                              headers={"X-Request-Id": "rec-done"})
        assert status == 200, done
        status, refused = s.post("/v1/chat/completions", {"messages": "not a list"},
                                 headers={"X-Request-Id": "rec-refused"})
        assert status == 400, refused
        raw_get(s.port, b"/v1/\xff\xfered")  # a path that is not UTF-8
        s.log_with('"rec-refused"')
    lines = [line for line in s.text_log().splitlines() if line.strip()]
    objects = [json.loads(line) for line in lines]  # each line whole JSON, or this raises
    assert len(objects) >= 4  # the start-up lines, three requests, the drain
    for o in objects:
        assert ISO_TIME.match(o["time"]) and o["level"] in ("debug", "info", "warning", "error"), o
        assert ("msg" in o) != (o.get("event") == "request"), o
    records = {o["id"]: o for o in objects if o.get("event") == "request"}

    rec = records["rec-done"]
    assert (rec["method"], rec["path"], rec["status"]) == ("POST", "/v1/completions", 200)
    assert rec["model"] and rec["finish_reason"] == "length"
    assert rec["prompt_tokens"] == done["usage"]["prompt_tokens"]
    assert rec["generated_tokens"] == done["usage"]["completion_tokens"] == 5
    assert 0 <= rec["cached_tokens"] <= rec["prompt_tokens"]
    assert all(isinstance(rec[k], (int, float)) and rec[k] >= 0 for k in TIMES), rec
    assert abs(rec["queue_ms"] + rec["prefill_ms"] - rec["ttft_ms"]) < 0.01, rec
    assert rec["queue_ms"] + rec["prefill_ms"] + rec["decode_ms"] <= rec["total_ms"] + 0.01, rec

    rec = records["rec-refused"]
    assert rec["status"] == 400 and rec["finish_reason"] is None and rec["generated_tokens"] == 0
    assert all(rec[k] is None for k in ("queue_ms", "prefill_ms", "decode_ms", "ttft_ms")), rec
    assert rec["total_ms"] >= 0

    odd = [o for o in records.values() if o["method"] == "GET" and o["path"].startswith("/v1/")]
    assert odd and odd[0]["path"] == "/v1/\\xff\\xfered", odd  # escaped, and the line still JSON

    log = s.text_log()
    assert PROMPT not in log and "lighthouses" not in log


def test_the_text_format_stays_lines():
    with running("--parallel", "1", "-c", "512") as s:
        status, _ = s.post("/v1/completions", {"prompt": "Hi", "max_tokens": 2},
                           headers={"X-Request-Id": "txt-1"})
        assert status == 200
        line = "request txt-1 POST /v1/completions -> 200: prompt"
        assert line in s.log_with(line)
    assert not any(line.startswith("{") for line in s.text_log().splitlines())


def test_a_bad_log_format_is_a_usage_error():
    import subprocess
    from conftest import FERROX, MODEL
    r = subprocess.run([FERROX, "serve", "-m", MODEL, "--log-format", "xml"], capture_output=True, text=True,
                       timeout=60, env={"XDG_CONFIG_HOME": "/nonexistent", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "--log-format" in r.stderr, r.stderr
