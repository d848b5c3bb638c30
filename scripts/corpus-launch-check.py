#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 19's launch check on a GPU machine with PyTorch, Triton and the kcache package: the model
blocks of make-triton-corpus.py compiled by torch.compile, then run three ways on the same
inputs: eagerly (PyTorch's own result), compiled with Triton launching its kernels, and compiled
with every Triton launch replaced by a launch through kcache of the same kernel, built by kcache
from Triton's own PTX. kcache's outputs must match PyTorch's (within the dtype's tolerance) and
Triton's; every replaced launch is counted, and a block whose kernels did not all go through
kcache fails the check.

    python3 scripts/corpus-launch-check.py [--quick] [--json FILE]

How a launch is replaced: Triton (3.6) builds each kernel's launcher once (CompiledKernel.
_init_handles); the launcher is called as (gridX, gridY, gridZ, stream, function,
packed_metadata, launch_metadata, enter_hook, exit_hook, *args), with args in the kernel's
signature order, constexprs included. The kernel's parameters are the arguments whose type is not
constexpr, then two scratch pointers (global and profile). Inductor's static launcher, which
would bypass Triton's, is turned off.
"""
import argparse
import importlib.util
import json
import os
import struct
import sys
import tempfile
import time


def load_blocks():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make-triton-corpus.py")
    spec = importlib.util.spec_from_file_location("make_triton_corpus", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.blocks


class Replacer:
    """Wraps every Triton launcher; in kcache mode a launch goes through kcache instead."""

    def __init__(self, torch, kcache, cache):
        self.torch = torch
        self.kcache = kcache
        self.cache = cache
        self.through_kcache = False
        self.launches = {"triton": 0, "kcache": 0}
        self.kernels = {}  # Triton's hash -> kcache Kernel
        self.failures = []

    def install(self):
        from triton.compiler import compiler

        original_init = compiler.CompiledKernel._init_handles
        replacer = self

        def init_handles(ck):
            first = ck.module is None
            original_init(ck)
            if first and ck._run is not None and not isinstance(ck._run, Launch):
                ck._run = Launch(replacer, ck, ck._run)

        compiler.CompiledKernel._init_handles = init_handles

    def scalar(self, ty, value):
        k = self.kcache
        ints = {"i1": k.i8, "i8": k.i8, "i16": k.i16, "i32": k.i32, "i64": k.i64, "u1": k.u8,
                "u8": k.u8, "u16": k.u16, "u32": k.u32, "u64": k.u64}
        if ty in ints:
            return ints[ty](int(value))
        if ty in ("fp32", "f32"):
            return k.f32(float(value))
        if ty == "fp64":
            return k.f64(float(value))
        if ty == "fp16":
            return struct.pack("<e", float(value))
        if ty == "bf16":
            return struct.pack("<f", float(value))[2:]  # the high half of the float's bits
        raise TypeError(f"argument type {ty} is not handled by this check")

    def kernel_of(self, ck):
        kernel = self.kernels.get(ck.hash)
        if kernel is None:
            ptx = ck.asm["ptx"]
            kernel = self.cache.kernel(f"triton-check:{ck.hash}",
                                       lambda: self.kcache.Source.ptx(ptx), ck.metadata.name)
            if ck.metadata.shared > 48 * 1024:
                kernel.set_attribute(self.kcache.KernelAttribute.MAX_DYNAMIC_SHARED_BYTES,
                                     ck.metadata.shared)
            self.kernels[ck.hash] = kernel
        return kernel

    def scratch(self, size, grid_size, num_ctas):
        if size <= 0:
            return self.kcache.ptr(0), None
        buffer = self.torch.empty(size * grid_size * num_ctas, dtype=self.torch.uint8,
                                  device="cuda")
        return self.kcache.ptr(buffer.data_ptr()), buffer

    def launch(self, ck, grid, stream, args):
        md = ck.metadata
        kernel = self.kernel_of(ck)
        params = []
        for (name, ty), value in zip(ck.src.signature.items(), args):
            if ty == "constexpr":
                continue
            if ty.startswith("*"):
                address = value.data_ptr() if hasattr(value, "data_ptr") else int(value or 0)
                params.append(self.kcache.ptr(address))
            else:
                params.append(self.scalar(ty, value))
        num_ctas = getattr(md, "num_ctas", 1) or 1
        grid_size = grid[0] * grid[1] * grid[2]
        global_scratch, keep1 = self.scratch(md.global_scratch_size, grid_size, num_ctas)
        profile_scratch, keep2 = self.scratch(getattr(md, "profile_scratch_size", 0), grid_size,
                                              num_ctas)
        params += [global_scratch, profile_scratch]
        if grid_size == 0:
            return
        options = {}
        if num_ctas > 1:
            options["cluster"] = (num_ctas, 1, 1)
        if getattr(md, "launch_cooperative_grid", False):
            options["cooperative"] = True
        if getattr(md, "launch_pdl", False):
            options["pdl"] = True
        kernel.launch(grid=(grid[0] * num_ctas, grid[1], grid[2]), block=32 * md.num_warps,
                      args=tuple(params), shared_mem=md.shared, stream=stream, **options)
        if keep1 is not None or keep2 is not None:
            self.torch.cuda.synchronize()  # the scratch buffers live until the kernel ran


class Launch:
    """Stands where Triton's launcher stood."""

    def __init__(self, replacer, ck, original):
        self.replacer = replacer
        self.ck = ck
        self.original = original

    def __call__(self, grid_x, grid_y, grid_z, stream, function, *rest):
        r = self.replacer
        if not r.through_kcache:
            r.launches["triton"] += 1
            return self.original(grid_x, grid_y, grid_z, stream, function, *rest)
        r.launches["kcache"] += 1
        r.launch(self.ck, (grid_x, grid_y, grid_z), stream, rest[4:])
        return None


def tolerance(torch, dtype):
    return {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}.get(dtype, 1e-4)


def flatten(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one shape, one dtype")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cache-")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch
    import torch._inductor.config as inductor_config
    import kcache

    if hasattr(inductor_config, "use_static_cuda_launcher"):
        inductor_config.use_static_cuda_launcher = False
    torch.manual_seed(0)
    torch.ones(1, device="cuda")  # the device's context, current on this thread
    cache = kcache.KernelCache(disk_directory=tempfile.mkdtemp(prefix="kcache-check-"))
    replacer = Replacer(torch, kcache, cache)
    replacer.install()

    rows = []
    failed = 0
    started = time.time()
    for name, block, inputs in load_blocks()(torch, args.quick):
        inputs = [make() for make in inputs]
        dtype = next((x.dtype for x in inputs if x.is_floating_point()), torch.float32)
        row = {"block": name}
        try:
            with torch.no_grad():
                eager = flatten(block(*inputs))
                compiled = torch.compile(block, dynamic=False)
                replacer.through_kcache = False
                compiled(*inputs)  # compiles (and may launch while tuning): not counted
                torch.cuda.synchronize()
                before = dict(replacer.launches)
                by_triton = flatten(compiled(*inputs))
                torch.cuda.synchronize()
                replacer.through_kcache = True
                by_kcache = flatten(compiled(*inputs))
                torch.cuda.synchronize()
                replacer.through_kcache = False
            row["triton_launches"] = replacer.launches["triton"] - before["triton"]
            row["kcache_launches"] = replacer.launches["kcache"] - before["kcache"]
            tol = tolerance(torch, dtype)
            row["max_error_vs_pytorch"] = max(
                (k.float() - e.float()).abs().max().item() / max(1.0, e.float().abs().max().item())
                for k, e in zip(by_kcache, eager))
            row["max_difference_vs_triton"] = max(
                (k.float() - t.float()).abs().max().item() for k, t in zip(by_kcache, by_triton))
            row["ok"] = (row["kcache_launches"] > 0
                         and row["kcache_launches"] == row["triton_launches"]
                         and row["max_error_vs_pytorch"] <= tol
                         and row["max_difference_vs_triton"] <= tol)
        except Exception as error:  # a block that cannot run says why, and fails the check
            replacer.through_kcache = False
            row["ok"] = False
            row["error"] = f"{type(error).__name__}: {error}"
        failed += 0 if row["ok"] else 1
        rows.append(row)
        print(json.dumps(row), flush=True)

    stats = cache.stats()
    summary = {"blocks": len(rows), "failed": failed, "kernels_through_kcache":
               len(replacer.kernels), "compiles": stats.compiles,
               "seconds": round(time.time() - started, 1), "torch": torch.__version__}
    print("| block | Triton launches | kcache launches | max error vs PyTorch (relative) | "
          "max difference vs Triton | ok |\n|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(f"| {row['block']} | {row.get('triton_launches', '-')} | "
              f"{row.get('kcache_launches', '-')} | {row.get('max_error_vs_pytorch', '-')} | "
              f"{row.get('max_difference_vs_triton', '-')} | "
              f"{'yes' if row['ok'] else 'NO: ' + row.get('error', 'mismatch')} |")
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "blocks": rows}, f, indent=1)
    return 0 if failed == 0 and rows else 1


if __name__ == "__main__":
    sys.exit(main())
