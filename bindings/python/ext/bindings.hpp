// SPDX-License-Identifier: Apache-2.0
// What the extension's files share: the typed scalar, the kernel object, errors as Python
// exceptions and the launch path.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "kcache/kcache.hpp"

namespace kcache::python {

namespace nb = nanobind;

// A kernel argument with its C type said: kcache.f32(1.0), kcache.u64(n), kcache.ptr(x).
struct Scalar {
    alignas(8) unsigned char bytes[8] = {};
    std::uint8_t size = 0;
    const char* type_name = "";  // "f32", ...: a static string
};

// A kernel handle and the cache it came from, which the handle keeps alive: a KernelHandle must
// not outlive its KernelCache.
struct Kernel {
    KernelHandle handle;
    nb::object cache;
};

// The Python exception for `error` (a kcache.Error subclass per code), with `cause` as its
// __cause__ when given (an exception a source generator raised).
nb::object error_object(const Error& error, nb::handle cause = {});
// Raises it; a cause that is no Exception (KeyboardInterrupt, SystemExit) is raised as it is.
[[noreturn]] void raise_error(const Error& error, nb::handle cause = {});

// kernel.launch(grid, block, args, shared_mem, stream, *, cluster, cooperative, pdl).
void launch(const Kernel& kernel, nb::handle grid, nb::handle block, nb::handle args,
            std::uint32_t shared_mem, nb::handle stream, nb::handle cluster, bool cooperative,
            bool pdl);

// The address of a device buffer (torch tensor, CuPy array, __cuda_array_interface__, DLPack) or
// of a raw int; TypeError for anything else.
std::uint64_t device_pointer(nb::handle object);

void bind_scalars(nb::module_& m);

}  // namespace kcache::python
