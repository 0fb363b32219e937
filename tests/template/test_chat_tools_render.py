"""Tool round trips with template switches through the core's ChatRenderer,
byte for byte against jinja2 (issue 34 item 4).

For every real template (llama.cpp's collection, ci/fetch_templates.sh): the
conformance test's two tool conversations (tools, an assistant turn with
tool_calls, role "tool" results with tool_call_id) rendered with each set of
kwargs a request can carry (enable_thinking on and off, reasoning_effort) --
jinja2 given them as transformers passes **kwargs, ferrox through
ChatRenderer::render's kwargs. Every render jinja2 accepts is identical in
ferrox; every one it refuses, ferrox refuses. A kwarg named like a key the
renderer sets is refused by name."""
import json
import os
import subprocess
import tempfile

import pytest

from test_jinja_conformance import CONVERSATIONS, TEMPLATES, context, hf_environment

RENDER = os.environ.get("FERROX_RENDER_TEMPLATE", "")

KWARGS = [
    {},
    {"enable_thinking": False},
    {"enable_thinking": True},
    {"reasoning_effort": "low"},
    {"enable_thinking": False, "reasoning_effort": "high"},
]
CONVERSATION_NAMES = ["tools", "tools_json_args"]


def run_chat(jobs):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(jobs, f, ensure_ascii=False)
        path = f.name
    try:
        out = subprocess.run([RENDER, "--chat", path], capture_output=True, check=True, timeout=240)
    finally:
        os.unlink(path)
    return json.loads(out.stdout.decode("utf-8"))


@pytest.fixture(scope="module")
def renders():
    paths = sorted(TEMPLATES.glob("*.jinja")) if TEMPLATES.is_dir() else []
    if not paths:
        pytest.skip(f"no templates in {TEMPLATES} (run ci/fetch_templates.sh)")
    if not RENDER:
        pytest.skip("FERROX_RENDER_TEMPLATE is not set (run through ctest)")
    env = hf_environment()
    jobs, reference = [], []
    for path in paths:
        try:
            compiled = env.from_string(path.read_text(encoding="utf-8"))
        except Exception:  # noqa: BLE001 - jinja2 cannot compile it; the conformance test covers that
            continue
        for name in CONVERSATION_NAMES:
            conv = CONVERSATIONS[name]
            for kwargs in KWARGS:
                # ChatRenderer passes bos/eos but not unk/pad (no vocabulary has them by name).
                ctx = {k: v for k, v in context(conv).items() if k not in ("unk_token", "pad_token")}
                ctx.update(kwargs)
                try:
                    ref = (True, compiled.render(**ctx))
                except Exception as e:  # noqa: BLE001 - the template refuses this conversation
                    ref = (False, f"{type(e).__name__}: {e}")
                jobs.append({"template": str(path), "messages": conv["messages"], "tools": conv.get("tools"),
                             "kwargs": kwargs, "add_generation_prompt": conv["add_generation_prompt"],
                             "controls": []})
                reference.append((path.name, name, json.dumps(kwargs), ref))
    ours = run_chat(jobs)
    assert len(ours) == len(reference)
    return list(zip(reference, ours))


def test_tool_round_trips_with_kwargs_match_jinja2(renders):
    differ, only_jinja, only_ferrox = [], [], []
    for (template, conv, kwargs, (ok, ref)), mine in renders:
        if ok and mine["ok"] and mine["text"] != ref:
            differ.append((template, conv, kwargs, ref, mine["text"]))
        elif ok and not mine["ok"]:
            only_jinja.append((template, conv, kwargs, mine["error"]))
        elif not ok and mine["ok"]:
            only_ferrox.append((template, conv, kwargs, ref))
    rendered = sum(1 for (_, _, _, (ok, _)), _ in renders if ok)
    # The switches must matter somewhere, or the kwargs never reached a template.
    by_kwargs = {}
    for (template, conv, kwargs, (ok, ref)), _ in renders:
        if ok:
            by_kwargs.setdefault((template, conv), set()).add(ref)
    switched = sum(1 for refs in by_kwargs.values() if len(refs) > 1)
    print(f"\ntool round trips with kwargs: {rendered - len(differ) - len(only_jinja)}/{rendered} "
          f"renders identical to jinja2; {switched} (template, conversation) pairs change with kwargs")
    for t, c, k, ref, got in differ[:5]:
        print(f"  MISMATCH {t} [{c}] {k}:\n    jinja2: {ref[-300:]!r}\n    ferrox: {got[-300:]!r}")
    for t, c, k, err in only_jinja[:5]:
        print(f"  ferrox refuses {t} [{c}] {k}: {err}")
    assert not differ
    assert not only_jinja
    assert not only_ferrox
    assert switched >= 10, "enable_thinking / reasoning_effort changed almost no render"


def test_a_kwarg_may_not_replace_a_renderer_key():
    paths = sorted(TEMPLATES.glob("*.jinja")) if TEMPLATES.is_dir() else []
    if not paths or not RENDER:
        pytest.skip("needs the templates and FERROX_RENDER_TEMPLATE")
    conv = CONVERSATIONS["user_only"]
    [mine] = run_chat([{"template": str(paths[0]), "messages": conv["messages"],
                        "kwargs": {"bos_token": "<|im_start|>"}, "controls": []}])
    assert not mine["ok"]
    assert "bos_token" in mine["error"] and "renderer" in mine["error"]
