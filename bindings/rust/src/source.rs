// SPDX-License-Identifier: Apache-2.0
//! What a generator returns, and the one place a Rust generator is called from C: a closure
//! behind kcache's function pointer and user data, with no panic crossing back into C.
use std::any::Any;
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{self, AssertUnwindSafe};

use crate::sys;

/// The outcome of a source generator: the source, or its own reason for failing, which the
/// lookup's error then carries (status `SourceFailed`).
pub type Made = std::result::Result<Source, String>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ptx,
    Cuda,
    Cubin,
    Fatbin,
}

/// A kernel's source as a generator makes it on a miss: PTX, CUDA C++ (with options, headers and
/// name expressions), a cubin or a fatbin. kcache copies it; nothing of it is kept after the call.
///
/// ```no_run
/// let source = kcache::Source::cuda("extern \"C\" __global__ void k(float* x) { x[0] = N; }")
///     .option("-DN=4")
///     .option("-std=c++17");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    kind: Kind,
    bytes: Vec<u8>,
    options: Vec<String>,
    name_expressions: Vec<String>,
    headers: Vec<(String, String)>,
    arch_specific: bool,
    allow_disk_headers: bool,
}

impl Source {
    fn of(kind: Kind, bytes: Vec<u8>) -> Source {
        Source {
            kind,
            bytes,
            options: Vec::new(),
            name_expressions: Vec::new(),
            headers: Vec::new(),
            arch_specific: false,
            allow_disk_headers: false,
        }
    }

    /// PTX text (no NUL byte in it), compiled by nvJitLink or the driver's JIT.
    pub fn ptx(text: impl Into<String>) -> Source {
        Source::of(Kind::Ptx, text.into().into_bytes())
    }

    /// CUDA C++, compiled by NVRTC; the builder calls below apply to it only.
    pub fn cuda(code: impl Into<String>) -> Source {
        Source::of(Kind::Cuda, code.into().into_bytes())
    }

    /// A cubin: an ELF for one exact arch.
    pub fn cubin(bytes: impl Into<Vec<u8>>) -> Source {
        Source::of(Kind::Cubin, bytes.into())
    }

    /// A fatbin, which may hold several archs and PTX.
    pub fn fatbin(bytes: impl Into<Vec<u8>>) -> Source {
        Source::of(Kind::Fatbin, bytes.into())
    }

    /// CUDA C++: one NVRTC option other than the arch ("-DN=4"), in order.
    pub fn option(mut self, option: impl Into<String>) -> Source {
        self.options.push(option.into());
        self
    }

    /// CUDA C++: a template instantiation to compile ("softmax<float, 32>"), which a lookup then
    /// names as its kernel.
    pub fn name_expression(mut self, expression: impl Into<String>) -> Source {
        self.name_expressions.push(expression.into());
        self
    }

    /// CUDA C++: a header given as a string for `#include "name"`.
    pub fn header(mut self, name: impl Into<String>, contents: impl Into<String>) -> Source {
        self.headers.push((name.into(), contents.into()));
        self
    }

    /// CUDA C++: compile for sm_XXa (wgmma, setmaxnreg).
    pub fn arch_specific(mut self, on: bool) -> Source {
        self.arch_specific = on;
        self
    }

    /// CUDA C++: let NVRTC read headers from disk (they are then not fingerprinted).
    pub fn allow_disk_headers(mut self, on: bool) -> Source {
        self.allow_disk_headers = on;
        self
    }

    /// Hands the source to kcache's builder. A setter's failure is recorded in the builder, which
    /// fails the lookup whatever is returned; the first failing status is returned all the same.
    ///
    /// # Safety
    /// `builder` is the builder of the generator call now running.
    unsafe fn fill(&self, builder: *mut sys::kcache_source_builder) -> sys::kcache_status {
        let data = self.bytes.as_ptr();
        let size = self.bytes.len();
        let status = match self.kind {
            Kind::Ptx if self.bytes.contains(&0) => {
                return refuse(builder, "the PTX text contains a NUL byte")
            }
            Kind::Ptx => sys::kcache_source_set_ptx(builder, data as *const c_char, size),
            Kind::Cuda => sys::kcache_source_set_cuda(builder, data as *const c_char, size),
            Kind::Cubin => sys::kcache_source_set_cubin(builder, data as *const c_void, size),
            Kind::Fatbin => sys::kcache_source_set_fatbin(builder, data as *const c_void, size),
        };
        if status != sys::KCACHE_OK {
            return status;
        }
        for option in &self.options {
            let status = with_c_string(builder, option, "an option", |text| {
                sys::kcache_source_add_option(builder, text)
            });
            if status != sys::KCACHE_OK {
                return status;
            }
        }
        for expression in &self.name_expressions {
            let status = with_c_string(builder, expression, "a name expression", |text| {
                sys::kcache_source_add_name_expression(builder, text)
            });
            if status != sys::KCACHE_OK {
                return status;
            }
        }
        for (name, contents) in &self.headers {
            let status = with_c_string(builder, name, "a header's name", |name| {
                sys::kcache_source_add_header(
                    builder,
                    name,
                    contents.as_ptr() as *const c_char,
                    contents.len(),
                )
            });
            if status != sys::KCACHE_OK {
                return status;
            }
        }
        if self.arch_specific {
            let status = sys::kcache_source_set_arch_specific(builder, 1 as c_int);
            if status != sys::KCACHE_OK {
                return status;
            }
        }
        if self.allow_disk_headers {
            return sys::kcache_source_set_allow_disk_headers(builder, 1 as c_int);
        }
        sys::KCACHE_OK
    }
}

/// # Safety
/// `builder` is the builder of the generator call now running.
unsafe fn with_c_string(
    builder: *mut sys::kcache_source_builder,
    text: &str,
    what: &str,
    set: impl FnOnce(*const c_char) -> sys::kcache_status,
) -> sys::kcache_status {
    match CString::new(text) {
        Ok(text) => set(text.as_ptr()),
        Err(_) => refuse(
            builder,
            &format!("{} contains a NUL byte: {:?}", what, text),
        ),
    }
}

/// Fails the generator call with `message` as its reason.
///
/// # Safety
/// `builder` is the builder of the generator call now running.
unsafe fn refuse(builder: *mut sys::kcache_source_builder, message: &str) -> sys::kcache_status {
    // The message is the caller's text: a NUL in it would cut it, so it is replaced.
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // The status returned below fails the lookup even if recording the reason fails.
    let _ = sys::kcache_source_set_error(builder, message.as_ptr());
    sys::KCACHE_SOURCE_FAILED
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// The C generator for a closure of type `F` whose user data is a `*mut Option<F>`. kcache calls
/// a generator at most once per call that needs it; a second call would find the slot empty and
/// fail rather than run anything twice.
///
/// # Safety
/// `user_data` points to an `Option<F>` that lives, unaliased, for the call.
pub(crate) unsafe extern "C" fn call<F>(
    user_data: *mut c_void,
    builder: *mut sys::kcache_source_builder,
) -> sys::kcache_status
where
    F: FnOnce() -> Made,
{
    let slot = &mut *(user_data as *mut Option<F>);
    let made = match panic::catch_unwind(AssertUnwindSafe(|| match slot.take() {
        Some(make) => make(),
        None => Err("the generator was asked twice in one call".to_string()),
    })) {
        Ok(made) => made,
        Err(payload) => Err(format!(
            "the generator panicked: {}",
            panic_message(payload.as_ref())
        )),
    };
    // Filling allocates; a panic there (out of memory) must not unwind into C either.
    panic::catch_unwind(AssertUnwindSafe(|| match &made {
        Ok(source) => source.fill(builder),
        Err(message) => refuse(builder, message),
    }))
    .unwrap_or(sys::KCACHE_INTERNAL_ERROR)
}

/// The function pointer and user data that run `slot`'s closure from C.
pub(crate) fn generator<F>(slot: &mut Option<F>) -> (sys::kcache_make_source, *mut c_void)
where
    F: FnOnce() -> Made,
{
    (Some(call::<F>), slot as *mut Option<F> as *mut c_void)
}
