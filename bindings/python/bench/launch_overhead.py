#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Launch overhead per call from Python: kcache's Kernel.launch against CuPy's RawKernel and a raw
cuLaunchKernel through ctypes (every argument prepared once: the floor of a Python launch).

Each row launches the same kernel `--calls` times in a loop on the default stream, then
synchronizes; the median of `--reps` such loops, in microseconds per call. Prints a table of
ratios measured side by side in one process; exits 0 with a note where there is no GPU.

    python3 bindings/python/bench/launch_overhead.py [--calls 20000] [--reps 7] [--json FILE]
"""

import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import kernels  # noqa: E402
from cuda_context import driver_or_none  # noqa: E402


def measure(call, synchronize, calls, reps):
    for _ in range(min(calls, 2000)):
        call()
    synchronize()
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        synchronize()
        samples.append((time.perf_counter_ns() - start) / calls / 1000.0)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", help="also write the rows to this file")
    options = parser.parse_args()

    driver = driver_or_none()
    if driver is None:
        print("launch_overhead: no CUDA driver or GPU here: skipped")
        return 0
    import kcache
    import numpy as np

    driver.make_primary_context_current()
    sync = driver.synchronize
    n = 1 << 20
    pointer = ctypes.c_uint64()
    driver.check(driver.lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(4 * n)),
                 "cuMemAlloc")
    address = pointer.value

    cache = kcache.KernelCache()  # memory only: nothing on the user's disk
    empty = cache.kernel("bench:empty", lambda: kcache.Source.ptx(kernels.EMPTY_PTX),
                         "empty_kernel")
    scale = cache.kernel("bench:scale", lambda: kcache.Source.ptx(kernels.SCALE_PTX),
                         "scale_kernel")
    grid, block = 1, 32  # the kernels guard their index; n only sizes the buffer

    rows = []  # (name, microseconds per call)

    def row(name, call):
        rows.append((name, measure(call, sync, options.calls, options.reps)))

    raw_empty = driver.launcher(driver.load_function(kernels.EMPTY_PTX, "empty_kernel"),
                                grid, block, [])
    raw_scale = driver.launcher(driver.load_function(kernels.SCALE_PTX, "scale_kernel"),
                                grid, block, [ctypes.c_uint64(address), ctypes.c_float(1.0),
                                              ctypes.c_uint32(0)])
    row("ctypes cuLaunchKernel, no args", raw_empty)
    row("kcache launch, no args", lambda: empty.launch(grid, block, ()))

    f1, zero = kcache.f32(1.0), kcache.u32(0)
    device = kcache.ptr(address)
    row("ctypes cuLaunchKernel, 3 args", raw_scale)
    row("kcache launch, 3 args (kcache.ptr, f32, u32)",
        lambda: scale.launch(grid, block, (device, f1, zero)))
    row("kcache launch, 3 args (numpy scalars)",
        lambda: scale.launch(grid, block, (device, np.float32(1.0), np.uint32(0))))
    make = lambda: kcache.Source.ptx(kernels.SCALE_PTX)
    row("kcache lookup by key + launch, 3 args",
        lambda: cache.kernel("bench:scale", make, "scale_kernel").launch(
            grid, block, (device, f1, zero)))

    try:
        import torch

        if torch.cuda.is_available():
            tensor = torch.zeros(n, device="cuda")
            row("kcache launch, 3 args (torch tensor)",
                lambda: scale.launch(grid, block, (tensor, f1, zero)))
            row("torch: tensor.mul_(1.0) (for scale)", lambda: tensor.mul_(1.0))
    except ImportError:
        pass
    try:
        import cupy

        array = cupy.zeros(n, dtype=cupy.float32)
        raw_kernel = cupy.RawKernel(kernels.EMPTY_CUDA, "empty_kernel")
        scale_module = cupy.RawModule(code=_SCALE_CUDA)
        cupy_scale = scale_module.get_function("scale_kernel")
        row("CuPy RawKernel, no args", lambda: raw_kernel((grid,), (block,), ()))
        row("CuPy RawKernel, 3 args (cupy array, numpy scalars)",
            lambda: cupy_scale((grid,), (block,), (array, np.float32(1.0), np.uint32(0))))
        row("kcache launch, 3 args (cupy array, numpy scalars)",
            lambda: scale.launch(grid, block, (array, np.float32(1.0), np.uint32(0))))
    except ImportError:
        pass

    floor = {0: rows[0][1], 3: rows[2][1]}
    cupy_rows = {name: us for name, us in rows if name.startswith("CuPy")}
    print(f"launch overhead per call ({options.calls} calls x {options.reps} reps, median; "
          f"Python {platform.python_version()}, kcache {kcache.__version__})")
    print(f"{'launch':55} {'us/call':>8} {'/ ctypes':>9} {'/ CuPy':>8}")
    for name, us in rows:
        args = 0 if "no args" in name else 3
        versus_cupy = ""
        cupy_name = ("CuPy RawKernel, no args" if args == 0 else
                     "CuPy RawKernel, 3 args (cupy array, numpy scalars)")
        if cupy_name in cupy_rows:
            versus_cupy = f"{us / cupy_rows[cupy_name]:8.2f}x"
        print(f"{name:55} {us:8.2f} {us / floor[args]:8.2f}x {versus_cupy:>9}")
    if options.json:
        with open(options.json, "w") as out:
            json.dump([{"launch": name, "us_per_call": us} for name, us in rows], out, indent=1)
    driver.lib.cuMemFree_v2(ctypes.c_uint64(address))
    return 0


# The scale kernel as CUDA C++ for CuPy (its RawModule compiles CUDA C++; the PTX path differs).
_SCALE_CUDA = r"""
extern "C" __global__ void scale_kernel(float* data, float factor, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}
"""

if __name__ == "__main__":
    sys.exit(main())
