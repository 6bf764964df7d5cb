#!/usr/bin/env python3
"""kvinfer-server's structured output and tool calls, end to end with the openai Python client.

    test_server_structured.py SERVER_BINARY MODEL [--pydeps DIR] [--samples N]

On the default model (whose chat template has no tools: the server describes them in Hermes'
words and reads Hermes' <tool_call> replies back). Checks:
  - response_format json_schema (strict): N seeded samples at temperature 1 over four schemas,
    32 at a time (the batch scheduler keeps one parse per sequence); every reply parses and
    validates (the jsonschema package, an independent validator), finish_reason "stop";
  - response_format json_object: an object;
  - a schema with a keyword outside the subset: 400 naming it;
  - tools: tool_choice "required" and a named function give tool_calls whose arguments validate
    against the parameters, finish_reason "tool_calls"; the same streamed (deltas as OpenAI sends
    them, assembled by the client); a multi-turn exchange with a tool result; "auto" with a strict
    function; "none"; bad tools and tool_choice are 400s.
The server runs on one thread with a prefix cache (the prompts share the template's system
prompt), and independent requests are sent together, so that they share batched steps: about a
minute on a 2-core machine. Exits 0 when all pass, 1 on a failure, 77 (skipped) without the
openai or jsonschema packages.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("server")
ap.add_argument("model")
ap.add_argument("--pydeps")
ap.add_argument("--samples", type=int, default=200)
args = ap.parse_args()
if not os.path.exists(args.model):
    print(f"SKIP: {args.model} is absent: run tools/fetch_model.sh")
    sys.exit(77)
if args.pydeps and os.path.isdir(args.pydeps):
    sys.path.insert(0, args.pydeps)
try:
    import jsonschema
    import openai
except ImportError as e:
    print(f"SKIP: {e.name} is absent (tools/setup.sh installs openai into build/pydeps and python3-jsonschema)")
    sys.exit(77)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


proc = subprocess.Popen([args.server, "-m", args.model, "--port", "0", "-t", "1", "-P", "32",
                         "--prefix-cache", "64M"], stderr=subprocess.PIPE,
                        text=True)
line = proc.stderr.readline()
m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
if not m:
    raise SystemExit(f"the server did not start: {line}{proc.stderr.read()}")
client = openai.OpenAI(base_url=f"http://127.0.0.1:{m.group(1)}/v1", api_key="none", max_retries=0, timeout=300)

SCHEMAS = {
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": ["string", "null"], "maxLength": 40}},
        "required": ["name", "age"], "additionalProperties": False},
    "weather": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}, "hourly": {"type": "boolean"}},
        "required": ["city", "unit"], "additionalProperties": False},
    "order": {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^ORD-[0-9]{4}$"}, "date": {"type": "string", "format": "date"},
        "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "object", "properties": {
            "sku": {"type": "string", "maxLength": 10}, "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
            "required": ["sku", "qty"], "additionalProperties": False}}},
        "required": ["id", "date", "items"], "additionalProperties": False},
    "event": {"oneOf": [
        {"type": "object", "properties": {"type": {"const": "click"}, "x": {"type": "integer", "minimum": 0, "maximum": 4096}},
         "required": ["type", "x"], "additionalProperties": False},
        {"type": "object", "properties": {"type": {"const": "key"}, "key": {"type": "string", "maxLength": 8}},
         "required": ["type", "key"], "additionalProperties": False}]},
}
PROMPTS = {
    "person": "Describe a person as JSON.", "weather": "Which weather forecast do you want? Answer in JSON.",
    "order": "Write an order as JSON.", "event": "Give one UI event as JSON.",
}


def structured(name, seed):
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPTS[name]}], temperature=1.0, seed=seed, max_tokens=600,
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}})
    return name, seed, r.choices[0], r.usage.completion_tokens


# --- response_format json_schema: hundreds of seeded samples, each parsed and validated ---
jobs = [(name, seed) for seed in range(args.samples // len(SCHEMAS)) for name in SCHEMAS]
bad, tokens, started = [], 0, time.monotonic()
with concurrent.futures.ThreadPoolExecutor(32) as pool:
    for name, seed, choice, n in pool.map(lambda j: structured(*j), jobs):
        tokens += n
        text = choice.message.content
        try:
            jsonschema.validate(json.loads(text), SCHEMAS[name])
            if choice.finish_reason != "stop":
                bad.append(f"{name} seed {seed}: finish_reason {choice.finish_reason}")
        except Exception as e:  # noqa: BLE001 - any failure is reported with the text
            bad.append(f"{name} seed {seed}: {type(e).__name__}: {e} in {text!r}")
check(not bad, f"{len(jobs)} json_schema samples (4 schemas, temperature 1; {tokens} tokens in "
      f"{time.monotonic() - started:.0f} s) parse and validate"
      + ("" if not bad else f": {len(bad)} failed, e.g. {bad[:3]}"))


def error_of(call):
    try:
        call()
    except openai.BadRequestError as e:
        return e
    return None


e = error_of(lambda: client.chat.completions.create(
    model="m", messages=[{"role": "user", "content": "x"}],
    response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer", "multipleOf": 3}}}))
check(e is not None and "multipleOf" in str(e) and e.body.get("param") == "response_format.json_schema.schema",
      f"an unsupported schema keyword is a 400 naming it ({e})")

# --- tools ---
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time in a time zone.",
                                         "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}},
                                                        "required": ["zone"], "additionalProperties": False}}}
PARAMS = {f["function"]["name"]: f["function"]["parameters"] for f in (WEATHER, TIME)}
ask = [{"role": "user", "content": "What is the weather in Paris?"}]


def valid_calls(message):
    calls = message.tool_calls or []
    for c in calls:
        jsonschema.validate(json.loads(c.function.arguments), PARAMS[c.function.name])
    return calls


def create(**kwargs):
    return client.chat.completions.create(model="m", **kwargs)


def streamed(**kwargs):
    """The client's chunks assembled into calls, the finish reason, and departures from OpenAI's
    shape: a call's first delta has its id, type and name, and arguments ""; the deltas after it
    carry only the index and a piece of the arguments."""
    assembled, finish, shape = {}, None, []
    for chunk in create(stream=True, **kwargs):
        d = chunk.choices[0].delta if chunk.choices else None
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
        for tc in (d.tool_calls or []) if d else []:
            if tc.index not in assembled:
                if not (tc.id and tc.type == "function" and tc.function and tc.function.name and tc.function.arguments == ""):
                    shape.append(f"first delta of call {tc.index}: {tc}")
            elif tc.id is not None or tc.type is not None or (tc.function and tc.function.name is not None):
                shape.append(f"a later delta of call {tc.index} repeats its id, type or name: {tc}")
            a = assembled.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            a["id"] = tc.id or a["id"]
            if tc.function and tc.function.name:
                a["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                a["arguments"] += tc.function.arguments
    return assembled, finish, shape


# The requests below do not depend on each other: sent together, they share the server's batched
# steps (each gets the tokens it would get alone).
forced = dict(messages=ask, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=120)
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    json_object = pool.submit(create, messages=[{"role": "user", "content": "Any JSON object please."}], temperature=0,
                              max_tokens=60, response_format={"type": "json_object"})
    # Up to four calls of ~40 tokens each (parallel_tool_calls): 200 tokens leave room to end.
    required = [pool.submit(create, messages=ask, tools=[WEATHER, TIME], tool_choice="required", temperature=1.0, seed=seed,
                            max_tokens=200) for seed in range(4)]
    single = pool.submit(create, messages=ask, tools=[WEATHER, TIME], tool_choice="required", temperature=1.0, seed=2,
                         max_tokens=200, parallel_tool_calls=False)
    named = pool.submit(create, messages=ask, tools=[WEATHER, TIME],
                        tool_choice={"type": "function", "function": {"name": "get_time"}}, temperature=0, max_tokens=120)
    stream = pool.submit(streamed, **forced)
    whole = pool.submit(create, **forced)
    auto = [pool.submit(create, messages=ask, tools=[WEATHER], tool_choice="auto", temperature=1.0, seed=seed, max_tokens=48)
            for seed in range(3)]

r = json_object.result()
text = r.choices[0].message.content
# A free object may run to max_tokens (then it is cut short, as OpenAI's is); a whole one parses.
check(isinstance(json.loads(text), dict) if r.choices[0].finish_reason == "stop" else text.startswith("{"),
      f"json_object gives a JSON object ({r.choices[0].finish_reason}: {text[:60]!r}...)")
for seed, f in enumerate(required):
    r = f.result()
    calls = valid_calls(r.choices[0].message)
    check(len(calls) >= 1 and r.choices[0].finish_reason == "tool_calls" and all(c.id.startswith("call_") for c in calls),
          f"tool_choice required (seed {seed}): {[(c.function.name, c.function.arguments) for c in calls]}")
r = single.result()
calls = valid_calls(r.choices[0].message)
check(len(calls) == 1 and r.choices[0].finish_reason == "tool_calls", f"parallel_tool_calls false: one call: {calls}")
calls = valid_calls(named.result().choices[0].message)
check(len(calls) == 1 and calls[0].function.name == "get_time", f"a named function is called: {calls}")
assembled, finish, shape = stream.result()
whole = whole.result()
check(finish == "tool_calls" and len(assembled) >= 1 and
      [(a["name"], a["arguments"]) for a in assembled.values()] ==
      [(c.function.name, c.function.arguments) for c in whole.choices[0].message.tool_calls],
      f"streamed tool calls equal the whole response's: {assembled}")
check(not shape, f"streamed tool-call deltas have OpenAI's shape {shape}")
for seed, f in enumerate(auto):  # auto with a strict function: text, or calls whose arguments validate
    m2 = f.result().choices[0].message
    check(valid_calls(m2) is not None and (m2.content is not None or m2.tool_calls),
          f"auto with a strict function (seed {seed}): {m2.content!r} {[(c.function.name, c.function.arguments) for c in m2.tool_calls or []]}")

# Multi-turn: the call, its result, and the reply after it.
call = whole.choices[0].message.tool_calls[0]
turn2 = ask + [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
    {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})}]
with concurrent.futures.ThreadPoolExecutor(2) as pool:
    after = pool.submit(create, messages=turn2, tools=[WEATHER], temperature=0, max_tokens=40)
    none = pool.submit(create, messages=turn2, tools=[WEATHER], tool_choice="none", temperature=0, max_tokens=24)
r = after.result()
msg = r.choices[0].message
check(r.choices[0].finish_reason in ("stop", "length", "tool_calls") and (msg.content or msg.tool_calls),
      f"a multi-turn exchange with a tool result answers: {msg.content!r} {msg.tool_calls}")
r = none.result()
check(r.choices[0].message.tool_calls is None and isinstance(r.choices[0].message.content, str),
      "tool_choice none answers in text")

for what, kwargs, param, needle in [
    ("an unsupported parameter keyword", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}}}], "tool_choice": "required"},
     "tools", "multipleOf"),
    ("tool_choice naming no tool", {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice", "nope"),
    ("a bad function name", {"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name", "letters"),
    ("tool_choice without tools", {"tool_choice": "required"}, "tool_choice", "needs 'tools'"),
    ("response_format with callable tools", {"tools": [WEATHER], "response_format": {"type": "json_object"}},
     "response_format", "not supported"),
]:
    e = error_of(lambda: client.chat.completions.create(model="m", messages=ask, max_tokens=5, **kwargs))
    check(e is not None and e.body.get("param") == param and needle in str(e), f"{what} is a 400 ({e})")

proc.terminate()
proc.wait(timeout=60)
print(f"\n{len(failures)} failures" if failures else "\nall passed")
sys.exit(1 if failures else 0)
