#!/usr/bin/env python3
"""kvinfer-server over a long, mixed run on loopback: nothing is held after the clients are gone.

    test_server_long_run.py SERVER_BINARY MODEL [--requests N]

MODEL: a small model with a tokenizer (CI: the chatml_tiny fixture, fast enough for 1,000 requests
in about a minute on 2 cores). 8 client threads send N requests (default 1,000), half streamed and
half not, with prompts and max_tokens drawn from a fixed seed; every tenth request's client hangs
up after a few milliseconds. Checks: every request ends (completed or cancelled, counted in
/metrics), no sequence runs and no KV byte is held once the clients are gone, and the server's
resident memory grows by at most LIMIT_MIB over the last 60 % of the run (after the first 40 % has
warmed its allocator). Uses only the standard library. Exits 0 when all pass, 1 on a failure.
"""
import argparse
import http.client
import json
import os
import random
import re
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
ap.add_argument("--requests", type=int, default=1000)
ap.add_argument("--no-rss-check", action="store_true",
                help="report resident memory without bounding it (a sanitizer's allocator keeps freed memory)")
args = ap.parse_args()

LIMIT_MIB = 8  # resident growth allowed over the last 60 % of the run
WORDS = ("the quick brown fox jumps over the lazy dog while a cache of keys and values grows by one row "
         "for every token that the model reads or writes").split()

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


# $KVINFER_SERVER_WRAPPER: a command to run the server under (heaptrack, valgrind), for a by-hand look.
wrapper = os.environ.get("KVINFER_SERVER_WRAPPER", "").split()
proc = subprocess.Popen([*wrapper, args.server, "-m", args.model, "--port", "0", "-t", "1", "-P", "8", "--step-tokens", "64"],
                        stderr=subprocess.PIPE, text=True)
line = proc.stderr.readline()
while wrapper and line and "http://" not in line:  # the wrapper's own lines
    line = proc.stderr.readline()
m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
if not m:
    raise SystemExit(f"the server did not start: {line}{proc.stderr.read()}")
port = int(m.group(1))
# The server's stderr is drained so that it can never block on a full pipe.
threading.Thread(target=proc.stderr.read, daemon=True).start()


def metrics():
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {k: float(v) for k, v in re.findall(r"^kvinfer_(\w+(?:\{[^}]*\})?) (\S+)$", text, re.M)}


def server_pid():
    """The server's pid: the process itself, or the wrapper's child running it."""
    if not wrapper:
        return proc.pid
    out = subprocess.run(["pgrep", "-f", "-n", re.escape(args.server)], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else proc.pid


def rss_kib():
    with open(f"/proc/{server_pid()}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def request(i, rng):
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12 if i % 10 == 9 else 40)))
    body = {"prompt": prompt, "max_tokens": rng.randint(4, 48), "temperature": 0.8, "seed": i,
            "stream": i % 2 == 0}
    if i % 10 == 9:  # abandoned: a long request goes out, and the client leaves while it runs
        body.update(max_tokens=150, ignore_eos=True)  # with its short prompt, within chatml_tiny's 256 positions
    data = json.dumps(body)
    if i % 10 == 9:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n{data}".encode())
        time.sleep(rng.uniform(0.001, 0.01))
        sock.close()
        return "abandoned"
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", data, {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    if r.status != 200:
        return f"status {r.status}: {text[:200]}"
    if body["stream"]:
        return "ok" if text.rstrip().endswith("data: [DONE]") else f"stream without [DONE]: {text[-200:]}"
    return "ok" if json.loads(text)["object"] == "text_completion" else f"bad body: {text[:200]}"


results = []
lock = threading.Lock()
next_request = [0]
checkpoints = {}


def client(seed):
    rng = random.Random(seed)
    while True:
        with lock:
            i = next_request[0]
            if i >= args.requests:
                return
            next_request[0] += 1
        outcome = request(i, rng)
        with lock:
            results.append(outcome)
            done = len(results)
            if done % (args.requests // 10) == 0:
                checkpoints[done] = rss_kib()


try:
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    bad = [r for r in results if r not in ("ok", "abandoned")]
    check(len(results) == args.requests and not bad,
          f"{args.requests} requests in {elapsed:.1f} s: {results.count('ok')} answered, "
          f"{results.count('abandoned')} abandoned{'; ' + bad[0] if bad else ''}")

    # Every sequence ends: those whose clients left are cancelled within a few heartbeats.
    deadline = time.time() + 15
    while time.time() < deadline:
        mt = metrics()
        if mt["sequences_decoding"] == 0 and mt["sequences_prefilling"] == 0 and mt["requests_queued"] == 0:
            break
        time.sleep(0.05)
    mt = metrics()
    ended = mt["requests_completed_total"] + mt["requests_cancelled_total"]
    rejected = sum(v for k, v in mt.items() if k.startswith("http_requests_rejected_total"))
    # (How many of the abandoned requests were still running when their clients left depends on the
    # machine's speed; test_server_hostile.py cancels long ones deterministically.)
    check(ended == args.requests and rejected == 0,
          f"every request ended: {mt['requests_completed_total']:.0f} completed + "
          f"{mt['requests_cancelled_total']:.0f} cancelled (their clients left) = {ended:.0f}, {rejected:.0f} refused")
    check(mt["sequences_decoding"] == 0 and mt["sequences_prefilling"] == 0 and mt["requests_queued"] == 0,
          "no sequence runs or waits once the clients are gone")
    check(mt["kv_bytes_in_use"] == 0, f"no KV byte is held: kv_bytes_in_use {mt['kv_bytes_in_use']:.0f}")
    print("resident memory (MiB) after every tenth of the requests: " +
          ", ".join(f"{checkpoints[k] / 1024:.1f}" for k in sorted(checkpoints)), flush=True)
    warm, last = checkpoints[args.requests * 4 // 10], checkpoints[args.requests]
    growth = (last - warm) / 1024
    check(growth <= LIMIT_MIB or args.no_rss_check, f"resident memory {warm / 1024:.1f} MiB after {args.requests * 4 // 10} requests, "
          f"{last / 1024:.1f} MiB after {args.requests}: grew {growth:.1f} MiB (at most {LIMIT_MIB})")
    # A drain with nothing in flight: the server exits 0 at once.
    os.kill(server_pid(), signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, f"SIGTERM afterwards: exit {rc}")
finally:
    if proc.poll() is None:
        proc.kill()
    proc.wait()

print(f"{len(failures)} failures" if failures else "all passed")
sys.exit(1 if failures else 0)
