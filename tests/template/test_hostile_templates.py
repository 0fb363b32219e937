"""Hostile templates are refused with the budget they exceed named, never by
a signal (docs/security.md, "Template budgets").

Each case is written to a temporary file and rendered by ferrox_render_template
in its own process under a wall-clock cap and a memory cap (RLIMIT_AS in a
plain build; ASan reserves terabytes of address space, so under ASan its
allocator limits are used instead). A case passes when the process exits 1
with "<file>:<line>: <construct>: ..." naming the expected budget."""
import json
import os
import re
import resource
import subprocess
import tempfile
from pathlib import Path

import pytest

RENDER = os.environ.get("FERROX_RENDER_TEMPLATE", "")
ASAN = os.environ.get("FERROX_SANITIZE", "OFF").upper() in ("ON", "1", "TRUE")
MEMORY_CAP = 3 << 30
SECONDS = 120 if ASAN else 30


def nested_ifs(n):
    return "{% if true %}" * n + "{{ m(n) }}" + "{% endif %}" * n


# name -> (template source, the budget its error must name, the line it must name)
CASES = {
    "long expression": ("{{ 1" + " + 1" * 300_000 + " }}", "nested deeper than 256", 1),
    "long filter chain": ("\n{{ 'a'" + "|trim" * 100_000 + " }}", "nested deeper than 256", 2),
    "long attribute chain": ("{{ x" + ".y" * 200_000 + " }}", "nested deeper than 256", 1),
    "deep brackets": ("{{ " + "[" * 100_000 + " }}", "nesting deeper than 200", 1),
    "deep blocks": ("{% if true %}" * 100_000, "nesting deeper than 200", 1),
    "value nested by repeated sets": ("{% set x = [] %}\n" + "{% set x = [x] %}" * 2_000,
                                      "values nest deeper than 512", 2),
    "value nested through a namespace": (
        "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}",
        "nests deeper than 512", 1),
    "endless loop": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                     "max_steps", 1),
    "quadratic unique": ("{{ range(100000)|list|unique|list|length }}", "max_steps", 1),
    "in over a list in a loop": (
        "{% set l = range(100000)|list %}\n{% for i in range(100000) %}{{ -1 in l }}{% endfor %}",
        "max_steps", 2),
    "sorts in a loop": ("{% for i in range(1000) %}{{ range(100000)|list|sort|first }}{% endfor %}",
                        "max_steps", 1),
    "many large strings": ("{% set s = 'x' * 60000000 %}\n{% for i in range(100) %}{% set t = s ~ i %}"
                           "{% endfor %}", "max_memory", 2),
    "many large lists": ("{% set l = range(100000)|list %}{% for i in range(10000) %}"
                         "{% set m = l + l %}{% endfor %}", "max_memory", 1),
    "huge output": ("{% for i in range(100000) %}{{ 'x' * 1000000 }}{% endfor %}", "max_output", 1),
    "string past the output limit": ("{{ 'x' * 40000000 ~ 'x' * 40000000 }}", "max_output", 1),
    "endless recursion": ("{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}", "calls nested deeper", 1),
    "recursion through deep bodies": (
        "{% macro m(n) %}" + nested_ifs(30) + "{% endmacro %}{{ m(1) }}", "max_eval_depth", 1),
    "source over 4 MiB": ("{# " + "x" * (4 << 20) + " #}", "at most 4194304 bytes", None),
}


def run_case(path):
    env = dict(os.environ)
    if ASAN:
        env["ASAN_OPTIONS"] = f"malloc_limit_mb={MEMORY_CAP >> 20}:allocator_may_return_null=0"

    def cap():
        if not ASAN:
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    ctx = path.with_suffix(".json")
    ctx.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}],
                               "add_generation_prompt": True, "bos_token": "<s>"}))
    return subprocess.run([RENDER, str(path), str(ctx)], capture_output=True, timeout=SECONDS,
                          preexec_fn=cap, env=env)


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_template_is_refused_with_its_budget(name, tmp_path):
    if not RENDER or not Path(RENDER).exists():
        pytest.skip("FERROX_RENDER_TEMPLATE is not set (run through ctest)")
    source, budget, line = CASES[name]
    path = tmp_path / (re.sub(r"\W+", "_", name) + ".jinja")
    path.write_text(source)
    r = run_case(path)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 1, f"{name}: exit {r.returncode} (a negative code is a signal)\n{err[-2000:]}"
    assert budget in err, f"{name}: the error does not name '{budget}':\n{err[-2000:]}"
    if line is not None:
        assert re.match(rf"^{re.escape(str(path))}:{line}: ", err), f"{name}: not located at line {line}: {err}"
