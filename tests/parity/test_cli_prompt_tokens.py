"""How the CLI turns a prompt into tokens, on the small llama of test_split_gguf:

- the prompt's text stays text: "<s>" typed into --prompt is not the BOS token,
  unless --special asks for it;
- the tokenizer is built before the weights: a file whose tokenizer ferrox
  refuses and whose weights are broken too is refused for its tokenizer.
"""
from __future__ import annotations

import re

import pytest

from test_split_gguf import ferrox, write_model


def prompt_tokens(model, *extra: str) -> list[int]:
    done = ferrox("logits", "-m", str(model), "--prompt", "<s>ab", "--out", str(model.parent / "l.f32"),
                  "-t", "1", "-c", "32", *extra)
    assert done.returncode == 0, done.stderr
    found = re.search(r"\(tokens: ([0-9,]+)\)", done.stderr)
    assert found, done.stderr
    return [int(t) for t in found.group(1).split(",")]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("cli") / "tiny.gguf")[0]


def test_special_token_text_in_a_prompt_stays_text_unless_special(model):
    plain = prompt_tokens(model)
    special = prompt_tokens(model, "--special")
    assert plain[0] == 1 and special[0] == 1  # BOS, added by the metadata's rule
    assert special[1] == 1, special  # "<s>" parsed: the BOS token again
    assert 1 not in plain[1:], plain  # "<s>" as text: its characters' tokens
    assert len(plain) > len(special)


def test_a_refused_tokenizer_stops_the_load_before_the_weights(tmp_path):
    broken = write_model(tmp_path / "rwkv.gguf", tokenizer_model="rwkv", drop=("blk.0.attn_q.weight",))[0]
    done = ferrox("logits", "-m", str(broken), "--tokens", "1,2", "--out", str(tmp_path / "l.f32"))
    assert done.returncode != 0
    assert "tokenizer.ggml.model 'rwkv'" in done.stderr, done.stderr
    assert "attn_q" not in done.stderr
