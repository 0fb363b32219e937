"""`ferrox chat` on a recurrent model (tiny-qwen35) keeps the state at each prompt's end
and rewinds to it when the next turn's prompt leaves the cached tokens, instead of
computing the whole conversation again. The template here renders every earlier answer
as "ok" (as templates that drop a reasoning part re-render an answer otherwise than it
was generated), so each turn's prompt leaves the cache right after the previous prompt.
--verbose-prompt says, per turn, how many tokens were computed and how many reused: from
the second turn on, at least the previous prompt is reused (before checkpoints a
recurrent model reused nothing). tiny-qwen3 (attention only) drops the tail as before.
"""
from __future__ import annotations

import os
import pathlib
import random
import re
import subprocess

import pytest

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
# ChatML, every answer rendered as "ok".
TEMPLATE = ("{%- for m in messages -%}<|im_start|>{{ m.role }}\n"
            "{% if m.role == 'assistant' %}ok{% else %}{{ m.content }}{% endif %}<|im_end|>\n"
            "{% endfor -%}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}")
WORDS = "river stone lantern copper window garden signal harbor meadow orbit".split()


def chat(model: pathlib.Path, template: pathlib.Path, lines: list[str]) -> list[tuple[int, int]]:
    """Per turn: (computed, reused) prompt tokens."""
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_API_KEY")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    r = subprocess.run([FERROX, "chat", "-m", str(model), "-c", "256", "-t", "1", "--temp", "0",
                        "-n", "6", "--chat-template", str(template), "--verbose-prompt"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True,
                       errors="replace",
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    turns = [(int(a), int(b)) for a, b in
             re.findall(r"prefill: (\d+) new tokens, (\d+) reused from the cache", r.stderr)]
    assert len(turns) == len(lines), r.stderr
    return turns


@pytest.mark.parametrize("arch", ["qwen35", "qwen3"])
def test_a_turn_reuses_at_least_the_previous_prompt(arch, tmp_path):
    model = TINY / f"tiny-{arch}.gguf"
    if not model.exists():
        pytest.skip(f"no {model} (tests/model/make_tiny_models.py)")
    template = tmp_path / "ok.jinja"
    template.write_text(TEMPLATE)
    rng = random.Random(35)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(4)]
    turns = chat(model, template, lines)
    print(arch, "turns (computed, reused):", turns)
    assert turns[0][1] == 0
    for (computed, reused), (prev_computed, prev_reused) in zip(turns[1:], turns):
        previous_prompt = prev_computed + prev_reused
        assert reused >= previous_prompt, turns
        # ... and not the answer, which the template replaced (unless its first token
        # happens to be the one "ok" starts with).
        assert reused <= previous_prompt + 1, turns
