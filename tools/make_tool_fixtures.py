#!/usr/bin/env python3
"""Write tests/data/chat/tools_expected.json: chat templates rendered with tools, as HF
transformers' apply_chat_template(messages, tools=tools, tokenize=False) renders them.

Run from the repository root:
    python3 -m venv build/fixenv && build/fixenv/bin/pip install transformers==5.24.0 jinja2==3.1.6
    build/fixenv/bin/python tools/make_tool_fixtures.py

The messages are given to transformers exactly as kvinfer::ChatTemplate gives them to the template
(kvinfer/chat_template.h): {"role", "content"}, plus "tool_calls" ([{"id", "type": "function",
"function": {"name", "arguments": <the arguments parsed from their JSON text>}}]), "tool_call_id"
and "name" where set; content "" where OpenAI's is null. The tools list is passed as the client
sends it. tests/test_chat_template.cpp renders the same and compares byte for byte.
Nothing is downloaded (HF_HUB_OFFLINE); the tokenizers are the committed ones.
"""

import json
import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import jinja2  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from tokenizer_data import unpacked  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "chat" / "tools_expected.json"
TOKENIZERS = {"qwen2_5": unpacked() / "hf" / "qwen2_5"}  # tests/data/tokenizers/hf/qwen2_5, unpacked

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Bogotá"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web \"quoted\" — with a dash.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                       "required": ["query"]},
    },
}
NO_PARAMS = {"type": "function", "function": {"name": "now", "description": "The time now."}}

# Each case: (tools, messages in kvinfer's form: arguments as JSON text).
CASES = {
    "tools_first_turn": ([WEATHER, SEARCH], [{"role": "user", "content": "Weather in Paris?"}]),
    "tools_with_system": ([WEATHER, NO_PARAMS],
                          [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Time?"}]),
    "tool_call_and_result": ([WEATHER], [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}]},
        {"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": "call_1", "name": "get_weather"},
    ]),
    "two_calls_two_results_then_user": ([WEATHER, SEARCH], [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Paris and Oslo?"},
        {"role": "assistant", "content": "Checking both.",
         "tool_calls": [{"id": "a", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                        {"id": "b", "name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"fahrenheit\"}"}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "a"},
        {"role": "tool", "content": "snow ❄", "tool_call_id": "b"},
        {"role": "assistant", "content": "Paris is sunny, Oslo snowy."},
        {"role": "user", "content": "Thanks"},
    ]),
    "no_tools_but_a_tool_result": ([], [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "x", "name": "now", "arguments": "{}"}]},
        {"role": "tool", "content": "12:00", "tool_call_id": "x"},
    ]),
}


def as_template_sees(m):
    out = {"role": m["role"], "content": m["content"]}
    if m.get("tool_calls"):
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"], "arguments": json.loads(c["arguments"])}}
                             for c in m["tool_calls"]]
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    if m.get("name"):
        out["name"] = m["name"]
    return out


def main():
    result = {"transformers": transformers.__version__, "jinja2": jinja2.__version__, "cases": []}
    for tok_name, path in TOKENIZERS.items():
        tok = AutoTokenizer.from_pretrained(str(path))
        for name, (tools, messages) in CASES.items():
            text = tok.apply_chat_template([as_template_sees(m) for m in messages], tools=tools or None,
                                           tokenize=False, add_generation_prompt=True)
            result["cases"].append({"template": tok_name, "name": name, "tools": tools, "messages": messages,
                                    "expected": text})
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}: {len(result['cases'])} cases")


if __name__ == "__main__":
    main()
