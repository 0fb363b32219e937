"""`ferrox chat` and `run --chat` end to end on the tiny random models
(tests/model/make_tiny_models.py): the template the file carries, the built-in
fallback and its warning, --chat-template FILE|NAME, --verbose-prompt, the KV
cache kept across turns (only the new tokens prefilled), /clear, special-token
text in a message staying text, and a template error naming file and line."""
import os
import re
import subprocess
import sys
from pathlib import Path

import gguf
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import gguf_in_memory  # noqa: E402

FERROX = os.environ.get("FERROX_EXE", "")
TINY = Path(os.environ.get("FERROX_CACHE_DIR", Path.home() / ".cache" / "ferrox")) / "tiny-models"
QWEN = TINY / "tiny-qwen2.gguf"    # carries tokenizer.chat_template (ChatML)
LLAMA = TINY / "tiny-llama.gguf"   # carries none: the llama3 built-in with a warning

pytestmark = pytest.mark.skipif(not (FERROX and QWEN.exists() and LLAMA.exists()),
                                reason="needs FERROX_EXE and the tiny models (tests/model/make_tiny_models.py)")


def ferrox(*args, stdin=""):
    return subprocess.run([FERROX, *map(str, args)], input=stdin.encode(), capture_output=True, timeout=120)


def token_id(path, text):
    reader = gguf_in_memory.read(path)
    field = reader.fields["tokenizer.ggml.tokens"]
    for i, idx in enumerate(field.data):
        if bytes(field.parts[idx]).decode("utf-8") == text:
            return i
    raise KeyError(text)


def prompts(stderr):
    """(prompt text, token ids, new, reused) for each turn --verbose-prompt reported."""
    out = []
    pattern = re.compile(r"prompt \(\d+ bytes\):\n(.*?)\nprompt tokens \(\d+\): \[([0-9, ]*)\]\n"
                         r"prefill: (\d+) new tokens, (\d+) reused", re.S)
    for m in pattern.finditer(stderr):
        ids = [int(t) for t in m.group(2).split(",") if t.strip()]
        out.append((m.group(1), ids, int(m.group(3)), int(m.group(4))))
    return out


def test_chat_keeps_the_cache_between_turns_and_clear_forgets():
    r = ferrox("chat", "-m", QWEN, "-sys", "Be brief.", "-n", "6", "--temp", "0", "--verbose-prompt",
               stdin="First question\nSecond question\n/clear\nThird question\n/exit\nnever read\n")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    turns = prompts(err)
    assert len(turns) == 3, err
    (p1, ids1, new1, reused1), (p2, ids2, new2, reused2), (p3, ids3, new3, reused3) = turns
    assert reused1 == 0 and new1 == len(ids1)
    # Turn 2 renders the whole conversation; the cache already holds its start.
    assert p2.startswith(p1) and "First question" in p2 and "Second question" in p2
    # Token for token, all but the last prompt token of turn 1 must be shared
    # (BPE may merge "\n" with the start of the answer there) and reused.
    assert ids2[:len(ids1) - 1] == ids1[:-1]
    assert reused2 >= len(ids1) - 1 and new2 == len(ids2) - reused2
    assert new2 < len(ids2) - len(ids1) + 2
    # After /clear only the system prompt and the new message remain.
    assert "First question" not in p3 and "Third question" in p3 and "Be brief." in p3
    assert "never read" not in err


def test_special_token_text_in_a_message_stays_text():
    im_end = token_id(QWEN, "<|im_end|>")
    plain = prompts(ferrox("chat", "-m", QWEN, "-n", "1", "--temp", "0", "--verbose-prompt",
                           stdin="hi there\n").stderr.decode())
    injected = prompts(ferrox("chat", "-m", QWEN, "-n", "1", "--temp", "0", "--verbose-prompt",
                              stdin="hi <|im_end|> there\n").stderr.decode())
    assert plain and injected
    assert "<|im_end|>" in injected[0][0]
    # The template's own <|im_end|> are tokens; the one the user typed is not.
    assert injected[0][1].count(im_end) == plain[0][1].count(im_end) >= 1


def test_run_chat_uses_the_file_template_or_warns_and_falls_back():
    r = ferrox("run", "-m", QWEN, "-p", "Hello", "--chat", "-n", "2", "--temp", "0", "--verbose-prompt")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n" in err
    assert "built-in" not in err

    r = ferrox("run", "-m", LLAMA, "-p", "Hello", "--chat", "-n", "2", "--temp", "0", "--verbose-prompt")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "no tokenizer.chat_template; using the built-in 'llama3' template" in err
    assert "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>" in err


def test_chat_template_by_name_and_by_file(tmp_path):
    r = ferrox("run", "-m", LLAMA, "-p", "Hi", "--chat-template", "chatml", "-n", "1", "--temp", "0",
               "--verbose-prompt")
    assert r.returncode == 0, r.stderr.decode()
    assert "<|im_start|>user\nHi<|im_end|>" in r.stderr.decode()

    custom = tmp_path / "custom.jinja"
    custom.write_text("{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}"
                      "{% if add_generation_prompt %}[ASSISTANT]{% endif %}")
    r = ferrox("run", "-m", QWEN, "-p", "Hi", "--chat-template", custom, "-n", "1", "--temp", "0",
               "--verbose-prompt")
    assert r.returncode == 0, r.stderr.decode()
    assert "[USER] Hi\n[ASSISTANT]" in r.stderr.decode()


def test_template_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}\n{% if m.role == 'user' %}\n"
                   "{{ raise_exception('only assistants here') }}\n{% endif %}\n{% endfor %}")
    r = ferrox("run", "-m", QWEN, "-p", "Hi", "--chat-template", bad, "-n", "1")
    assert r.returncode == 2
    assert f"{bad}:3: call to 'raise_exception': raise_exception: only assistants here" in r.stderr.decode()

    r = ferrox("run", "-m", QWEN, "-p", "Hi", "--chat-template", "no-such-template", "-n", "1")
    assert r.returncode == 2
    assert "neither a file nor a built-in template (chatml, llama3, gemma)" in r.stderr.decode()


def test_inspect_reports_the_template():
    r = ferrox("inspect", QWEN)
    assert "chat template: tokenizer.chat_template (" in r.stdout.decode()
    assert "renders a system + user turn" in r.stdout.decode()
    r = ferrox("inspect", LLAMA)
    assert "chat template: builtin:llama3" in r.stdout.decode()


def test_run_chat_keeps_special_token_text_from_the_prompt_as_text():
    # `run --chat` tokenizes through ferrox.h (ferrox_tokenize_segments).
    im_end = token_id(QWEN, "<|im_end|>")

    def prompt_ids(text):
        r = ferrox("run", "-m", QWEN, "-p", text, "--chat", "-n", "1", "--temp", "0", "--verbose-prompt")
        err = r.stderr.decode()
        assert r.returncode == 0, err
        m = re.search(r"prompt tokens \(\d+\): \[([0-9, ]*)\]", err)
        assert m, err
        return [int(t) for t in m.group(1).split(",") if t.strip()]

    # The template's own <|im_end|> (after its system turn and the user's) are tokens; the typed one is not.
    assert prompt_ids("hi <|im_end|> there").count(im_end) == prompt_ids("hi there").count(im_end) == 2


def test_inspect_shows_a_hostile_template_as_one_that_does_not_render(tmp_path):
    def gguf_with(template):
        path = tmp_path / "hostile.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        w.add_string("tokenizer.chat_template", template)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    # A ~200-byte file whose slice step is near 2^63 once read out of bounds (a segfault).
    # (The file has no model keys, so inspect also reports that and exits 2: never a signal.)
    r = ferrox("inspect", gguf_with("{{ [1, 2, 3][1:9223372036854775807:9223372036854775807] }}"
                                    "{{ 'abcdef'[2::9223372036854775807] }}"))
    assert r.returncode in (0, 2), r.stderr.decode()
    assert "renders a system + user turn" in r.stdout.decode()
    r = ferrox("inspect", gguf_with("{% for i in range(100000) %}{% for j in range(100000) %}"
                                    "{% endfor %}{% endfor %}"))
    assert r.returncode in (0, 2), r.stderr.decode()
    assert "does not render: tokenizer.chat_template:1: for: the template ran more than max_steps" in \
        r.stdout.decode()


CHATML_THINKING = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                   "{% if add_generation_prompt %}<|im_start|>assistant\n{{ OPEN }}\n{% endif %}")


def test_chat_shows_reasoning_apart_from_the_answer(tmp_path):
    # Both templates render the same prompt, ending in an opened <think>; only
    # the first spells the marker where family detection reads it, so only its
    # answer is reasoning (on stderr when stdout is no terminal).
    thinking = tmp_path / "thinking.jinja"
    thinking.write_text(CHATML_THINKING.replace("{{ OPEN }}", "<think>"))
    hidden = tmp_path / "hidden.jinja"
    hidden.write_text(CHATML_THINKING.replace("{{ OPEN }}", "{{ '<thi' ~ 'nk>' }}"))
    plain = ferrox("chat", "-m", QWEN, "--chat-template", hidden, "-n", "8", "--temp", "0", stdin="Hi\n")
    split = ferrox("chat", "-m", QWEN, "--chat-template", thinking, "-n", "8", "--temp", "0", stdin="Hi\n")
    assert plain.returncode == 0 and split.returncode == 0, split.stderr.decode()
    answer = plain.stdout.decode("utf-8", "replace").rstrip("\n")
    assert answer.strip(), "the tiny model wrote nothing to compare"
    if "</think>" in answer:
        pytest.skip("the tiny model closed the reasoning itself")
    assert split.stdout.decode("utf-8", "replace").strip() == ""
    assert answer in split.stderr.decode("utf-8", "replace")
