"""`ferrox serve`'s Responses and Messages dialects against the official
`openai` and `anthropic` Python SDKs (issue 34 item 4).

The SDKs are the reference for the wire format: their stream helpers
(`responses.stream`, `messages.stream`) rebuild the answer from the events
and raise on an event out of order or of an unknown shape. What the server
says is checked against what it must equal: at temperature 0 the same
conversation gives the same text and prompt tokens through Chat Completions,
Responses and Messages; a stream's deltas join to the whole answer; a stop
sequence cuts where the unstopped text has it.
"""
from __future__ import annotations

import json

import pytest

from conftest import running

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

SYSTEM = "You are terse."
QUESTION = "Name three colours."
CHAT = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
RESPONSE_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
                   "response.content_part.added", "response.output_text.delta",
                   "response.output_text.done", "response.content_part.done",
                   "response.output_item.done"]
# The anthropic SDK no longer types the sampling fields; the API still takes them.
GREEDY = {"temperature": 0}
MESSAGE_EVENTS = ["message_start", "content_block_start", "ping", "content_block_delta",
                  "content_block_stop", "message_delta", "message_stop"]


def oai(server, **kw):
    return openai.OpenAI(base_url=server.base + "/v1", api_key=kw.pop("api_key", "none"),
                         max_retries=0, **kw)


def claude(server, **kw):
    return anthropic.Anthropic(base_url=server.base, api_key=kw.pop("api_key", "none"),
                               max_retries=0, **kw)


def collapsed(types):
    """Event types with runs of one type (the deltas) counted once."""
    out = []
    for t in types:
        if not out or out[-1] != t:
            out.append(t)
    return out


@pytest.fixture(scope="module")
def chat_reference(server):
    """The Chat Completions answer the other dialects must repeat."""
    r = oai(server).chat.completions.create(model="x", messages=CHAT, max_tokens=40, temperature=0)
    assert r.choices[0].message.content
    return r


def test_responses_equals_chat_and_streams_the_same(server, chat_reference):
    c = oai(server)
    whole = c.responses.create(model="x", instructions=SYSTEM, input=QUESTION,
                               max_output_tokens=40, temperature=0)
    assert whole.object == "response" and whole.id.startswith("resp_")
    [item] = whole.output
    assert item.type == "message" and item.role == "assistant"
    text = item.content[0].text
    assert text == chat_reference.choices[0].message.content
    finished = chat_reference.choices[0].finish_reason == "stop"
    assert whole.status == ("completed" if finished else "incomplete")
    assert whole.usage.input_tokens == chat_reference.usage.prompt_tokens
    assert whole.usage.output_tokens == chat_reference.usage.completion_tokens
    assert whole.usage.total_tokens == whole.usage.input_tokens + whole.usage.output_tokens

    events = list(c.responses.create(model="x", instructions=SYSTEM, input=QUESTION,
                                     max_output_tokens=40, temperature=0, stream=True))
    types = [e.type for e in events]
    assert collapsed(types) == RESPONSE_EVENTS + ["response.completed" if finished
                                                  else "response.incomplete"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == text
    last = events[-1].response
    assert last.output[0].content[0].text == text
    assert last.usage.output_tokens == whole.usage.output_tokens


def test_responses_stream_helper_rebuilds_the_answer(server):
    # The SDK's helper keeps a snapshot from the events (each text delta
    # carries the text so far) and raises on a stream whose items, parts or
    # ids do not line up. (Gemma 3 270M, a base model, rarely ends a turn by
    # itself, so this answer ends at max_output_tokens.)
    c = oai(server)
    kw = dict(model="x", input=[{"role": "developer", "content": "Answer with one word."},
                                {"role": "user", "content": [{"type": "input_text",
                                                              "text": "Say hi."}]}],
              max_output_tokens=30, temperature=0)
    whole = c.responses.create(**kw)
    with c.responses.stream(**kw) as stream:
        events = list(stream)
    snapshots = [e.snapshot for e in events if e.type == "response.output_text.delta"]
    assert snapshots and snapshots[-1] == whole.output[0].content[0].text
    assert events[-1].type == f"response.{whole.status}"
    assert events[-1].response.output[0].content[0].text == snapshots[-1]


def test_responses_incomplete_at_max_output_tokens(server):
    r = oai(server).responses.create(model="x", input="Tell me a long story.",
                                     max_output_tokens=3, temperature=0)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.output[0].status == "incomplete"
    assert r.usage.output_tokens == 3


def test_responses_takes_a_conversation_back_as_input(server):
    c = oai(server)
    first = c.responses.create(model="x", input="Say hello.", max_output_tokens=8, temperature=0)
    # Stateless: the earlier output items go back as input, as the SDK gives them.
    history = [{"role": "user", "content": "Say hello."}] + \
              [item.model_dump(exclude_none=True) for item in first.output] + \
              [{"role": "user", "content": "Again."}]
    second = c.responses.create(model="x", input=history, max_output_tokens=8, temperature=0)
    chat = oai(server).chat.completions.create(
        model="x", max_tokens=8, temperature=0,
        messages=[{"role": "user", "content": "Say hello."},
                  {"role": "assistant", "content": first.output[0].content[0].text},
                  {"role": "user", "content": "Again."}])
    assert second.usage.input_tokens == chat.usage.prompt_tokens
    assert second.output[0].content[0].text == chat.choices[0].message.content


@pytest.mark.parametrize("kw, param", [
    (dict(store=True), "store"),
    (dict(previous_response_id="resp_1"), "previous_response_id"),
    (dict(tools=[{"type": "function", "name": "f", "parameters": {}}]), "tools"),
    (dict(text={"format": {"type": "xml"}}), "text.format.type"),
    (dict(reasoning={"effort": "extreme"}), "reasoning.effort"),
    (dict(temperature=3), "temperature"),
])
def test_responses_refusals_are_openai_shaped_and_name_the_field(server, kw, param):
    with pytest.raises(openai.BadRequestError) as e:
        oai(server).responses.create(model="x", input="hi", max_output_tokens=4, **kw)
    assert e.value.body["param"] == param
    assert e.value.body["message"].startswith(f"'{param}'")


def test_messages_equals_chat_and_streams_the_same(server, chat_reference):
    c = claude(server)
    whole = c.messages.create(model="x", max_tokens=40, system=SYSTEM, extra_body=GREEDY,
                              messages=[{"role": "user", "content": QUESTION}])
    assert whole.type == "message" and whole.id.startswith("msg_") and whole.role == "assistant"
    [block] = whole.content
    assert block.type == "text"
    assert block.text == chat_reference.choices[0].message.content
    finished = chat_reference.choices[0].finish_reason == "stop"
    assert whole.stop_reason == ("end_turn" if finished else "max_tokens")
    assert whole.stop_sequence is None
    assert whole.usage.input_tokens + whole.usage.cache_read_input_tokens == \
        chat_reference.usage.prompt_tokens
    assert whole.usage.output_tokens == chat_reference.usage.completion_tokens

    with c.messages.stream(model="x", max_tokens=40, system=[{"type": "text", "text": SYSTEM}],
                           extra_body=GREEDY,
                           messages=[{"role": "user", "content": QUESTION}]) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    assert streamed == block.text == final.content[0].text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == \
        chat_reference.usage.prompt_tokens

    raw = list(c.messages.create(model="x", max_tokens=40, system=SYSTEM, extra_body=GREEDY,
                                 messages=[{"role": "user", "content": QUESTION}], stream=True))
    # The SDK drops ping; the rest must come in Anthropic's order.
    assert collapsed(e.type for e in raw) == [t for t in MESSAGE_EVENTS if t != "ping"]


def test_messages_stop_sequence_cuts_the_text_and_is_named(server):
    c = claude(server)
    prompt = [{"role": "user", "content": "Count: one, two, three,"}]
    full = c.messages.create(model="x", max_tokens=24, extra_body=GREEDY, messages=prompt)
    text = full.content[0].text
    assert len(text) > 8, text
    stop = text[4:7]  # a stop sequence that starts inside the generated text
    cut = c.messages.create(model="x", max_tokens=24, extra_body=GREEDY, messages=prompt,
                            stop_sequences=["\u00a7\u00a7", stop])
    assert cut.stop_reason == "stop_sequence"
    assert cut.stop_sequence == stop
    assert cut.content[0].text == text[: text.index(stop)]


def test_messages_count_tokens_is_the_prompt_a_message_reads(server):
    c = claude(server)
    msgs = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    counted = c.messages.count_tokens(model="x", system=SYSTEM, messages=msgs)
    made = c.messages.create(model="x", max_tokens=2, system=SYSTEM, messages=msgs)
    assert counted.input_tokens == made.usage.input_tokens + made.usage.cache_read_input_tokens
    chat = oai(server).chat.completions.create(
        model="x", max_tokens=2, messages=[{"role": "system", "content": SYSTEM},
                                           {"role": "user", "content": "Hi."},
                                           {"role": "assistant", "content": "Hello."},
                                           {"role": "user", "content": QUESTION}])
    assert counted.input_tokens == chat.usage.prompt_tokens


def test_messages_continue_a_last_assistant_turn(server):
    c = claude(server)
    msgs = [{"role": "user", "content": "Count to ten."}]
    whole = c.messages.create(model="x", max_tokens=12, extra_body=GREEDY, messages=msgs)
    text = whole.content[0].text
    assert len(text) > 4, text
    head = text[:4]
    # Prefilled with the answer's own start, the model carries on where it was
    # (tokens may split differently at the seam, so only the prompt is compared).
    go_on = c.messages.create(model="x", max_tokens=4, extra_body=GREEDY,
                              messages=msgs + [{"role": "assistant", "content": head}])
    counted = c.messages.count_tokens(model="x", messages=msgs).input_tokens
    with_head = go_on.usage.input_tokens + go_on.usage.cache_read_input_tokens
    assert with_head > counted
    status, tok = server.post("/tokenize", {"content": head})
    assert status == 200
    assert with_head == counted + len(tok["tokens"])


@pytest.mark.parametrize("kw, words", [
    (dict(extra_body={"temperature": 1.5}), "'temperature' must be between 0 and 1"),
    (dict(tools=[{"name": "f", "input_schema": {"type": "object"}}]),
     "'tools': this model's chat template (generic family) has no tool calls"),
    (dict(messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}]}]),
     "'messages[0].content[0].type' 'image' is not supported by ferrox"),
    (dict(extra_body={"frequency_penalty": 1}), "'frequency_penalty'"),
])
def test_messages_refusals_are_anthropic_shaped(server, kw, words):
    kw.setdefault("messages", [{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError) as e:
        claude(server).messages.create(model="x", max_tokens=4, **kw)
    body = e.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith(words)


def test_errors_on_anthropic_paths_are_anthropic_shaped_elsewhere_openai(server):
    status, body = server.post("/v1/messages/batches", {})
    assert status == 404
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    status, raw = server.get("/v1/messages")
    assert status == 405
    assert json.loads(raw) == {"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "use POST"}}
    status, body = server.post("/v1/messages/count_tokens", {"messages": "x"})
    assert status == 400 and body["error"]["message"].startswith("'messages'")
    status, body = server.post("/v1/nothing", {})
    assert status == 404 and "type" not in body and body["error"]["code"] == 404
    status, body = server.post("/v1/responses", {"input": "hi", "max_output_tokens": 0})
    assert status == 400 and body["error"]["param"] == "max_output_tokens"


def test_x_api_key_is_accepted_and_a_wrong_key_is_401_in_each_shape(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("secret-one\n")
    with running("--api-key-file", str(keys), "--max-body-bytes", "4096") as s:
        msgs = [{"role": "user", "content": "hi"}]
        assert claude(s, api_key="secret-one").messages.count_tokens(
            model="x", messages=msgs).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError) as e:
            claude(s, api_key="secret-two").messages.count_tokens(model="x", messages=msgs)
        assert e.value.body["type"] == "error"
        assert e.value.body["error"]["type"] == "authentication_error"
        # Either header on any path; Bearer on Anthropic's paths too.
        assert s.post("/v1/responses", {"input": "hi", "max_output_tokens": 1},
                      headers={"x-api-key": "secret-one"})[0] == 200
        assert s.post("/v1/messages/count_tokens", {"messages": msgs},
                      headers={"Authorization": "Bearer secret-one"})[0] == 200
        with pytest.raises(openai.AuthenticationError) as e:
            oai(s, api_key="secret-two").responses.create(model="x", input="hi")
        assert e.value.body["type"] == "invalid_request_error"
        # The transport's own refusals (here a body past max_body_bytes) take
        # the path's shape too.
        big = [{"role": "user", "content": "x" * 5000}]
        with pytest.raises(anthropic.APIStatusError) as e:
            claude(s, api_key="secret-one").messages.count_tokens(model="x", messages=big)
        assert e.value.status_code == 413
        assert e.value.body["type"] == "error"
        assert e.value.body["error"]["type"] == "invalid_request_error"
        assert "max_body_bytes" in e.value.body["error"]["message"]
        with pytest.raises(openai.APIStatusError) as e:
            oai(s, api_key="secret-one").responses.create(model="x", input=big)
        assert e.value.status_code == 413 and "max_body_bytes" in e.value.body["message"]


def test_a_stream_cut_short_ends_in_each_dialect_s_error_event():
    with running("--request-timeout", "1", "--parallel", "1", "-c", "4096") as s:
        # A long prompt and a long answer: far more than a second of work, and
        # the stream's opening events go out before the first token.
        long = dict(model="x")
        words = "Repeat these words: " + "one two three four " * 300
        msgs = [{"role": "user", "content": words}, {"role": "assistant", "content": "one two"}]
        with pytest.raises(anthropic.APIStatusError) as e:
            for _ in claude(s).messages.create(max_tokens=1000, messages=msgs, stream=True,
                                               extra_body=GREEDY, **long):
                pass
        assert e.value.body["type"] == "error"
        assert e.value.body["error"]["type"] == "timeout_error"
        events = list(oai(s).responses.create(input=words, max_output_tokens=1000, stream=True,
                                              temperature=0, **long))
        # (An output item opens with its first text, which may not come in time.)
        assert collapsed(e.type for e in events)[:2] == RESPONSE_EVENTS[:2]
        assert events[-1].type == "response.failed"
        assert events[-1].response.status == "failed"
        assert events[-1].response.error.code == "server_error"
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        output = events[-1].response.output
        assert (output[0].content[0].text if output else "") == deltas
