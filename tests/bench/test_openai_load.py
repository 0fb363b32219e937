"""bench/openai_load.py against a scripted OpenAI-style SSE server on loopback.

The server (fake_openai_server.py: stdlib http.server, written for these tests) streams chat chunks the way the OpenAI
API documents them and records what it was sent, so each test knows the true token
counts, delays and concurrency without trusting the load generator: usage counts are
deliberately different from the number of content chunks, the first content chunk is
held back by a known delay, and some requests are made to fail.
"""
import json
import os
import pathlib
import random
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer

import numpy
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import openai_load  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from fake_openai_server import FIRST_TOKEN_DELAY, USAGE_EXTRA, Script, make_handler  # noqa: E402

FAKE_SERVER = pathlib.Path(__file__).resolve().parent / "fake_openai_server.py"


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


def run_smoke(tmp_path, exit_on_term):
    """serve_vs_llama_server.py --smoke with the fake server standing in for ferrox."""
    fake = tmp_path / "ferrox"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_SERVER} \"$@\"\n")
    fake.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")  # never opened by the fake
    env = dict(os.environ, FAKE_EXIT_ON_TERM=str(exit_on_term))
    return subprocess.run([sys.executable, str(BENCH / "serve_vs_llama_server.py"), "--smoke", "--ferrox", str(fake),
                           "--model", str(model)], capture_output=True, text=True, timeout=150, env=env)


def test_serve_bench_smoke_runs_the_server_and_prints_the_table(tmp_path):
    p = run_smoke(tmp_path, exit_on_term=0)
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if line.startswith("| 1 |") or line.startswith("| 4 |")]
    assert len(rows) == 2, p.stdout
    # 1 client x 2 requests and 4 x 2, max_tokens 8: 7 content chunks, usage 7 + 3 each.
    assert rows[0].split("|")[5].strip().startswith(str(2 * (7 + USAGE_EXTRA)))
    assert rows[1].split("|")[5].strip().startswith(str(8 * (7 + USAGE_EXTRA)))
    assert "tokens from usage" in p.stdout


def test_serve_bench_fails_when_ferrox_does_not_exit_0_after_sigterm(tmp_path):
    p = run_smoke(tmp_path, exit_on_term=3)
    assert p.returncode == 1
    assert "ferrox exited 3 after SIGTERM" in p.stderr
