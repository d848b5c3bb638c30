#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A new Python process with a warm disk: how soon is a CUDA C++ kernel ready? kcache (its disk
tier) against CuPy's RawModule (its own kernel cache, CUPY_CACHE_DIR).

Each run is a fresh interpreter that imports its library, makes the device's primary context
current, then asks for the kernel and launches it once; "ready" is the time from that request to
the launch having run (synchronized), "import" and "context" come before it. One cold run per
library fills its cache (in a temporary directory), then --runs warm ones; medians in ms.
Exits 0 with a note where there is no GPU.

    python3 bindings/python/bench/warm_process.py [--runs 7] [--json FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
sys.path.insert(0, TESTS)
from cuda_context import driver_or_none  # noqa: E402

KCACHE_CHILD = r"""
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, sys.argv[2])
import kcache, kernels
from cuda_context import Driver
imported = time.perf_counter()
driver = Driver()
driver.make_primary_context_current()
context = time.perf_counter()
cache = kcache.KernelCache(disk_directory=sys.argv[1])
kernel = cache.kernel("warm:empty", lambda: kcache.Source.cuda(kernels.EMPTY_CUDA), "empty_kernel")
kernel.launch(1, 1, ())
driver.synchronize()
ready = time.perf_counter()
stats = cache.stats()
print(json.dumps({"import_ms": (imported - start) * 1e3, "context_ms": (context - imported) * 1e3,
                  "ready_ms": (ready - context) * 1e3, "compiled": stats.compiles,
                  "disk_hits": stats.disk_hits}))
"""

CUPY_CHILD = r"""
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, sys.argv[2])
import cupy, kernels
imported = time.perf_counter()
cupy.cuda.Device(0).use()
cupy.empty(1)
cupy.cuda.Device(0).synchronize()
context = time.perf_counter()
module = cupy.RawModule(code=kernels.EMPTY_CUDA)
kernel = module.get_function("empty_kernel")
kernel((1,), (1,), ())
cupy.cuda.Device(0).synchronize()
ready = time.perf_counter()
print(json.dumps({"import_ms": (imported - start) * 1e3, "context_ms": (context - imported) * 1e3,
                  "ready_ms": (ready - context) * 1e3}))
"""


def run_child(code, directory, env):
    done = subprocess.run([sys.executable, "-c", code, directory, TESTS], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"child failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def series(name, code, directory, env, runs):
    cold = run_child(code, directory, env)
    warm = [run_child(code, directory, env) for _ in range(runs)]
    median = {k: statistics.median(r[k] for r in warm) for k in ("import_ms", "context_ms",
                                                                  "ready_ms")}
    return {"library": name, "cold_ready_ms": cold["ready_ms"], **median,
            "warm_ready_min_ms": min(r["ready_ms"] for r in warm), "runs": warm}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", help="also write the results to this file")
    options = parser.parse_args()
    if driver_or_none() is None:
        print("warm_process: no CUDA driver or GPU here: skipped")
        return 0

    results = []
    with tempfile.TemporaryDirectory() as scratch:
        kcache_dir = os.path.join(scratch, "kcache")
        os.mkdir(kcache_dir, 0o700)
        env = dict(os.environ)
        env.pop("KCACHE_REMOTE", None)
        results.append(series("kcache", KCACHE_CHILD, kcache_dir, env, options.runs))
        try:
            import cupy  # noqa: F401
        except ImportError:
            print("(CuPy is not installed: its row is left out)")
        else:
            cupy_env = dict(env, CUPY_CACHE_DIR=os.path.join(scratch, "cupy"))
            results.append(series("CuPy RawModule", CUPY_CHILD, scratch, cupy_env, options.runs))

    print(f"new process, warm disk: a CUDA C++ kernel ready ({options.runs} warm runs, median ms)")
    print(f"{'library':16} {'import':>8} {'context':>8} {'ready':>8} {'ready min':>10} {'cold ready':>11}")
    for r in results:
        print(f"{r['library']:16} {r['import_ms']:8.1f} {r['context_ms']:8.1f} {r['ready_ms']:8.2f} "
              f"{r['warm_ready_min_ms']:10.2f} {r['cold_ready_ms']:11.1f}")
    if len(results) == 2:
        print(f"CuPy ready / kcache ready: {results[1]['ready_ms'] / results[0]['ready_ms']:.1f}x")
    if options.json:
        with open(options.json, "w") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
