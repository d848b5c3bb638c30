# SPDX-License-Identifier: Apache-2.0
"""kcache: compiles a GPU kernel once, and launches it with little overhead.

A kernel is looked up by a key of yours; on a miss only, your generator makes its source, which
kcache compiles once (in this process, on this machine, in a cluster with Redis), keeps in memory
and on disk, and loads into the current CUDA context::

    import kcache, torch

    cache = kcache.KernelCache.from_env()            # or kcache.global_cache()
    kernel = cache.kernel("scale:v1", lambda: kcache.Source.cuda(CODE), "scale")
    x = torch.ones(1 << 20, device="cuda")
    kernel.launch(grid=(x.numel() + 255) // 256, block=256,
                  args=(x, kcache.f32(2.0), kcache.u32(x.numel())),
                  stream=torch.cuda.current_stream())

Kernel arguments need their C type: a typed scalar (:func:`f32`, :func:`i32`, :func:`u64`, ...,
or a numpy scalar such as ``numpy.float32(2.0)``), a device buffer (a torch CUDA tensor, a CuPy
array, anything with ``__cuda_array_interface__`` or ``__dlpack__``), :func:`ptr` for a raw
address, or ``bytes`` for a struct passed by value. A bare Python ``int`` or ``float`` is a
``TypeError``.

A launch may also ask for a thread block cluster (``cluster=2``), a cooperative grid
(``cooperative=True``) or a programmatic dependent launch (``pdl=True``); a kernel's attributes
(:class:`KernelAttribute`, :class:`CacheConfig`), its CUDA handles and its module's globals
(:meth:`Kernel.module_global`) are on :class:`Kernel`.

Errors are :class:`Error` subclasses, one per kind (:class:`CompileError` carries the compiler's
``log``); each has ``.code``, ``.message`` and ``.log``. See docs/python.md.
"""

from __future__ import annotations

from ._errors import (
    ArgumentMismatchError,
    ArtifactGoneError,
    CacheIOError,
    CompileError,
    CorruptEntryError,
    DriverError,
    Error,
    InvalidArgumentError,
    KernelNotFoundError,
    KeyConflictError,
    NoContextError,
    NoDriverError,
    SourceError,
    UnsupportedError,
)
from ._kcache import (
    CacheConfig,
    CacheStats,
    DeviceGlobal,
    Kernel,
    KernelAttribute,
    KernelCache,
    Provenance,
    Scalar,
    Source,
    __version__,
    f32,
    f64,
    global_cache,
    i8,
    i16,
    i32,
    i64,
    ptr,
    reset_thread_stats,
    thread_stats,
    u8,
    u16,
    u32,
    u64,
)

__all__ = [
    "ArgumentMismatchError",
    "ArtifactGoneError",
    "CacheConfig",
    "CacheIOError",
    "CacheStats",
    "CompileError",
    "CorruptEntryError",
    "DeviceGlobal",
    "DriverError",
    "Error",
    "InvalidArgumentError",
    "Kernel",
    "KernelAttribute",
    "KernelCache",
    "KernelNotFoundError",
    "KeyConflictError",
    "NoContextError",
    "NoDriverError",
    "Provenance",
    "Scalar",
    "Source",
    "SourceError",
    "UnsupportedError",
    "__version__",
    "f32",
    "f64",
    "global_cache",
    "i8",
    "i16",
    "i32",
    "i64",
    "ptr",
    "reset_thread_stats",
    "thread_stats",
    "u8",
    "u16",
    "u32",
    "u64",
]
