#!/usr/bin/env python3
"""Summarises run.sh's raw output: per task and mode, the median and range over the rounds of the
decode rate, of the speed-up over the same round's plain run, and the acceptance.

    python3 docs/data/speculative/table.py docs/data/speculative/raw.txt
"""
import re
import statistics
import sys

LINE = re.compile(r"round (\d+) \| (\S+) \| (\S+) \| output (\S+) \| \[.*?generated (\d+) tokens at ([\d.]+) tok/s"
                  r"(?:.*?drafted (\d+), accepted (\d+) \(([\d.]+) %\), (\d+) verify passes)?")
runs = {}
for line in open(sys.argv[1]):
    m = LINE.search(line)
    if m:
        rnd, task, mode, same, gen, rate, drafted, accepted, pct, passes = m.groups()
        runs[(int(rnd), task, mode)] = dict(same=same, gen=int(gen), rate=float(rate),
                                            drafted=drafted and int(drafted), accepted=accepted and int(accepted),
                                            passes=passes and int(passes))


def fmt(values, spec):
    return f"{statistics.median(values):{spec}} ({min(values):{spec}}–{max(values):{spec}})"


print("| task | mode | generated | decode tokens/s | speed-up | drafted / accepted (rate) | tokens a target pass | output |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for task in ("copy", "free"):
    for mode in ("plain", "lookup", "int8-draft"):
        rs = sorted((k[0], v) for k, v in runs.items() if k[1] == task and k[2] == mode)
        if not rs:
            continue
        rates = [v["rate"] for _, v in rs]
        ups = [v["rate"] / runs[(r, task, "plain")]["rate"] for r, v in rs]
        same = "same as plain" if all(v["same"] == "same" for _, v in rs) else "DIFFERENT"
        gen = rs[0][1]["gen"]
        if mode == "plain":
            print(f"| {task} | {mode} | {gen} | {fmt(rates, '.1f')} | 1 | | 1 | |")
            continue
        d, a = rs[0][1]["drafted"], rs[0][1]["accepted"]
        per_pass = (gen - 1) / rs[0][1]["passes"]
        print(f"| {task} | {mode} | {gen} | {fmt(rates, '.1f')} | {fmt(ups, '.2f')}× | {d} / {a} ({100 * a / d:.0f} %) "
              f"| {per_pass:.2f} | {same} |")
