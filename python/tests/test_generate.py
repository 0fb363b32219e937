"""generate / chat / batched against `ferrox run`: the same prompt, settings and
seed give the same text and tokens (the CLI runs the same loop over ferrox.h)."""
from __future__ import annotations

import pytest

import ferrox
from conftest import cli_prompt_tokens, cli_run_json, cli_text, random_text


def test_seeded_generate_equals_ferrox_run(tiny_llama, tiny_llama_path, rng):
    prompt = random_text(rng, 40)
    seed = rng.randrange(1 << 32)
    ours = tiny_llama.generate(prompt, max_tokens=24, seed=seed)
    ref = cli_run_json(tiny_llama_path, "-p", prompt, "-n", "24", "--seed", str(seed))
    assert ours.tokens == ref["tokens"]
    assert cli_text(ours) == ref["text"]
    assert ours.prompt_tokens == ref["prompt_tokens"]
    # A different seed draws something else (the seed reaches the sampler).
    other = tiny_llama.generate(prompt, max_tokens=24, seed=seed + 1)
    assert other.tokens != ours.tokens


def test_sampler_settings_and_stop_strings_equal_ferrox_run(tiny_llama, tiny_llama_path, rng):
    prompt = random_text(rng, 30)
    seed = rng.randrange(1 << 32)
    greedy = tiny_llama.generate(prompt, max_tokens=16, temperature=0)
    ref = cli_run_json(tiny_llama_path, "-p", prompt, "-n", "16", "--temp", "0")
    assert greedy.tokens == ref["tokens"] and cli_text(greedy) == ref["text"]
    settings = dict(temperature=1.3, top_k=7, top_p=0.8, min_p=0.02, repeat_penalty=1.2,
                    repeat_last_n=16)
    ours = tiny_llama.generate(prompt, max_tokens=20, seed=seed, **settings)
    ref = cli_run_json(tiny_llama_path, "-p", prompt, "-n", "20", "--seed", str(seed), "--temp",
                       "1.3", "--top-k", "7", "--top-p", "0.8", "--min-p", "0.02",
                       "--repeat-penalty", "1.2", "--repeat-last-n", "16")
    assert ours.tokens == ref["tokens"] and cli_text(ours) == ref["text"]
    # A stop string taken from the second half of that text cuts it where the CLI does.
    data = ours.text_bytes
    starts = [i for i in range(len(data) // 2, len(data) - 3)
              if data[i] != ord("-") and all(0x21 <= b < 0x7F for b in data[i:i + 3])]
    assert starts, data  # 20 tokens of a 32000-piece vocabulary: some ASCII
    stop = data[starts[0]:starts[0] + 3].decode()
    cut = tiny_llama.generate(prompt, max_tokens=20, seed=seed, stop=stop, **settings)
    ref_cut = cli_run_json(tiny_llama_path, "-p", prompt, "-n", "20", "--seed", str(seed),
                           "--temp", "1.3", "--top-k", "7", "--top-p", "0.8", "--min-p",
                           "0.02", "--repeat-penalty", "1.2", "--repeat-last-n", "16",
                           "--stop", stop)
    assert cli_text(cut) == ref_cut["text"] and stop.encode() not in cut.text_bytes
    assert cut.finish_reason == "stop" and len(cut.text_bytes) < len(data)


def test_the_prompt_is_in_the_penalties_history_as_in_ferrox_run(tiny_llama, tiny_llama_path, rng):
    # Every token kept (no top-k/p, min-p): a penalty on the prompt's tokens
    # moves the whole distribution, so each seeded draw depends on whether the
    # prompt is in the sampler's history; the CLI accepts it before the first draw.
    prompt = random_text(rng, 200)
    seed = rng.randrange(1 << 32)
    settings = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_last_n=64)
    ours = tiny_llama.generate(prompt, max_tokens=12, seed=seed, repeat_penalty=1.5, **settings)
    ref = cli_run_json(tiny_llama_path, "-p", prompt, "-n", "12", "--seed", str(seed), "--temp",
                       "1", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--repeat-penalty",
                       "1.5", "--repeat-last-n", "64")
    assert ours.tokens == ref["tokens"]
    plain = tiny_llama.generate(prompt, max_tokens=12, seed=seed, repeat_penalty=1.0, **settings)
    assert plain.tokens != ours.tokens  # the penalty acts


def test_gemma_seeded_generate_equals_ferrox_run(gemma, gemma_path):
    prompt = "The three most common elements in the universe are"
    ours = gemma.generate(prompt, max_tokens=24, seed=7)
    ref = cli_run_json(gemma_path, "-c", "512", "-p", prompt, "-n", "24", "--seed", "7")
    assert cli_text(ours) == ref["text"] and ours.tokens == ref["tokens"]


def test_the_stream_is_the_text_in_pieces(tiny_llama, rng):
    prompt = random_text(rng, 30)
    whole = tiny_llama.generate(prompt, max_tokens=30, seed=3)
    with tiny_llama.generate(prompt, max_tokens=30, seed=3, stream=True) as stream:
        pieces = list(stream)
    assert "".join(pieces) == whole.text and len(pieces) > 1
    assert stream.completion is not None and stream.completion.tokens == whole.tokens
    assert all(isinstance(p, str) and p for p in pieces)


def test_max_tokens_and_the_end_of_generation_token_end_it(tiny_llama, rng):
    prompt = random_text(rng, 20)
    c = tiny_llama.generate(prompt, max_tokens=5, temperature=0)
    assert len(c.tokens) == 5 and c.finish_reason == "length"
    # A bias that makes EOS the only choice: the first draw ends the text.
    eos = tiny_llama.eos_token
    c = tiny_llama.generate(prompt, max_tokens=5, temperature=0, logit_bias={eos: 1e9})
    assert c.tokens == [] and c.text == "" and c.finish_reason == "stop"
    c = tiny_llama.generate(prompt, max_tokens=0)
    assert c.tokens == [] and c.finish_reason == "length"
    # Past the context's end the budget is cut, as `ferrox run -n` cuts it.
    ids = tiny_llama.tokenize(prompt)
    c = tiny_llama.generate(prompt, max_tokens=10_000, temperature=0,
                            logit_bias={eos: float("-inf")})
    assert len(c.tokens) == tiny_llama.n_ctx - len(ids) and c.finish_reason == "length"


def test_chat_renders_as_ferrox_run_chat_and_generates_the_same(tiny_qwen2_path, rng):
    content = random_text(rng, 40) + " <|im_end|>"
    with ferrox.Model(tiny_qwen2_path, n_threads=2) as model:
        prompt = model.apply_chat_template([{"role": "user", "content": content}])
        assert prompt.tokens == cli_prompt_tokens(tiny_qwen2_path, "--chat", "-p", content)
        assert prompt.template == "tokenizer.chat_template"
        assert "".join(s for s, _ in prompt.segments) == prompt.text
        # The client's "<|im_end|>" is text; the template's is the control token.
        [im_start] = model.tokenize("<|im_start|>", add_special=False, special=True)
        [im_end] = model.tokenize("<|im_end|>", add_special=False, special=True)
        # Every turn the template wrote ends with its <|im_end|> but the opened
        # assistant turn; the client's "<|im_end|>" is text, never that token.
        assert prompt.tokens.count(im_end) == prompt.tokens.count(im_start) - 1
        assert any(content in s and not special for s, special in prompt.segments)
        ours = model.chat([{"role": "user", "content": content}], max_tokens=16, seed=11)
        ref = cli_run_json(tiny_qwen2_path, "--chat", "-p", content, "-n", "16", "--seed", "11")
        assert cli_text(ours) == ref["text"] and ours.tokens == ref["tokens"]


def test_gemma_chat_equals_ferrox_run_chat(gemma, gemma_path):
    messages = [{"role": "user", "content": "Name a colour."}]
    ours = gemma.chat(messages, max_tokens=12, seed=5)
    ref = cli_run_json(gemma_path, "-c", "512", "--chat", "-p", "Name a colour.", "-n", "12",
                       "--seed", "5")
    assert cli_text(ours) == ref["text"] and ours.tokens == ref["tokens"]


def test_batched_sequences_get_what_each_gets_alone(tiny_llama, rng):
    prompts = [random_text(rng, rng.randint(5, 60)) for _ in range(4)]
    seeds = [rng.randrange(1 << 32) for _ in prompts]
    together = tiny_llama.batched(prompts, max_tokens=12, seed=seeds, n_ctx=256)
    alone = [tiny_llama.generate(p, max_tokens=12, seed=s) for p, s in zip(prompts, seeds)]
    assert [c.tokens for c in together] == [c.tokens for c in alone]
    assert [c.text for c in together] == [c.text for c in alone]


def test_context_eval_logits_and_sequence_operations(tiny_llama, rng):
    ids = tiny_llama.tokenize(random_text(rng, 40))
    with tiny_llama.context(n_ctx=128, n_seq=2) as ctx:
        ctx.eval(ids, seq=0)
        first = ctx.logits()
        assert len(first) == tiny_llama.n_vocab
        assert ctx.pos_range(0) == (0, len(ids) - 1) and ctx.pos_range(1) == (-1, -1)
        assert ctx.kv_usage() == (len(ids), 128)
        ctx.copy(0, 1)  # shares cells: none taken
        assert ctx.kv_usage()[0] == len(ids)
        saved = ctx.save_state(0)
        ctx.clear()
        assert ctx.kv_usage()[0] == 0
        ctx.restore_state(0, saved)
        assert ctx.pos_range(0) == (0, len(ids) - 1)
        # The restored cache continues exactly as the original one would.
        ctx.eval([ids[-1]], seq=0)
        again = ctx.logits()
        ctx.remove(0, len(ids))
        ctx.eval([ids[-1]], seq=0)
        assert list(ctx.logits()) == list(again)
        assert list(first) != list(again)


def test_a_rewound_checkpoint_continues_as_the_uninterrupted_run(rng):
    """API 0.9 on tiny-qwen35: 20 tokens, a checkpoint, 30 of another branch, the rewind,
    then the rest in one call of more than 16 rows: the logits of the run that never
    branched, bit for bit; a checkpoint of another history gives others."""
    from conftest import TINY, need

    with ferrox.Model(need(TINY / "tiny-qwen35.gguf"), n_threads=2) as model:
        assert model.is_recurrent
        ids = [rng.randrange(3, 200) for _ in range(60)]
        branch = [rng.randrange(3, 200) for _ in range(30)]
        with model.context(n_ctx=128) as ctx:
            ctx.eval(ids[:20])
            ctx.eval(ids[20:])
            want = list(ctx.logits())
            ctx.clear()
            ctx.eval(ids[:20])
            ckpt = ctx.checkpoint(0)
            ctx.eval(branch)
            assert ctx.pos_range(0) == (0, 49)
            with pytest.raises(ferrox.InvalidArgumentError):
                ctx.rewind(0, ckpt[:-1])  # truncated: refused, nothing changed
            ctx.rewind(0, ckpt)
            assert ctx.pos_range(0) == (0, 19)
            ctx.eval(ids[20:])
            assert list(ctx.logits()) == want
            ctx.clear()
            ctx.eval([ids[0] + 1] + ids[1:20])
            other = ctx.checkpoint(0)
            ctx.clear()
            ctx.eval(ids[:20])
            ctx.rewind(0, other)
            ctx.eval(ids[20:])
            assert list(ctx.logits()) != want


def test_the_capacity_plan_and_kernel_report_are_dicts(tiny_llama):
    plan = tiny_llama.capacity
    assert plan["total_mib"] == pytest.approx(
        plan["weights_mib"] + plan["kv_cache_mib"] + plan["scratch_mib"], abs=0.15)
    assert 0 < plan["total_mib"] <= plan["available_mib"]
    tiny_llama.generate("a", max_tokens=2)
    report = tiny_llama.kernel_report()
    calls, fallback = tiny_llama.kernel_calls()
    assert report["calls"] <= calls and sum(k["calls"] for k in report["kernels"]) == report["calls"]
    assert {k["backend"] for k in report["kernels"]} == {"cpu"}
    assert tiny_llama.residency == {"resident": False, "backend": "",
                                    "reason": tiny_llama.residency["reason"]}
    assert tiny_llama.metadata("general.architecture") == tiny_llama.arch == "llama"


def test_kv_type_v_gives_values_their_own_kind(tiny_llama_path):
    # K q8_0 over V f16 (API 0.9's kv_value_kind): the plan counts each cache in its
    # kind, between an all-q8_0 and an all-f16 cache (34 + 64 against 2 x 34 and
    # 2 x 64 bytes per 32 elements of K and of V), and the kernels name the pair.
    kv = {}
    for k, v in (("q8_0", None), ("q8_0", "f16"), ("f16", None)):
        with ferrox.Model(tiny_llama_path, n_ctx=16384, kv_type=k, kv_type_v=v) as model:
            kv[(k, v)] = model.capacity["kv_cache_mib"]
            if v:
                model.generate("a", max_tokens=2)
                kernels = {k["detail"] for k in model.kernel_report()["kernels"]}
                assert "cpu.attention.k_q8_0.v_f16" in kernels, kernels
    assert kv[("q8_0", "f16")] == pytest.approx(kv[("f16", None)] * (34 + 64) / 128, abs=0.1), kv
    assert kv[("q8_0", None)] < kv[("q8_0", "f16")] < kv[("f16", None)], kv


def test_openai_shaped_messages_render_as_role_content_pairs(tiny_qwen2_path, rng):
    # A message with more than role and content (here a "name", which the
    # ChatML template does not print) goes to the engine as OpenAI JSON
    # (messages_json); plain ones as ferrox_chat_message pairs: one renderer,
    # the same prompt.
    words = [random_text(rng, 20), random_text(rng, 20)]
    with ferrox.Model(tiny_qwen2_path, n_ctx=256) as model:
        pairs = model.apply_chat_template(
            [{"role": "system", "content": words[0]}, {"role": "user", "content": words[1]}])
        parts = model.apply_chat_template(
            [{"role": "system", "content": words[0], "name": "a"},
             {"role": "user", "content": words[1], "name": "b"}])
        assert parts.text == pairs.text and parts.tokens == pairs.tokens
        assert words[0] in pairs.text and words[1] in pairs.text
        no_prompt = model.apply_chat_template([{"role": "user", "content": words[1]}],
                                              add_generation_prompt=False)
        assert not no_prompt.text.rstrip().endswith("assistant")


def test_profile_metadata_and_state_files(tiny_llama, tmp_path, rng):
    ids = tiny_llama.tokenize(random_text(rng, 30))
    with tiny_llama.context(n_ctx=64, profile=True) as ctx:
        ctx.eval(ids)
        profile = ctx.profile(reset=True)
        assert profile["nanoseconds"] == sum(op["nanoseconds"] for op in profile["ops"]) > 0
        assert ctx.profile()["ops"] == []
        ctx.save_state_file(0, tmp_path / "seq0.state")
        expected = ctx.logits()
        ctx.clear()
        ctx.restore_state_file(0, tmp_path / "seq0.state")
        assert ctx.pos_range(0) == (0, len(ids) - 1)
    with tiny_llama.context(n_ctx=64) as plain:
        with pytest.raises(ferrox.InvalidArgumentError):
            plain.profile()
        with pytest.raises(ferrox.FerroxError) as e:
            plain.restore_state_file(0, tmp_path / "absent.state")
        assert "absent.state" in e.value.message
    assert len(expected) == tiny_llama.n_vocab
    with pytest.raises(ferrox.InvalidArgumentError, match="no.such.key"):
        tiny_llama.metadata("no.such.key")
    assert int(tiny_llama.metadata("llama.block_count")) == tiny_llama.n_layer
