#!/usr/bin/env python3
"""kvinfer-server against careless starts and clients that leave, on loopback.

    test_server_hostile.py SERVER_BINARY MODEL

MODEL: the default model (slow enough that a request of 3,000 tokens is still decoding seconds
later). Checks: an address in use or a bad --host exits with one line (never an abort); option
values that would refuse every request are refused at start (exit 2, naming the option and the
least useful value); a non-streamed request whose client hangs up is cancelled within a second or
two and its KV cache given back; a second SIGTERM stops at once; error responses are counted in
/metrics by status; the default KV budget is at most what the machine has available. Uses only
the standard library (no openai client). Exits 0 when all pass, 1 on a failure, 77 without MODEL.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

server_bin, model = sys.argv[1], sys.argv[2]
if not os.path.exists(model):
    print(f"SKIP: {model} is absent: run tools/fetch_model.sh")
    sys.exit(77)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run_server(*extra, timeout=60):
    """Runs the server to its end (for start errors): (exit code, stderr); None if it kept running."""
    try:
        p = subprocess.run([server_bin, "-m", model, "-t", "1", *extra], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:  # it started: the error was not caught at start (run kills it)
        return None, (e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr or "") + "(still running)"
    return p.returncode, p.stderr


class Server:
    def __init__(self, *extra):
        self.proc = subprocess.Popen([server_bin, "-m", model, "--port", "0", "-t", "1", *extra],
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise SystemExit(f"the server did not start: {line}{self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def metrics_text(self):
        return urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()

    def metric(self, name):
        m = re.search(rf"^kvinfer_{re.escape(name)} (\S+)$", self.metrics_text(), re.M)
        return float(m.group(1)) if m else float("nan")

    def wait_for(self, cond, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return True
            time.sleep(0.02)
        return cond()

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=body.encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:  # a refused body may reset the connection while it is sent
            return None, str(e)

    def raw_request(self, body):
        """Sends a POST /v1/completions and returns the socket, without reading the answer."""
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
        return sock

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def one_line(err):
    return err.count("\n") == 1 and err.startswith("kvinfer-server: ") and "terminate" not in err


# 1. Start errors: one line, a documented status, never SIGABRT.
busy = socket.socket()
busy.bind(("127.0.0.1", 0))
busy.listen(1)
port = busy.getsockname()[1]
code, err = run_server("--port", str(port))
check(code == 1 and one_line(err) and f"cannot listen on 127.0.0.1:{port}" in err and "address already in use" in err,
      f"a port in use: exit {code}, {err.strip()!r}")
busy.close()
code, err = run_server("--host", "256.1.1.1", "--port", "0")
check(code == 2 and one_line(err) and "--host 256.1.1.1" in err, f"--host 256.1.1.1: exit {code}, {err.strip()!r}")
code, err = run_server("--http-threads", "1000000", "--port", "0")
check(code == 2 and one_line(err) and "--http-threads" in err and "1024" in err,
      f"--http-threads 1000000: exit {code}, {err.strip()!r}")
code, err = run_server("--max-body", "0", "--port", "0", timeout=20)
check(code == 2 and one_line(err) and "--max-body 0" in err and "1K" in err, f"--max-body 0: exit {code}, {err.strip()!r}")
code, err = run_server("--kv-budget", "1", "--port", "0", timeout=20)
check(code == 2 and one_line(err) and "--kv-budget 1" in err and "8,192 positions" in err and "give at least" in err,
      f"--kv-budget 1: exit {code}, {err.strip()!r}")
code, err = run_server("--kv-budget", "1", "-c", "512", "--port", "0", timeout=20)
need = int(re.search(r"give at least (\d+)", err).group(1)) if "give at least" in err else 0
check(code == 2 and need > 0, f"--kv-budget 1 -c 512 names the least useful budget ({need} bytes)")
if need:
    s = Server("--kv-budget", str(need), "-c", "512")
    st, body = s.post("/v1/completions", json.dumps({"prompt": "Hello", "max_tokens": 4}))
    check(st == 200, f"--kv-budget {need} -c 512 (the least) serves a request: {st}")
    s.kill()

s = Server("-P", "4", "--step-tokens", "64", "--max-body", "64K")
try:
    # 2. The default KV budget: 90 % of what is left, never more than the machine has available.
    avail = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    budget = s.metric("kv_budget_bytes")
    check(0 < budget <= 0.9 * avail * 1.02, f"default kv_budget_bytes {budget / 2**30:.2f} GiB <= 90 % of MemAvailable "
          f"{avail / 2**30:.2f} GiB")

    # 3. Error responses counted by status.
    before = {st: s.metric(f'http_requests_rejected_total{{status="{st}"}}') for st in (400, 404, 413)}
    s.post("/v1/completions", '{"prompt": ')
    s.post("/v1/completions", json.dumps({"prompt": "x", "bogus": 1}))
    s.post("/v1/nothing", "{}")
    s.post("/v1/completions", json.dumps({"prompt": "a" * 70_000}))
    after = {st: s.metric(f'http_requests_rejected_total{{status="{st}"}}') for st in (400, 404, 413)}
    check(after[400] == before[400] + 2 and after[404] == before[404] + 1 and after[413] == before[413] + 1,
          f"/metrics counts rejected requests by status: {before} -> {after}")

    # 4. Non-streamed requests whose clients hang up are cancelled, and their caches given back.
    cancelled = s.metric("requests_cancelled_total")
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 3000, "ignore_eos": True})
    socks = [s.raw_request(body) for _ in range(3)]
    check(s.wait_for(lambda: s.metric("sequences_decoding") == 3), "three long non-streamed requests are decoding")
    for sock in socks:
        sock.close()
    t0 = time.time()
    gone = s.wait_for(lambda: s.metric("requests_cancelled_total") == cancelled + 3 and s.metric("kv_bytes_in_use") == 0,
                      timeout=20)
    dt = time.time() - t0
    check(gone and dt < 2.5, f"the three are cancelled and their KV given back {dt:.2f} s after their clients left")
    check(s.metric("sequences_decoding") == 0, "nothing decodes for nobody")
finally:
    s.kill()

# 5. SIGTERM drains; a second SIGTERM stops at once, cutting off the requests in flight.
s = Server("-P", "4", "--step-tokens", "64")
try:
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 3000, "ignore_eos": True, "stream": True})
    sock = s.raw_request(body)
    check(s.wait_for(lambda: s.metric("sequences_decoding") == 1), "a 3,000-token stream is decoding")
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    check(s.proc.poll() is None, "after one SIGTERM the server still runs (draining)")
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    try:
        rc = s.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    dt = time.time() - t0
    check(rc == 0 and dt < 3, f"a second SIGTERM stops it: exit {rc} {dt:.2f} s later")
    sock.settimeout(5)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except OSError:
        pass
    check(b"[DONE]" not in received, "the stream was cut off (no [DONE])")
    sock.close()
finally:
    s.kill()

print(f"{len(failures)} failures" if failures else "all passed")
sys.exit(1 if failures else 0)
