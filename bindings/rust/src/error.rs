// SPDX-License-Identifier: Apache-2.0
//! kcache's errors: a status and the full message the C API recorded for the failing call.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

use crate::sys;

/// What went wrong: one variant per `kcache_status` other than `KCACHE_OK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// libcuda.so.1 could not be loaded or initialised.
    NoDriver,
    /// The calling thread has no current CUDA context.
    NoContext,
    /// The compiler or JIT rejected the source; the log is in the message.
    CompileFailed,
    /// The caller's source generator failed (returned an error or panicked).
    SourceFailed,
    /// Verification: a key was reused for different source.
    KeyConflict,
    /// Launch arguments do not match the kernel's parameters.
    ArgumentMismatch,
    /// The module has no kernel of that name.
    KernelNotFound,
    /// Bad input from the caller.
    InvalidArgument,
    /// Any other error reported by the CUDA driver.
    DriverError,
    /// A capability is missing (old driver, no nvJitLink).
    Unsupported,
    /// A stored entry failed its checks.
    CorruptEntry,
    /// A file or directory operation failed.
    IoError,
    /// Code loaded without its bytes, which another context needed: look the key up again.
    ArtifactGone,
    /// An allocation failed.
    OutOfMemory,
    /// An unexpected failure inside kcache (a bug: report it).
    InternalError,
    /// A status this crate does not know (a newer library).
    Other(u32),
}

impl Status {
    pub(crate) fn from_raw(status: sys::kcache_status) -> Status {
        match status {
            sys::KCACHE_NO_DRIVER => Status::NoDriver,
            sys::KCACHE_NO_CONTEXT => Status::NoContext,
            sys::KCACHE_COMPILE_FAILED => Status::CompileFailed,
            sys::KCACHE_SOURCE_FAILED => Status::SourceFailed,
            sys::KCACHE_KEY_CONFLICT => Status::KeyConflict,
            sys::KCACHE_ARGUMENT_MISMATCH => Status::ArgumentMismatch,
            sys::KCACHE_KERNEL_NOT_FOUND => Status::KernelNotFound,
            sys::KCACHE_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::KCACHE_DRIVER_ERROR => Status::DriverError,
            sys::KCACHE_UNSUPPORTED => Status::Unsupported,
            sys::KCACHE_CORRUPT_ENTRY => Status::CorruptEntry,
            sys::KCACHE_IO_ERROR => Status::IoError,
            sys::KCACHE_ARTIFACT_GONE => Status::ArtifactGone,
            sys::KCACHE_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::KCACHE_INTERNAL_ERROR => Status::InternalError,
            other => Status::Other(other),
        }
    }

    /// The C value of this status.
    pub fn raw(self) -> sys::kcache_status {
        match self {
            Status::NoDriver => sys::KCACHE_NO_DRIVER,
            Status::NoContext => sys::KCACHE_NO_CONTEXT,
            Status::CompileFailed => sys::KCACHE_COMPILE_FAILED,
            Status::SourceFailed => sys::KCACHE_SOURCE_FAILED,
            Status::KeyConflict => sys::KCACHE_KEY_CONFLICT,
            Status::ArgumentMismatch => sys::KCACHE_ARGUMENT_MISMATCH,
            Status::KernelNotFound => sys::KCACHE_KERNEL_NOT_FOUND,
            Status::InvalidArgument => sys::KCACHE_INVALID_ARGUMENT,
            Status::DriverError => sys::KCACHE_DRIVER_ERROR,
            Status::Unsupported => sys::KCACHE_UNSUPPORTED,
            Status::CorruptEntry => sys::KCACHE_CORRUPT_ENTRY,
            Status::IoError => sys::KCACHE_IO_ERROR,
            Status::ArtifactGone => sys::KCACHE_ARTIFACT_GONE,
            Status::OutOfMemory => sys::KCACHE_OUT_OF_MEMORY,
            Status::InternalError => sys::KCACHE_INTERNAL_ERROR,
            Status::Other(other) => other,
        }
    }

    /// The status's name as kcache's messages spell it ("compile-failed").
    pub fn name(self) -> &'static str {
        // SAFETY: kcache_status_name returns a static NUL-terminated string for any value.
        unsafe { static_str(sys::kcache_status_name(self.raw())) }
    }

    /// True for the two statuses that mean "no GPU to use here".
    pub fn is_no_gpu(self) -> bool {
        self == Status::NoDriver || self == Status::NoContext
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed kcache call: its status, the full message ("<status>: <message>", then for a compile
/// the compiler's log on the next lines) and the compiler's log alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
    log: String,
}

impl Error {
    /// The error the calling thread's last failing kcache call recorded, which a failing call has
    /// just set: read on the same thread, right after it.
    pub(crate) fn last(status: sys::kcache_status) -> Error {
        // SAFETY: both return thread-owned NUL-terminated strings, never NULL, valid until this
        // thread's next failing call; they are copied at once.
        let (message, log) = unsafe {
            (
                owned(sys::kcache_last_error_message()),
                owned(sys::kcache_last_error_log()),
            )
        };
        Error {
            status: Status::from_raw(status),
            message,
            log,
        }
    }

    /// An error found on the Rust side, before any C call, worded as kcache words its own.
    pub(crate) fn new(status: Status, message: &str) -> Error {
        Error {
            status,
            message: format!("{}: {}", status.name(), message),
            log: String::new(),
        }
    }

    /// What went wrong.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The full message, as `kcache_last_error_message` gave it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The compiler's or JIT's own log ("" when there was none).
    pub fn log(&self) -> &str {
        &self.log
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// kcache's result.
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for `KCACHE_OK`, else the calling thread's last error.
pub(crate) fn check(status: sys::kcache_status) -> Result<()> {
    if status == sys::KCACHE_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}

/// # Safety
/// `text` is NULL or a NUL-terminated string that lives for the program.
pub(crate) unsafe fn static_str(text: *const c_char) -> &'static str {
    if text.is_null() {
        return "";
    }
    CStr::from_ptr(text).to_str().unwrap_or("")
}

/// # Safety
/// `text` is NULL or a NUL-terminated string valid for this call.
pub(crate) unsafe fn owned(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    CStr::from_ptr(text).to_string_lossy().into_owned()
}
