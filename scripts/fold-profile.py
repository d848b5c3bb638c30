#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reads `perf script -F tid,ip,sym,dso` output (gzipped or not) from scripts/gpu-profile.sh and
prints, per kernel, where the time under one function goes: its callees one level down (the
function's own time as "(self)"). Usage: fold-profile.py SCRIPT.txt.gz FUNCTION [PROCESSES]
[KERNELS] [RATE_HZ]. FUNCTION matches a frame's symbol exactly, or a prefix of it ending in '*'.
Without FUNCTION ('-'), the top frames of all samples by symbol."""
import collections
import gzip
import sys


def samples(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as text:
        frames = []
        for line in text:
            line = line.rstrip("\n")
            if not line.strip():
                if frames:
                    yield frames
                frames = []
            elif line.startswith("\t"):
                parts = line.strip().split(" ", 1)
                sym = parts[1] if len(parts) > 1 else "?"
                frames.append(sym.rsplit(" (", 1)[0])
        if frames:
            yield frames


def matches(symbol, wanted):
    return symbol.startswith(wanted[:-1]) if wanted.endswith("*") else symbol == wanted


def main():
    path, wanted = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "-"
    processes = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    kernels = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    rate = float(sys.argv[5]) if len(sys.argv) > 5 else 20000.0
    us_per_sample = 1e6 / rate / processes / kernels
    below = collections.Counter()
    total = inside = 0
    for frames in samples(path):  # leaf first
        total += 1
        if wanted == "-":
            below[frames[0]] += 1
            continue
        for depth, symbol in enumerate(frames):
            if matches(symbol, wanted):
                inside += 1
                below[frames[depth - 1] if depth > 0 else "(self)"] += 1
                break
    print(f"{total} samples, {total * us_per_sample:.2f} us a kernel in all")
    if wanted != "-":
        print(f"under {wanted}: {inside * us_per_sample:.2f} us a kernel")
    for symbol, count in below.most_common(25):
        print(f"  {count * us_per_sample:7.2f}  {symbol[:110]}")


main()
