"""Regenerates python_semantics.json: small templates exercising Python/jinja2
semantics (number and container printing, slicing, loop.*, macros, filters,
whitespace control) with the output jinja2 -- configured as transformers
configures it -- gives. test_template.cpp holds ferrox to those outputs."""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_jinja_conformance import hf_environment
env = hf_environment()
cases = [
 ("{{ 1.0 }}|{{ 1e20 }}|{{ 1e-5 }}|{{ 0.1 + 0.2 }}|{{ 1/3 }}|{{ 2.5e15 }}|{{ 1e16 }}|{{ -0.0 }}", {}),
 ("{{ none }}|{{ true }}|{{ [1, 'a', none, 2.0, [true]] }}|{{ {'a': 1, 'b': 'it\\'s'} }}|{{ ('x',) }}", {}),
 ("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }}", {}),
 ("{{ 'abcdef'[::-1] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} {{ [1,2,3,4,5][::2] }} {{ [1,2,3,4,5][4:1:-2] }} {{ 'héllo'[1:3] }} {{ 'héllo'|length }}", {}),
 ("{{ 'ab' ~ 1 ~ none ~ true }} {{ 'x' in 'xyz' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }} {{ 3 if false }}|{{ 'y' if 0 else 'n' }}", {}),
 ("{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }}{{ loop.previtem|default('-') }}{{ loop.nextitem|default('-') }};{% endfor %}", {"items": ["p", "q", "r"]}),
 ("{% for x in items if x > 1 %}{{ loop.index }}:{{ x }} {% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", {"items": [1, 2, 3]}),
 ("{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}|{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
 ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}", {}),
 ("{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inner{% endcall %}|{% macro row(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(v) row(21) %}{{ v }}{% endcall %}", {}),
 ("{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ 'é\"\\n'|tojson }}|{{ [1.5, none, true]|tojson }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_keys=true) }}", {"d": {"z": 1, "a": [1, {"b": "ü"}], "e": {}}}),
 ("{{ '  pad  '|trim }}|{{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'hello world'.title() }}|{{ 'ABC'.lower() }}{{ 'abc'|upper }}|{{ 'aXbX'.replace('X', '-') }}|{{ 'xxhixx'.strip('x') }}|{{ 'hi'.rstrip() }}", {}),
 ("{{ users|map(attribute='name')|join(', ') }}|{{ users|selectattr('admin')|map(attribute='name')|list }}|{{ users|rejectattr('admin')|list|length }}|{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3,4]|reject('even')|list }}|{{ users|selectattr('name', 'equalto', 'bo')|first }}", {"users": [{"name": "al", "admin": True}, {"name": "bo", "admin": False}]}),
 ("{{ d|items|list }}|{{ d|dictsort }}|{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{{ d.get('a') }}{{ d.get('zz', 'dflt') }}|{{ d.keys()|list }}|{{ d['B'] }}", {"d": {"b": 2, "a": 1, "B": 3}}),
 ("{{ x|default('d') }}|{{ ''|default('e', true) }}|{{ none is none }}|{{ x is defined }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [1] is sequence }}|{{ 'a' is sequence }}|{{ 3 is divisibleby 3 }}|{{ 1 is not none }}|{{ 'a' is in 'abc' }}", {}),
 ("{{ '3'|int + 1 }}|{{ 'x'|int }}|{{ 2.7|int }}|{{ 3|float }}|{{ 42|string ~ '!' }}|{{ [3,1,2]|sort }}|{{ [3,1,2]|sort(reverse=true) }}|{{ [1,2,3]|first }}{{ [1,2,3]|last }}|{{ [1,1,2]|unique|list }}|{{ [1,2,3]|sum }}|{{ [4,9]|max }}{{ [4,9]|min }}|{{ 'abc'|reverse }}", {}),
 ("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(width=3, blank=true) }}", {}),
 ("  {% if true %}\n  x\n  {% endif %}\n  y  {%- if true %} z {% endif -%}  \n w {# c #}\n{%+ if true %}k{% endif %}\n{{- ' tight ' -}}\n  end", {}),
 ("{%- set greeting -%}\n  Hello {{ who }}\n{%- endset -%}[{{ greeting }}]|{% filter upper %}shout {{ who }}{% endfilter %}", {"who": "you"}),
 ("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|{{ range(2, 10, 3)|list }}|{{ range(5, 0, -2)|list }}", {}),
 ("{{ messages[0].content }}|{{ messages[0]['role'] }}|{{ messages[-1].content[:3] }}|{{ messages|length }}|{{ (messages|last).role }}|{{ messages[0].missing is defined }}", {"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "world"}]}),
 ("{{ 'a%sb%dc'|format('X', 5) }}|{{ 'ab'*3 }}|{{ [0]*3 }}|{{ 10 - 2 * 3 }}|{{ (1, 2) == (1, 2) }}|{{ 1 == 1.0 }}|{{ true + 1 }}|{{ 'b' > 'a' }}|{{ [1, 2] < [1, 3] }}", {}),
 ("{{ \"x\" \"y\" }}|{{ '\\u00e9\\x41\\t|' }}|{{ 'it' ~ \"'s\" }}|{{ ['a\\nb'] }}|{{ {'k': \"q'\"} }}", {}),
 ("{{ x.foo }}|{{ none.foo }}|{{ [1,2][5] }}|{{ {'a': 1}.b }}", {"x": {}}),
 # A namespace that holds itself prints as Python's repr prints a cycle.
 ("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{% set ns.l = [ns, (ns,)] %}{{ ns }}|{{ ns.me|string }}|{{ ns.l }}|{{ ns.me.me.a }}|{{ ns.l[0] == ns }}", {}),
 # Values nested 100 deep through a namespace: well inside the depth limit.
 ("{% set ns = namespace(x=0) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}|{{ ns.x|tojson }}|{{ ns.x == ns.x }}", {}),
 # Slice steps and bounds near 2^63: Python's answer, never a read out of bounds.
 ("{{ 'abcdef'[0::9223372036854775807] }}|{{ 'abcdef'[2::9223372036854775807] }}|{{ 'abcdef'[::-9223372036854775807 - 1] }}|{{ [1,2,3][1:9223372036854775807:9223372036854775807] }}|{{ 'héllo'[-1:-9223372036854775807:-9223372036854775807] }}|{{ [1,2,3][-9223372036854775807 - 1:9223372036854775807] }}|{{ 'abc'[9223372036854775807::-9223372036854775807] }}|{{ [1,2,3][9223372036854775807:-9223372036854775807 - 1:-1] }}|{{ 'abc'[-9223372036854775807 - 1] is defined }}", {}),
]
out = []
for src, ctx in cases:
    out.append({"template": src, "context": ctx, "expected": env.from_string(src).render(**ctx)})
(Path(__file__).resolve().parent / 'python_semantics.json').write_text(json.dumps(out, ensure_ascii=False, indent=1) + '\n', encoding='utf-8')
