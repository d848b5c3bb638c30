# SPDX-License-Identifier: Apache-2.0
"""kcache's exceptions: one class per error code, all subclasses of :class:`Error`."""

from __future__ import annotations


class Error(Exception):
    """A kcache call failed.

    Attributes:
        code: the error's kind as kcache names it (``"compile-failed"``, ``"no-driver"``, ...).
        message: what went wrong, with the key it concerns.
        log: the compiler's or JIT's own output, when there is one (else ``""``).
    """

    code = "error"

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log = log

    def __str__(self) -> str:
        if self.log:
            return f"{self.message}\ncompiler log:\n{self.log.rstrip()}"
        return self.message


class NoDriverError(Error):
    """libcuda.so.1 could not be loaded or initialised (no GPU or driver on this machine)."""

    code = "no-driver"


class NoContextError(Error):
    """The calling thread has no current CUDA context (PyTorch or CuPy make one current)."""

    code = "no-context"


class CompileError(Error):
    """The compiler or the driver's JIT rejected the source; ``log`` holds its output."""

    code = "compile-failed"


class SourceError(Error):
    """The source generator (``make``) raised or returned something other than a Source.

    The exception it raised is this one's ``__cause__``. Nothing is cached.
    """

    code = "source-failed"


class KeyConflictError(Error):
    """Verification found a key reused for a different source."""

    code = "key-conflict"


class ArgumentMismatchError(Error, TypeError):
    """Launch arguments do not match the kernel's parameters (count or sizes)."""

    code = "argument-mismatch"


class KernelNotFoundError(Error, LookupError):
    """The module has no kernel of that name."""

    code = "kernel-not-found"


class InvalidArgumentError(Error, ValueError):
    """A bad value from the caller (an empty key, a zero grid, an unknown arch, ...)."""

    code = "invalid-argument"


class DriverError(Error):
    """Any other error the CUDA driver reported."""

    code = "driver-error"


class UnsupportedError(Error):
    """The driver or a compiler lacks a capability (an old driver, no nvJitLink)."""

    code = "unsupported"


class CorruptEntryError(Error):
    """A stored entry failed its checksum or structure checks."""

    code = "corrupt-entry"


class CacheIOError(Error, OSError):
    """A file or directory operation failed."""

    code = "io-error"


class ArtifactGoneError(Error):
    """A kernel's code left the cache before a new context asked for it; look it up again."""

    code = "artifact-gone"


_BY_CODE = {
    cls.code: cls
    for cls in (
        NoDriverError,
        NoContextError,
        CompileError,
        SourceError,
        KeyConflictError,
        ArgumentMismatchError,
        KernelNotFoundError,
        InvalidArgumentError,
        DriverError,
        UnsupportedError,
        CorruptEntryError,
        CacheIOError,
        ArtifactGoneError,
    )
}


def error_class(code: str) -> type[Error]:
    """The class for an error code; :class:`Error` for a code this version does not know."""
    return _BY_CODE.get(code, Error)


__all__ = ["Error", "error_class"] + [cls.__name__ for cls in _BY_CODE.values()]
