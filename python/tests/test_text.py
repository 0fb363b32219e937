"""tokenize / detokenize / token_text against independent references: the
vocabulary as the GGUF specification reads it (conftest.gguf_string_array),
and the token ids `ferrox run --verbose-prompt` prints for the same text."""
from __future__ import annotations

import pytest

import ferrox
from conftest import cli_prompt_tokens, gguf_string_array, random_text


def gguf_tokens(path):
    return gguf_string_array(path, "tokenizer.ggml.tokens")


@pytest.mark.parametrize("which", ["tiny_llama_path", "gemma_path"])
def test_token_text_is_the_files_vocabulary_entry(which, request, rng):
    path = request.getfixturevalue(which)
    vocab = gguf_tokens(path)
    with ferrox.Model(path, n_ctx=64) as model:
        assert model.n_vocab == len(vocab)
        ids = rng.sample(range(len(vocab)), 200) + [0, len(vocab) - 1]
        for i in ids:
            assert model.token_text(i) == vocab[i], i
        with pytest.raises(ferrox.InvalidArgumentError, match=r"token is .*\[0, "):
            model.token_text(len(vocab))


def test_tokenize_gives_the_cli_prompt_tokens(tiny_llama, tiny_llama_path, rng):
    for _ in range(3):
        text = random_text(rng, rng.randint(5, 120))
        assert tiny_llama.tokenize(text) == cli_prompt_tokens(tiny_llama_path, "-p", text), text


def test_control_token_text_stays_text_unless_special_as_in_the_cli(tiny_llama, tiny_llama_path):
    text = "<s>hello</s> world"
    plain = tiny_llama.tokenize(text)
    special = tiny_llama.tokenize(text, special=True)
    assert plain == cli_prompt_tokens(tiny_llama_path, "-p", text)
    assert special == cli_prompt_tokens(tiny_llama_path, "-p", text, "--special")
    assert plain != special and tiny_llama.bos_token in special[1:]
    assert tiny_llama.bos_token not in plain[1:]


def test_gemma_tokenize_gives_the_cli_prompt_tokens(gemma, gemma_path, rng):
    text = random_text(rng, 200)
    assert gemma.tokenize(text) == cli_prompt_tokens(gemma_path, "-c", "512", "-p", text)


def test_detokenize_inverts_tokenize_and_keeps_bytes(tiny_llama, rng):
    for _ in range(5):
        text = random_text(rng, rng.randint(1, 200))
        ids = tiny_llama.tokenize(text, add_special=False)
        # SentencePiece's dummy prefix (llama-spm: add_space_prefix) comes back
        # as a leading space, as ferrox_detokenize writes it.
        assert tiny_llama.detokenize(ids) == " " + text
        assert tiny_llama.detokenize_bytes(ids) == (" " + text).encode()
    assert tiny_llama.tokenize("", add_special=False) == []
    assert tiny_llama.detokenize([]) == ""


def test_a_long_text_is_tokenized_past_the_first_buffer_guess(tiny_llama, rng):
    text = random_text(rng, 5000)
    ids = tiny_llama.tokenize(text)
    assert len(ids) > 100 and tiny_llama.detokenize(ids[1:]) == " " + text


def test_bad_token_ids_are_refused_by_index(tiny_llama):
    with pytest.raises(ferrox.InvalidArgumentError, match=r"tokens\[1\] is -1"):
        tiny_llama.detokenize([5, -1])
    with pytest.raises(ferrox.InvalidArgumentError, match=rf"tokens\[0\] is {tiny_llama.n_vocab}"):
        tiny_llama.detokenize([tiny_llama.n_vocab])
    with pytest.raises(TypeError, match=r"tokens\[0\] must be an int"):
        tiny_llama.detokenize(["a"])
    with pytest.raises(TypeError):
        tiny_llama.detokenize("abc")
    with pytest.raises(TypeError, match="text must be str or bytes"):
        tiny_llama.tokenize(123)
    with pytest.raises(ferrox.InvalidArgumentError, match="not valid Unicode at character 1"):
        tiny_llama.tokenize("a\ud800")
