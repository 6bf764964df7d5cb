#!/usr/bin/env python3
"""kvinfer-server end to end on loopback, with the openai Python client (PyPI) and curl.

    test_server.py SERVER_BINARY MODEL [--pydeps DIR]

MODEL: the default model (its speed gives the timing checks room: a disconnect is noticed while
the sequence still runs). Starts the server on a free port over MODEL and checks: /v1/models, /health, /metrics;
completions and chat completions, whole and streamed; N concurrent streaming clients at
temperature 0 get what single requests get; the 4xx answers (malformed JSON, unknown fields, bad
values, oversize bodies, prompts over the context) with OpenAI error bodies; a full queue gets
429; a client that disconnects cancels its sequence; SIGTERM lets requests in flight finish.
Exits 0 when all pass, 1 on a failure, 77 (skipped) without the openai package or curl.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("server")
ap.add_argument("model")
ap.add_argument("--pydeps", help="a directory of PyPI packages (pip install --target) to import from")
args = ap.parse_args()
if not os.path.exists(args.model):
    print(f"SKIP: {args.model} is absent: run tools/fetch_model.sh")
    sys.exit(77)
if args.pydeps and os.path.isdir(args.pydeps):
    sys.path.insert(0, args.pydeps)
try:
    import openai
except ImportError:
    print("SKIP: the openai package is absent (tools/setup.sh installs it into build/pydeps)")
    sys.exit(77)
if shutil.which("curl") is None:
    print("SKIP: curl is absent")
    sys.exit(77)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


class Server:
    def __init__(self, *extra):
        self.proc = subprocess.Popen([args.server, "-m", args.model, "--port", "0", "-t", "1", *extra],
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise SystemExit(f"the server did not start: {line}{self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0)

    def curl(self, *curl_args):
        out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *curl_args], capture_output=True, text=True).stdout
        body, _, status = out.rpartition("\n")
        return int(status), body

    def metric(self, name):
        text = urllib.request.urlopen(self.url + "/metrics").read().decode()
        return float(re.search(rf"^kvinfer_{name} (\S+)$", text, re.M).group(1))

    def wait_for(self, name, value, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline and self.metric(name) < value:
            time.sleep(0.01)
        return self.metric(name) >= value

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


prompts = ["Once upon a time", "The weather today", "Hello, my name is", "In a small village",
           "The best way to", "Yesterday I saw", "A long time ago", "My favourite food"]

s = Server("-P", "8", "--step-tokens", "64", "--max-body", "64K")
try:
    model_id = s.client.models.list().data[0].id
    check(model_id == os.path.basename(args.model.rstrip("/")), f"/v1/models lists the model ({model_id})")
    status, body = s.curl(s.url + "/health")
    check(status == 200 and json.loads(body)["status"] == "ok", "/health is ok")

    # Whole responses.
    r = s.client.completions.create(model=model_id, prompt="Once upon a time", max_tokens=12, temperature=0)
    check(r.object == "text_completion" and r.choices[0].finish_reason in ("length", "stop")
          and r.usage.completion_tokens >= 1 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens,
          f"completion: {r.choices[0].text!r} ({r.choices[0].finish_reason}, {r.usage.completion_tokens} tokens)")
    c = s.client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "Hi!"}], max_tokens=10,
                                         temperature=0)
    check(c.object == "chat.completion" and c.choices[0].message.role == "assistant",
          f"chat completion: {c.choices[0].message.content!r}")
    stopped = s.client.completions.create(model=model_id, prompt="Once upon a time", max_tokens=12, temperature=0,
                                          stop=[r.choices[0].text[2:4]] if len(r.choices[0].text) > 4 else None)
    check(len(stopped.choices[0].text) <= len(r.choices[0].text), "a stop string cuts the text")

    # Single requests at temperature 0, then the same prompts as concurrent streams.
    single = [s.client.completions.create(model=model_id, prompt=p, max_tokens=16, temperature=0).choices[0].text
              for p in prompts]
    streamed = [""] * len(prompts)
    chat_single = s.client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": prompts[0]}],
                                                   max_tokens=16, temperature=0).choices[0].message.content
    chat_streamed = []

    def stream(i):
        for chunk in s.client.completions.create(model=model_id, prompt=prompts[i], max_tokens=16, temperature=0,
                                                 stream=True):
            streamed[i] += chunk.choices[0].text

    def chat_stream():
        for chunk in s.client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": prompts[0]}],
                                                      max_tokens=16, temperature=0, stream=True,
                                                      stream_options={"include_usage": True}):
            if chunk.choices and chunk.choices[0].delta.content:
                chat_streamed.append(chunk.choices[0].delta.content)
            if chunk.usage:
                chat_streamed.append(("usage", chunk.usage.completion_tokens))

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(len(prompts))] + [threading.Thread(target=chat_stream)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(streamed == single, f"{len(prompts)} concurrent streams equal their single requests")
    check("".join(x for x in chat_streamed if isinstance(x, str)) == chat_single and chat_streamed[-1][0] == "usage",
          "a concurrent chat stream equals its single request, and ends with usage")

    # Bad requests: 4xx with an OpenAI error body naming the field.
    def error_of(call):
        try:
            call()
        except openai.APIStatusError as e:
            return e.status_code, e.body
        return None, None

    st, err = error_of(lambda: s.client.completions.create(model=model_id, prompt="x", extra_body={"bogus": 1}))
    check(st == 400 and err["param"] == "bogus" and "unknown field" in err["message"], f"unknown field: {st} {err}")
    st, err = error_of(lambda: s.client.completions.create(model=model_id, prompt="x", temperature=5))
    check(st == 400 and err["param"] == "temperature", f"temperature 5: {st} {err}")
    st, err = error_of(lambda: s.client.completions.create(model=model_id, prompt="x", n=2))
    check(st == 400 and err["param"] == "n", f"n = 2: {st} {err}")
    st, err = error_of(lambda: s.client.completions.create(model=model_id, prompt="word " * 9000, max_tokens=4))
    check(st == 400 and err["code"] == "context_length_exceeded", f"a prompt over the context: {st} {err}")
    st, err = error_of(lambda: s.client.chat.completions.create(model=model_id, messages=[{"role": "robot", "content": "x"}]))
    check(st == 400 and err["param"] == "messages[0].role", f"a bad role: {st} {err}")
    status, body = s.curl(s.url + "/v1/completions", "-d", '{"prompt": ')
    check(status == 400 and "not valid JSON" in json.loads(body)["error"]["message"], f"curl, malformed JSON: {status}")
    status, body = s.curl(s.url + "/v1/completions", "-d", '{"prompt": "x", "max_tokens": "many"}')
    check(status == 400 and json.loads(body)["error"]["param"] == "max_tokens", f"curl, a string max_tokens: {status}")
    status, body = s.curl(s.url + "/v1/completions", "--data-binary", json.dumps({"prompt": "a" * 70000}))
    check(status == 413 and "too large" in json.loads(body)["error"]["message"], f"curl, a 70 kB body: {status}")
    status, body = s.curl(s.url + "/v1/nothing")
    check(status == 404 and "error" in json.loads(body), f"curl, an unknown endpoint: {status}")
    status, body = s.curl("-N", s.url + "/v1/chat/completions", "-d",
                          json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True,
                                      "ignore_eos": True}))
    events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
    check(status == 200 and body.rstrip().endswith("data: [DONE]") and 2 <= len(events) <= 5
          and events[0]["choices"][0]["delta"]["role"] == "assistant" and events[-1]["choices"][0]["finish_reason"] == "length",
          f"curl, a chat stream: {len(events)} events, the last with finish_reason length, then [DONE]")

    # A client that disconnects cancels its sequence.
    before = s.metric("requests_cancelled_total")
    sock = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 500, "stream": True, "ignore_eos": True})
    sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
    sock.recv(4096)
    sock.close()
    deadline = time.time() + 20
    while time.time() < deadline and s.metric("requests_cancelled_total") == before:
        time.sleep(0.1)
    after = s.metric("requests_cancelled_total")
    check(after == before + 1, f"a client that disconnects cancels its sequence (cancelled {before} → {after})")
    check(s.metric("kv_bytes_in_use") == 0, "its cache is given back")

    # SIGTERM: the request in flight finishes, then the server exits 0.
    done = []

    def long_request():
        done.append(s.client.completions.create(model=model_id, prompt="Once", max_tokens=60, temperature=0,
                                                extra_body={"ignore_eos": True}))

    t = threading.Thread(target=long_request)
    t.start()
    check(s.wait_for("sequences_decoding", 1), "the long request is decoding")
    rc = s.stop()
    t.join()
    check(rc == 0 and done and done[0].usage.completion_tokens == 60, f"SIGTERM drains: exit {rc}, the request in flight finished")
finally:
    if s.proc.poll() is None:
        s.proc.kill()

# A full queue: one sequence at a time, none waiting.
q = Server("-P", "1", "--step-tokens", "16", "--max-queue", "0")
try:
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 150, "ignore_eos": True, "stream": True})
    first = subprocess.Popen(["curl", "-s", "-N", q.url + "/v1/completions", "-d", body], stdout=subprocess.PIPE)
    check(q.wait_for("sequences_decoding", 1), "the first request is decoding")
    status, resp = q.curl(q.url + "/v1/completions", "-d", '{"prompt": "x", "max_tokens": 2}')
    check(status == 429 and json.loads(resp)["error"]["type"] == "rate_limit_exceeded", f"a full queue: {status}")
    first.kill()
    first.wait()
finally:
    q.proc.kill()
    q.proc.wait()

print(f"{len(failures)} failures" if failures else "all passed")
sys.exit(1 if failures else 0)
