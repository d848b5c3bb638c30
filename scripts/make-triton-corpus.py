#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Makes the benchmark corpus of issue 19 on a GPU machine with PyTorch and Triton: torch.compile
of a few real model blocks (attention, MLP, layer norm, softmax, reductions) at several shapes and
dtypes, and Triton's own output for every kernel it compiled: the PTX, and the metadata Triton
writes beside it (kernel name, shared memory, num_warps...). Written to OUT (default: $OUT or
build/triton-corpus) as triton-corpus.tar.xz: manifest.json (one entry per kernel: file, name,
shared, num_warps, num_stages, target, and the block that made it) and kernels/<n>.ptx.

    python3 scripts/make-triton-corpus.py [--out DIR] [--quick]
"""
import argparse
import glob
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
import time


def blocks(torch, quick):
    """The model blocks: (name, module or function, input makers)."""
    nn = torch.nn
    F = torch.nn.functional

    class Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            shape = (b, t, self.heads, d // self.heads)
            q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5
            mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
            scores = scores.masked_fill(~mask, float("-inf"))
            y = scores.softmax(dim=-1) @ v
            return self.out(y.transpose(1, 2).reshape(b, t, d))

    class Mlp(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.up = nn.Linear(dim, 4 * dim)
            self.down = nn.Linear(4 * dim, dim)

        def forward(self, x):
            return x + self.down(F.gelu(self.up(self.norm(x)), approximate="tanh"))

    class RmsNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    def softmax_xent(logits, target):
        return F.cross_entropy(logits.float(), target)

    def reductions(x):
        return x.sum(0), x.amax(-1), x.var(-1), x.mean((0, 1))

    dims = [256] if quick else [256, 1024]
    dtypes = [torch.float16] if quick else [torch.float32, torch.float16, torch.bfloat16]
    out = []
    for dim in dims:
        for dtype in dtypes:
            tag = f"d{dim}-{str(dtype).split('.')[-1]}"
            x = lambda dim=dim, dtype=dtype: torch.randn(4, 128, dim, device="cuda", dtype=dtype)
            out.append((f"attention-{tag}", Attention(dim, 8).cuda().to(dtype), [x]))
            out.append((f"mlp-{tag}", Mlp(dim).cuda().to(dtype), [x]))
            out.append((f"rmsnorm-{tag}", RmsNorm(dim).cuda().to(dtype), [x]))
            out.append((f"layernorm-{tag}", nn.LayerNorm(dim).cuda().to(dtype), [x]))
            out.append((f"reductions-{tag}", reductions, [x]))
        vocab = 1000 + dim
        out.append((f"softmax-xent-v{vocab}", softmax_xent,
                    [lambda v=vocab: torch.randn(512, v, device="cuda", dtype=torch.float16),
                     lambda v=vocab: torch.randint(0, v, (512,), device="cuda")]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "build/triton-corpus"))
    parser.add_argument("--quick", action="store_true", help="one shape, one dtype")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    triton_cache = tempfile.mkdtemp(prefix="triton-cache-")
    os.environ["TRITON_CACHE_DIR"] = triton_cache
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cache-")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    import torch  # after the cache settings, which it reads at import
    import triton

    torch.manual_seed(0)
    made_by = {}
    seen = set()
    started = time.time()
    for name, block, inputs in blocks(torch, args.quick):
        compiled = torch.compile(block, dynamic=False)
        with torch.no_grad():
            compiled(*[make() for make in inputs])
        torch.cuda.synchronize()
        for meta in glob.glob(os.path.join(triton_cache, "*", "*.json")):
            if meta not in seen and not os.path.basename(meta).startswith("__grp__"):
                seen.add(meta)
                made_by[meta] = name
        print(f"{name}: {len(seen)} kernel files so far, {time.time() - started:.1f} s",
              flush=True)

    manifest = []
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:xz") as tar:
        for meta_path in sorted(made_by):
            with open(meta_path) as f:
                try:
                    meta = json.load(f)
                except ValueError:
                    continue
            if not isinstance(meta, dict) or "name" not in meta:
                continue
            ptx_path = os.path.join(os.path.dirname(meta_path), meta["name"] + ".ptx")
            if not os.path.exists(ptx_path):
                continue
            with open(ptx_path, "rb") as f:
                ptx = f.read()
            file = f"kernels/{len(manifest):03d}.ptx"
            info = tarfile.TarInfo(file)
            info.size = len(ptx)
            tar.addfile(info, io.BytesIO(ptx))
            target = meta.get("target", {})
            manifest.append({
                "file": file,
                "name": meta["name"],
                "shared": meta.get("shared", 0),
                "num_warps": meta.get("num_warps"),
                "num_stages": meta.get("num_stages"),
                "arch": target.get("arch") if isinstance(target, dict) else None,
                "block": made_by[meta_path],
                "ptx_bytes": len(ptx),
                "sha256": hashlib.sha256(ptx).hexdigest(),
            })
        body = json.dumps({"torch": torch.__version__, "triton": triton.__version__,
                           "device": torch.cuda.get_device_name(),
                           "kernels": manifest}, indent=1).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    path = os.path.join(args.out, "triton-corpus.tar.xz")
    with open(path, "wb") as f:
        f.write(archive.getvalue())
    print(f"{len(manifest)} kernels from {len(set(made_by.values()))} blocks, "
          f"{sum(k['ptx_bytes'] for k in manifest)} bytes of PTX -> {path} "
          f"({len(archive.getvalue())} bytes), {time.time() - started:.1f} s")
    return 0 if manifest else 1


if __name__ == "__main__":
    sys.exit(main())
