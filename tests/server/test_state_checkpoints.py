"""Prefix reuse for a hybrid recurrent model through `ferrox serve` (issue 35 item 3).

An 8-turn append-only chat on tiny-qwen35 (Gated DeltaNet layers: a state that cannot
be rolled back), each request resending the whole history as OpenAI clients do, through
the `openai` client:
- with recurrent-state checkpoints (the default budget) each turn resumes at the previous
  prompt's end and computes only its new tokens (the previous answer and the new message:
  prompt_tokens - cached_tokens == new), wherever server/prefill_plan.h says that is exact;
  elsewhere from the last chunk end before it (computed <= new + 128);
- the answers (greedy) and their logprobs, bit for bit, equal those of a server with
  checkpoints off, which computes every prompt whole (and so breaks that bound: the test
  could fail); the scheduler's test (test_checkpoint_scheduler.cpp) injects the fault of
  resuming where the plan does not allow and catches it;
- with a budget of about one checkpoint and two conversations interleaved, the least
  recently used checkpoints are evicted, the bytes held stay within the budget, some
  turns fall back to computing the prompt whole, and the answers are still the same.
"""
from __future__ import annotations

import os
import pathlib
import random
import re
import shutil

import pytest

from conftest import running

openai = pytest.importorskip("openai")

TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
TEMPLATES = pathlib.Path(os.environ.get("FERROX_TEMPLATES",
                                        pathlib.Path.home() / ".cache/ferrox/templates"))
MODEL = TINY / "tiny-qwen35.gguf"
TEMPLATE = TEMPLATES / "Qwen-Qwen3-0.6B.jinja"
CHUNK = 128
FEW_ROWS = 16  # calls of up to 16 rows take the single-row path (server/prefill_plan.h)
BATCH = 512    # `ferrox serve`'s rows a call
TURNS = 8
WORDS = ("river stone lantern copper window garden signal harbor meadow orbit "
         "velvet pencil thunder silver market candle forest ladder engine violet").split()


def user_messages(seed: int) -> list[str]:
    """Random messages of 10 to 150 words: turns cross chunk boundaries at various points."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 150))) for _ in range(TURNS)]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    """tiny-qwen35 with an 8192-position training context (the generator writes 256, too
    short for an 8-turn chat): a copy with that one key changed in place."""
    if not MODEL.exists() or not TEMPLATE.exists():
        pytest.skip(f"no {MODEL} or {TEMPLATE} (tests/model/make_tiny_models.py)")
    gguf = pytest.importorskip("gguf")
    path = tmp_path_factory.mktemp("model") / MODEL.name
    shutil.copy(MODEL, path)
    reader = gguf.GGUFReader(path, "r+")
    reader.fields["qwen35.context_length"].parts[-1][0] = 8192
    del reader  # flushes the memory map
    return str(path)


def server_args(*extra: str) -> tuple[str, ...]:
    return ("--parallel", "4", "-c", "8192", "--chat-template", str(TEMPLATE), *extra)


class Chat:
    """One conversation: each turn sends the whole history plus a new user message."""

    def __init__(self, client, messages: list[str]):
        self.client, self.pending, self.history = client, list(messages), []
        self.turns: list[dict] = []  # per turn: prompt, cached, answer

    def turn(self) -> dict:
        self.history.append({"role": "user", "content": self.pending.pop(0)})
        r = self.client.chat.completions.create(
            model="m", messages=self.history, max_tokens=24, temperature=0, seed=7,
            logprobs=True)
        answer = r.choices[0].message.content or ""
        logprobs = [x.logprob for x in (r.choices[0].logprobs.content or [])]
        self.history.append({"role": "assistant", "content": answer})
        details = r.usage.prompt_tokens_details
        t = {"prompt": r.usage.prompt_tokens, "cached": (details.cached_tokens if details else 0) or 0,
             "answer": answer, "logprobs": logprobs}
        self.turns.append(t)
        return t


def client_for(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=120)


def replay(server, seeds: list[int]) -> list[Chat]:
    """The conversations of `seeds`, their turns interleaved."""
    client = client_for(server)
    chats = [Chat(client, user_messages(s)) for s in seeds]
    for _ in range(TURNS):
        for c in chats:
            c.turn()
    return chats


def recomputed(chat: Chat) -> list[tuple[int, int, int]]:
    """Per turn after the first: (computed, new tokens, cached)."""
    out = []
    for prev, t in zip(chat.turns, chat.turns[1:]):
        out.append((t["prompt"] - t["cached"], t["prompt"] - prev["prompt"], t["cached"]))
    return out


def exact_resume(at: int, size: int) -> bool:
    """Whether a `size`-token prompt may resume at a checkpoint taken at the end of an
    `at`-token prompt: every position from there computed on its from-scratch path
    (the rule of server/prefill_plan.h, written out again here as its specification)."""
    start = at // CHUNK * CHUNK
    end = min(size, start + CHUNK)
    if at == start:
        return True
    panel = end - start > FEW_ROWS
    if (at - start > FEW_ROWS) != panel:
        return False
    if (end - at > FEW_ROWS) == panel:
        return True
    if end == size:
        return False
    nxt = min(size, end + CHUNK)
    return nxt - end > FEW_ROWS and nxt - at <= BATCH


def checkpoint_size(log: str) -> int:
    m = re.search(r"recurrent-state checkpoints of (\d+) bytes", log)
    assert m, "the server logs its checkpoints' size:\n" + log
    return int(m.group(1))


@pytest.fixture(scope="module")
def reference(model):
    """The answers of a server that keeps no checkpoint: every prompt computed whole."""
    with running(*server_args("--checkpoint-memory", "0"), model=model) as server:
        assert "no recurrent-state checkpoints" in server.text_log()
        yield {seed: chat for seed, chat in zip((1, 2), replay(server, [1, 2]))}


def test_append_only_chat_resumes_from_checkpoints(reference, model):
    with running(*server_args(), model=model) as server:
        before = server.metrics()
        (chat,) = replay(server, [1])
        after = server.metrics()
        size = checkpoint_size(server.text_log())
    rows = recomputed(chat)
    print("turn: computed / new tokens / cached")
    for i, (computed, new, cached) in enumerate(rows, 2):
        print(f"  {i}: {computed} / {new} / {cached}")
    assert sum(t["prompt"] for t in chat.turns) > 4 * CHUNK, "the chat must span several chunks"
    exact = 0
    for prev, t, (computed, new, cached) in zip(chat.turns, chat.turns[1:], rows):
        if exact_resume(prev["prompt"], t["prompt"]):
            assert computed == new, rows  # resumed at the previous prompt's end
            exact += 1
        else:
            assert computed <= new + CHUNK, rows
    assert exact >= len(rows) // 2, rows
    # Every turn whose previous prompt held a whole chunk resumed from a checkpoint.
    for prev, (_, _, cached) in zip(chat.turns, rows):
        if prev["prompt"] > CHUNK + 1:
            assert cached >= CHUNK, rows
    assert rows[-1][2] >= 4 * CHUNK, rows
    # The same answers as a server that computes every prompt whole (greedy).
    assert [t["answer"] for t in chat.turns] == [t["answer"] for t in reference[1].turns]
    assert [t["logprobs"] for t in chat.turns] == [t["logprobs"] for t in reference[1].turns]
    assert all(t["logprobs"] for t in chat.turns)
    assert [t["prompt"] for t in chat.turns] == [t["prompt"] for t in reference[1].turns]
    # Not vacuous: without checkpoints the same replay computes every prompt whole.
    assert all(t["cached"] == 0 for t in reference[1].turns)
    assert any(t["prompt"] > n + CHUNK for t, (_, n, _) in zip(reference[1].turns[1:], rows))
    resumes = after["ferrox:state_checkpoint_resumes_total"] - before["ferrox:state_checkpoint_resumes_total"]
    assert resumes == sum(1 for t in chat.turns if t["cached"] > 0)
    assert after["ferrox:state_checkpoint_bytes"] <= 256 << 20
    assert after["ferrox:state_checkpoints_taken_total"] > 0 and size > 0


def test_tiny_budget_evicts_and_answers_stay_the_same(reference, model):
    # The size of one checkpoint, from a server that logs it, then a budget for about one.
    with running(*server_args(), model=model) as probe:
        size = checkpoint_size(probe.text_log())
    budget = size + 8 * 1024  # one state, its tokens (up to ~1.5k) and bookkeeping
    with running(*server_args("--checkpoint-memory", str(budget)), model=model) as server:
        client = client_for(server)
        chats = [Chat(client, user_messages(s)) for s in (1, 2)]
        held = []
        for _ in range(TURNS):
            for c in chats:
                c.turn()
                held.append(server.metrics()["ferrox:state_checkpoint_bytes"])
        m = server.metrics()
    later = [t["cached"] for c in chats for t in c.turns[1:]]
    print(f"budget {budget} bytes (one checkpoint {size}); held at most {max(held):.0f}; "
          f"{m['ferrox:state_checkpoints_evicted_total']:.0f} evicted; cached per turn {later}")
    assert max(held) <= budget, (held, budget)
    assert m["ferrox:state_checkpoints_evicted_total"] > 0
    for seed, c in zip((1, 2), chats):
        assert [t["answer"] for t in c.turns] == [t["answer"] for t in reference[seed].turns]
        assert [t["logprobs"] for t in c.turns] == [t["logprobs"] for t in reference[seed].turns]
    # Interleaved, each conversation's checkpoints are evicted by the other's: some
    # turns fall back to computing the prompt whole.
    assert any(x == 0 for x in later), later
