#!/usr/bin/env python3
"""A load generator for OpenAI-compatible servers, through the official `openai` package.

`clients` threads start together; each sends `requests` streaming chat completions one
after another (prompts varied across clients and requests) and reads every chunk. Per
request it records the time to the first content token (TTFT, from sending the request),
the total time and the generated tokens. Generated tokens come from the `usage` the
server reports at the end of the stream (stream_options.include_usage); a server that
sends none is counted by its content chunks instead (one token per chunk, which is
what llama-server and ferrox send), and the result says which was used.

Aggregate throughput = all generated tokens / wall time from the common start to the
last response. Percentiles interpolate linearly between the sorted samples (with 2
samples, p99 is almost the larger one).

Library: run_load(base_url, clients=4, requests=2, max_tokens=64) -> LoadResult.
CLI:     bench/openai_load.py --base-url http://127.0.0.1:8080/v1 --clients 4 \
             --requests 2 --max-tokens 64 [--model ID] [--api-key K] [--json]
Exit status 0 when every request succeeded, 1 otherwise.
"""
import argparse
import dataclasses
import json
import sys
import threading
import time

import openai

# Prompts that ask for more text than max_tokens allows, so that both engines of a
# comparison generate full-length answers; varied in topic and length so that the
# requests share only the chat template's prefix.
PROMPTS = [
    "Write a long story about a lighthouse keeper who finds a message in a bottle.",
    "Explain in detail how a steam engine works, step by step.",
    "Describe a walk through a busy market in a coastal town at dawn.",
    "List twenty ideas for a science fair project and explain each one.",
    "Tell me everything you know about the history of the bicycle.",
    "Write a letter from a sailor to his family, describing a storm at sea.",
    "Explain why the sky is blue, as you would to a curious ten-year-old, with examples.",
    "Describe the life cycle of a star, from a cloud of gas to its end.",
    "Write a detailed recipe for bread, with every step and why it matters.",
    "Imagine a city on Mars in the year 2300 and describe a day in the life of a child there.",
    "Compare trains, planes and ships as ways to travel, with their advantages and drawbacks.",
    "Write a dialogue between a cat and a dog arguing about who is the better pet.",
    "Explain how a computer adds two numbers, from transistors up to the program.",
    "Describe the four seasons in a forest, one paragraph each, with many details.",
    "Write the opening chapter of a mystery novel set in a snowed-in mountain hotel.",
    "Give a long, friendly introduction to the game of chess for a complete beginner.",
]


@dataclasses.dataclass
class RequestResult:
    client: int
    index: int
    ok: bool
    error: str = ""
    ttft_s: float | None = None  # time to the first content chunk
    total_s: float = 0.0
    tokens: int = 0
    token_source: str = ""  # "usage" or "chunks"
    finish_reason: str | None = None


def printable(text: str, limit: int = 300) -> str:
    """An error message as safe terminal text: control characters escaped, length bounded."""
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return out if len(out) <= limit else out[:limit] + "..."


def percentile(samples: list[float], q: float) -> float | None:
    """q in [0, 100], linear interpolation between closest ranks; None without samples."""
    if not samples:
        return None
    s = sorted(samples)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclasses.dataclass
class LoadResult:
    base_url: str
    model: str
    clients: int
    requests_per_client: int
    max_tokens: int
    wall_s: float
    results: list[RequestResult]

    @property
    def failures(self) -> list[RequestResult]:
        return [r for r in self.results if not r.ok]

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.results if r.ok)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def token_source(self) -> str:
        sources = {r.token_source for r in self.results if r.ok}
        return sources.pop() if len(sources) == 1 else ("mixed" if sources else "none")

    def decode_rate(self, q: float) -> float | None:
        """Per request: tokens after the first over the time after the first (prefill excluded)."""
        rates = [(r.tokens - 1) / (r.total_s - r.ttft_s) for r in self.results
                 if r.ok and r.ttft_s is not None and r.tokens > 1 and r.total_s > r.ttft_s]
        return percentile(rates, q)

    def ttft(self, q: float) -> float | None:
        return percentile([r.ttft_s for r in self.results if r.ok and r.ttft_s is not None], q)

    def summary(self) -> dict:
        return {
            "base_url": self.base_url, "model": self.model, "clients": self.clients,
            "requests_per_client": self.requests_per_client, "max_tokens": self.max_tokens,
            "requests": len(self.results), "failed": len(self.failures), "wall_s": self.wall_s,
            "generated_tokens": self.tokens, "token_source": self.token_source,
            "tokens_per_s": self.tokens_per_s, "ttft_p50_s": self.ttft(50), "ttft_p99_s": self.ttft(99),
            "decode_tokens_per_s_p50": self.decode_rate(50),
            "errors": [f"client {r.client} request {r.index}: {r.error}" for r in self.failures],
        }


def make_client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    # max_retries=0: a failed request is a failure to report, not one to hide.
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


def first_model(base_url: str, api_key: str = "none", timeout: float = 30.0) -> str:
    models = make_client(base_url, api_key, timeout).models.list().data
    if not models:
        raise RuntimeError(f"{base_url}/models lists no model")
    return models[0].id


def one_request(client: openai.OpenAI, model: str, prompt: str, max_tokens: int, temperature: float,
                seed: int, who: tuple[int, int], extra: dict | None = None) -> RequestResult:
    r = RequestResult(client=who[0], index=who[1], ok=False)
    chunks = 0
    usage_tokens = None
    start = time.perf_counter()
    try:
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
            temperature=temperature, seed=seed, stream=True, stream_options={"include_usage": True},
            **(extra or {}))
        for chunk in stream:
            if chunk.usage is not None:
                usage_tokens = chunk.usage.completion_tokens
            for choice in chunk.choices:
                # The first generated text of any kind: content, a tool call, reasoning.
                if choice.delta is not None and (choice.delta.content or choice.delta.tool_calls
                                                 or getattr(choice.delta, "reasoning_content", None)):
                    if r.ttft_s is None:
                        r.ttft_s = time.perf_counter() - start
                    chunks += 1
                if choice.finish_reason is not None:
                    r.finish_reason = choice.finish_reason
        r.total_s = time.perf_counter() - start
        if usage_tokens is not None:
            r.tokens, r.token_source = usage_tokens, "usage"
        else:
            r.tokens, r.token_source = chunks, "chunks"
        if r.finish_reason is None:
            r.error = "the stream ended without a finish_reason"
        else:
            r.ok = True
    except Exception as e:  # noqa: BLE001: every failure is reported, none stops the load
        r.total_s = time.perf_counter() - start
        r.error = printable(f"{type(e).__name__}: {e}")
    return r


def run_load(base_url: str, clients: int = 4, requests: int = 2, max_tokens: int = 64, model: str | None = None,
             api_key: str = "none", temperature: float = 0.0, timeout: float = 300.0,
             prompts: list[str] | None = None, extra: dict | None = None) -> LoadResult:
    """Runs the load once and returns every request's result (failures included, never raised).

    `extra`: more request fields for every request (response_format, tools, tool_choice)."""
    if clients < 1 or requests < 1 or max_tokens < 1:
        raise ValueError("clients, requests and max_tokens must be at least 1")
    prompts = prompts or PROMPTS
    model = model or first_model(base_url, api_key, timeout)
    http = [make_client(base_url, api_key, timeout) for _ in range(clients)]
    results: list[list[RequestResult]] = [[] for _ in range(clients)]
    start_line = threading.Barrier(clients + 1)

    def client_loop(c: int) -> None:
        start_line.wait()
        for i in range(requests):
            n = c * requests + i
            results[c].append(one_request(http[c], model, prompts[n % len(prompts)], max_tokens, temperature,
                                          seed=1000 + n, who=(c, i), extra=extra))

    threads = [threading.Thread(target=client_loop, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    start_line.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for h in http:
        h.close()
    return LoadResult(base_url=base_url, model=model, clients=clients, requests_per_client=requests,
                      max_tokens=max_tokens, wall_s=wall, results=[r for rs in results for r in rs])


def fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2, help="requests per client, one after another")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--model", help="model id (default: the first of GET /models)")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    try:
        res = run_load(a.base_url, a.clients, a.requests, a.max_tokens, a.model, a.api_key, a.temperature,
                       a.timeout)
    except (openai.OpenAIError, RuntimeError, ValueError) as e:
        print(f"openai_load: {e}", file=sys.stderr)
        return 1
    s = res.summary()
    if a.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"{s['clients']} clients x {s['requests_per_client']} requests, max_tokens {s['max_tokens']}: "
              f"{s['generated_tokens']} tokens (from {s['token_source']}) in {s['wall_s']:.2f} s = "
              f"{s['tokens_per_s']:.1f} tok/s; TTFT p50 {fmt_s(s['ttft_p50_s'])} s, p99 {fmt_s(s['ttft_p99_s'])} s; "
              f"{s['failed']} failed")
        for e in s["errors"]:
            print(f"  {e}", file=sys.stderr)
    return 0 if not res.failures else 1


if __name__ == "__main__":
    sys.exit(main())
