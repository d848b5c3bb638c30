// SPDX-License-Identifier: Apache-2.0
// A CPU stub of the CUDA driver's entry points (driver::CudaApi) for CudaCode's tests: it models
// contexts (told apart by ID, addresses reused), modules bound to the context current at their
// load, and libraries for every context, and records what it was asked.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "driver/cuda_api.hpp"
#include "driver/driver.hpp"

namespace kcache::fakes {

using driver::CudaApi;
using driver::KernelParam;

// The kernels every stub module and library holds, with their parameter layouts.
const std::map<std::string, std::vector<KernelParam>>& layouts();

template <class Handle>
Handle fake_handle(std::uintptr_t value) {
    return reinterpret_cast<Handle>(value);  // NOLINT(performance-no-int-to-ptr): never deref'd
}

// Everything the stub driver knows. The CudaApi entries are plain function pointers, so they
// reach it through `stub` below; a test resets it before each case.
struct StubState {
    struct Context {
        unsigned long long id = 0;
        bool alive = true;
    };
    struct Module {
        CUcontext context = nullptr;  // the context current at the load, by address and ID
        unsigned long long context_id = 0;
        std::map<std::string, CUfunction> functions;
        bool loaded = true;
    };
    struct Library {
        std::map<std::string, CUkernel> kernels;
        bool loaded = true;
    };
    struct LibraryLoad {
        const void* code = nullptr;
        std::string bytes;  // copied at the call: the caller may let them go after
        std::vector<CUjit_option> jit_options;
        bool preserved = false;  // CU_LIBRARY_BINARY_IS_PRESERVED set to 1
        unsigned library_options = 0;
    };
    struct Calls {
        int ctx_get_current = 0;
        int ctx_get_id = 0;
        int module_load_data = 0;
        int module_unload = 0;
        int module_get_function = 0;
        int library_load_data = 0;
        int library_unload = 0;
        int library_get_kernel = 0;
        int kernel_get_function = 0;
        int kernel_get_param_info = 0;
        int func_get_param_info = 0;
    };

    std::map<CUcontext, Context> contexts;
    std::map<CUmodule, Module> modules;
    std::map<CUfunction, CUmodule> module_functions;
    std::map<CUlibrary, Library> libraries;
    std::map<CUkernel, std::string> kernel_names;
    std::vector<LibraryLoad> library_loads;
    std::vector<CUmodule> unloaded_modules;
    Calls calls;
    unsigned long long next_id = 1;
    std::uintptr_t next_context = 0x1000;
    std::uintptr_t next_handle = 0x100000;
    // Forced failures, where set.
    std::optional<CUresult> ctx_get_id_error;
    std::optional<CUresult> func_param_error;
    std::optional<CUresult> kernel_param_error;

    template <class Handle>
    Handle new_handle() {
        next_handle += 0x10;
        return fake_handle<Handle>(next_handle);
    }
    bool lives(CUcontext context, unsigned long long id) const {
        auto found = contexts.find(context);
        return found != contexts.end() && found->second.alive && found->second.id == id;
    }
};

struct Stub {
    std::mutex mutex;  // guards `state`: the race test calls in from eight threads
    StubState state;
};
// The stub the table's entries reach (they are plain function pointers, so there is one per
// process).
extern Stub stub;
// The calling thread's current context, as cuCtxGetCurrent reports it.
extern thread_local CUcontext current_context;

// Only the entries CudaCode calls; the rest stay null so that a new use shows up as a crash.
CudaApi stub_api();

}  // namespace kcache::fakes
