"""`ferrox serve` against the official `openai` Python client and curl (issue 14).

What the server says is checked against what it must equal: the same
request streamed and not, the same seed twice, a stop string cut where the
unstopped text has it, usage against the tokens /tokenize counts and (when
llama-cpp-python is installed) the token ids llama.cpp's own tokenizer gives.
"""
from __future__ import annotations

import json
import math
import subprocess

import pytest

from conftest import MODEL, running

openai = pytest.importorskip("openai")

CHAT = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three colours."}]


def client(server, **kw):
    return openai.OpenAI(base_url=server.base + "/v1", api_key=kw.pop("api_key", "none"),
                         max_retries=0, **kw)


def test_models_lists_the_served_file(server):
    models = client(server).models.list()
    assert [m.id for m in models.data] == ["gemma-3-270m-q4_k_m.gguf"]


def test_chat_streamed_equals_not_streamed(server):
    c = client(server)
    whole = c.chat.completions.create(model="x", messages=CHAT, max_tokens=24, temperature=0)
    assert whole.choices[0].finish_reason in ("stop", "length")
    text = whole.choices[0].message.content
    assert text
    pieces, usage, finish = [], None, None
    for chunk in c.chat.completions.create(model="x", messages=CHAT, max_tokens=24, temperature=0,
                                           stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            pieces.append(ch.delta.content or "")
            finish = ch.finish_reason or finish
    assert "".join(pieces) == text
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_length_finish_counts_max_tokens(server):
    r = client(server).completions.create(model="x", prompt="Once upon a time", max_tokens=7,
                                          temperature=0)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 7
    # The prompt's count is what /tokenize says, with BOS.
    status, tok = server.post("/tokenize", {"content": "Once upon a time", "add_special": True})
    assert status == 200
    assert r.usage.prompt_tokens == len(tok["tokens"])


def test_stop_string_cuts_the_text(server):
    c = client(server)
    full = c.completions.create(model="x", prompt="Count: one, two, three,", max_tokens=24,
                                temperature=0).choices[0].text
    assert len(full) > 8, full
    stop = full[4:7]  # a stop string that starts inside the generated text
    cut = full[: full.index(stop)]
    for stream in (False, True):
        if stream:
            parts, finish = [], None
            for chunk in c.completions.create(model="x", prompt="Count: one, two, three,",
                                              max_tokens=24, temperature=0, stop=[stop, "\u00a7\u00a7"],
                                              stream=True):
                parts.append(chunk.choices[0].text)
                finish = chunk.choices[0].finish_reason or finish
            text = "".join(parts)
        else:
            r = c.completions.create(model="x", prompt="Count: one, two, three,", max_tokens=24,
                                     temperature=0, stop=stop)
            text, finish = r.choices[0].text, r.choices[0].finish_reason
        assert text == cut
        assert finish == "stop"


def test_seed_reproduces_a_sampled_answer(server):
    c = client(server)
    ask = dict(model="x", messages=[{"role": "user", "content": "Write a word."}], max_tokens=16,
               temperature=1.0, top_p=1.0)
    a = c.chat.completions.create(seed=1234, **ask).choices[0].message.content
    b = c.chat.completions.create(seed=1234, **ask).choices[0].message.content
    assert a == b
    others = {c.chat.completions.create(seed=s, **ask).choices[0].message.content
              for s in (1, 2, 3)}
    assert len(others | {a}) > 1, "four seeds gave one text: the seed is not used"


def test_logprobs_are_a_distribution(server):
    r = client(server).chat.completions.create(model="x", messages=CHAT, max_tokens=5,
                                               temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        tops = [t.logprob for t in entry.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        assert sum(math.exp(t) for t in tops) <= 1.0 + 1e-4
        # Greedy: the chosen token is the most likely one.
        assert entry.logprob == pytest.approx(tops[0], abs=1e-5)
        assert entry.token == entry.top_logprobs[0].token


def test_unsupported_fields_are_refused_by_name(server):
    c = client(server)
    # Gemma 3's template renders no tools: refused, naming the field and the family.
    for extra, name in (({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
                        ({"n": 2}, "n"),
                        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema")):
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="x", messages=CHAT, max_tokens=2, **extra)
        assert name in str(e.value)
    status, body = server.post("/v1/chat/completions",
                               {"messages": CHAT, "max_tokens": 2, "frobnicate": 1})
    assert status == 400 and "'frobnicate'" in body["error"]["message"]
    status, body = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})
    assert status == 400 and "messages[0].content[0].type" in body["error"]["message"]


def test_limits_and_malformed_json(server):
    status, body = server.post("/v1/completions", {"prompt": "hi", "max_tokens": 100000})
    assert status == 400 and "max_tokens" in body["error"]["message"]
    status, body = server.post("/v1/completions", b'{"prompt": "hi", "max_tokens": ')
    assert status == 400 and "malformed JSON" in body["error"]["message"]
    status, body = server.post("/v1/completions", b"[" * 5000 + b"]" * 5000)
    assert status == 400 and "nested" in body["error"]["message"]
    status, _ = server.post("/v1/nothing", {})
    assert status == 404


def test_user_text_never_becomes_a_control_token(server):
    # "<end_of_turn>" typed by a user stays text: more than one token, not the control id.
    status, tok = server.post("/tokenize", {"content": "<end_of_turn>"})
    assert status == 200
    assert len(tok["tokens"]) > 1
    status, applied = server.post("/apply-template", {"messages": [
        {"role": "user", "content": "hi <end_of_turn>"}]})
    assert status == 200 and "<start_of_turn>user" in applied["prompt"]


def test_tokenize_matches_llama_cpp(server):
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(MODEL, vocab_only=True, verbose=False)
    for text in ("Hello, world!", "  spaces\tand\nnewlines", "naïve café 東京 🙂", "x" * 300):
        status, tok = server.post("/tokenize", {"content": text, "add_special": True})
        assert status == 200
        assert tok["tokens"] == llm.tokenize(text.encode(), add_bos=True, special=False), text
        status, back = server.post("/detokenize", {"tokens": tok["tokens"][1:]})
        assert back["content"] == text


def test_request_id_is_echoed_and_curl_works(server):
    out = subprocess.run(
        ["curl", "-s", "-i", "-H", "X-Request-Id: abc-123", "-H", "Content-Type: application/json",
         "-d", json.dumps({"prompt": "Hi", "max_tokens": 3, "temperature": 0}),
         server.base + "/v1/completions"], capture_output=True, timeout=60)
    head, _, body = out.stdout.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200")
    assert "X-Request-Id: abc-123" in head
    assert json.loads(body)["usage"]["completion_tokens"] == 3
    line = "request abc-123 POST /v1/completions -> 200"
    assert line in server.log_with(line)


def test_api_keys(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# ops\nsecret-one\nsecret-two\n")
    with running("--api-key-file", str(keys)) as s:
        assert s.get("/health")[0] == 200
        assert s.get("/ready")[0] == 200
        assert s.get("/v1/models")[0] == 401
        assert s.get("/metrics")[0] == 401
        assert s.get("/v1/models", headers={"Authorization": "Bearer secret-on"})[0] == 401
        assert s.get("/v1/models", headers={"Authorization": "Bearer secret-two"})[0] == 200
        with pytest.raises(openai.AuthenticationError):
            client(s, api_key="wrong").models.list()
        assert client(s, api_key="secret-one").models.list().data
