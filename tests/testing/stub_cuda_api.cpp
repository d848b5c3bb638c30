// SPDX-License-Identifier: Apache-2.0
#include "testing/stub_cuda_api.hpp"

#include <cstddef>

namespace kcache::fakes {

Stub stub;
thread_local CUcontext current_context = nullptr;

// The kernels every stub module and library holds, with their parameter layouts.
const std::map<std::string, std::vector<KernelParam>>& layouts() {
    static const std::map<std::string, std::vector<KernelParam>> kLayouts = {
        {"scale", {{0, 8}, {8, 4}}},
        {"add", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}},
    };
    return kLayouts;
}

namespace {

CUresult stub_ctx_get_current(CUcontext* context) {
    {
        std::lock_guard lock(stub.mutex);
        ++stub.state.calls.ctx_get_current;
    }
    *context = current_context;
    return CUDA_SUCCESS;
}

CUresult stub_ctx_get_id(CUcontext context, unsigned long long* id) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.ctx_get_id;
    if (stub.state.ctx_get_id_error) return *stub.state.ctx_get_id_error;
    if (context == nullptr) {  // as the driver: the current context's
        if (current_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
        context = current_context;
    }
    auto found = stub.state.contexts.find(context);
    if (found == stub.state.contexts.end()) return CUDA_ERROR_INVALID_CONTEXT;
    if (!found->second.alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *id = found->second.id;
    return CUDA_SUCCESS;
}

CUresult stub_module_load_data(CUmodule* module, const void* image) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.module_load_data;
    if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto found = stub.state.contexts.find(current_context);
    if (found == stub.state.contexts.end() || !found->second.alive) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *module = stub.state.new_handle<CUmodule>();
    stub.state.modules[*module] = StubState::Module{current_context, found->second.id, {}, true};
    return CUDA_SUCCESS;
}

CUresult stub_module_unload(CUmodule module) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.module_unload;
    stub.state.unloaded_modules.push_back(module);
    auto found = stub.state.modules.find(module);
    if (found == stub.state.modules.end() || !found->second.loaded) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    found->second.loaded = false;
    return CUDA_SUCCESS;
}

CUresult stub_module_get_function(CUfunction* function, CUmodule module, const char* name) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.module_get_function;
    auto found = stub.state.modules.find(module);
    if (found == stub.state.modules.end() || !found->second.loaded ||
        !stub.state.lives(found->second.context, found->second.context_id)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (layouts().count(name) == 0) return CUDA_ERROR_NOT_FOUND;
    CUfunction& slot = found->second.functions[name];
    if (slot == nullptr) {  // one function per module and name, as the driver hands out
        slot = stub.state.new_handle<CUfunction>();
        stub.state.module_functions[slot] = module;
    }
    *function = slot;
    return CUDA_SUCCESS;
}

CUresult stub_library_load_data(CUlibrary* library, const void* code, CUjit_option* jit_options,
                                void** /*jit_values*/, unsigned jit_count,
                                CUlibraryOption* library_options, void** library_values,
                                unsigned library_count) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.library_load_data;
    if (code == nullptr) return CUDA_ERROR_INVALID_VALUE;
    StubState::LibraryLoad load;
    load.code = code;
    load.bytes = static_cast<const char*>(code);  // every image here ends with a NUL
    load.jit_options.assign(jit_options, jit_options + jit_count);
    load.library_options = library_count;
    for (unsigned i = 0; i < library_count; ++i) {
        if (library_options[i] == CU_LIBRARY_BINARY_IS_PRESERVED &&
            library_values[i] == fake_handle<void*>(1)) {
            load.preserved = true;
        }
    }
    stub.state.library_loads.push_back(std::move(load));
    *library = stub.state.new_handle<CUlibrary>();
    stub.state.libraries[*library] = StubState::Library{};
    return CUDA_SUCCESS;
}

CUresult stub_library_unload(CUlibrary library) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.library_unload;
    auto found = stub.state.libraries.find(library);
    if (found == stub.state.libraries.end() || !found->second.loaded) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    found->second.loaded = false;
    return CUDA_SUCCESS;
}

CUresult stub_library_get_kernel(CUkernel* kernel, CUlibrary library, const char* name) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.library_get_kernel;
    auto found = stub.state.libraries.find(library);
    if (found == stub.state.libraries.end() || !found->second.loaded) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (layouts().count(name) == 0) return CUDA_ERROR_NOT_FOUND;
    CUkernel& slot = found->second.kernels[name];
    if (slot == nullptr) {
        slot = stub.state.new_handle<CUkernel>();
        stub.state.kernel_names[slot] = name;
    }
    *kernel = slot;
    return CUDA_SUCCESS;
}

CUresult stub_kernel_get_function(CUfunction* function, CUkernel kernel) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.kernel_get_function;
    if (stub.state.kernel_names.count(kernel) == 0) return CUDA_ERROR_INVALID_HANDLE;
    auto found = stub.state.contexts.find(current_context);
    if (found == stub.state.contexts.end() || !found->second.alive) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *function = stub.state.new_handle<CUfunction>();
    return CUDA_SUCCESS;
}

CUresult layout_param(const std::string& name, std::size_t index, std::size_t* offset,
                      std::size_t* size) {
    const std::vector<KernelParam>& layout = layouts().at(name);
    if (index >= layout.size()) return CUDA_ERROR_INVALID_VALUE;
    *offset = layout[index].offset;
    *size = layout[index].size;
    return CUDA_SUCCESS;
}

CUresult stub_kernel_get_param_info(CUkernel kernel, std::size_t index, std::size_t* offset,
                                    std::size_t* size) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.kernel_get_param_info;
    if (stub.state.kernel_param_error) return *stub.state.kernel_param_error;
    auto found = stub.state.kernel_names.find(kernel);
    if (found == stub.state.kernel_names.end()) return CUDA_ERROR_INVALID_HANDLE;
    return layout_param(found->second, index, offset, size);
}

CUresult stub_func_get_param_info(CUfunction function, std::size_t index, std::size_t* offset,
                                  std::size_t* size) {
    std::lock_guard lock(stub.mutex);
    ++stub.state.calls.func_get_param_info;
    if (stub.state.func_param_error) return *stub.state.func_param_error;
    auto owner = stub.state.module_functions.find(function);
    if (owner == stub.state.module_functions.end()) return CUDA_ERROR_INVALID_HANDLE;
    const StubState::Module& module = stub.state.modules.at(owner->second);
    // A function dies with its module's context.
    if (!module.loaded || !stub.state.lives(module.context, module.context_id)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (const auto& [name, handle] : module.functions) {
        if (handle == function) return layout_param(name, index, offset, size);
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace

CudaApi stub_api() {
    CudaApi api;
    api.cuCtxGetCurrent = stub_ctx_get_current;
    api.cuCtxGetId = stub_ctx_get_id;
    api.cuModuleLoadData = stub_module_load_data;
    api.cuModuleUnload = stub_module_unload;
    api.cuModuleGetFunction = stub_module_get_function;
    api.cuLibraryLoadData = stub_library_load_data;
    api.cuLibraryUnload = stub_library_unload;
    api.cuLibraryGetKernel = stub_library_get_kernel;
    api.cuKernelGetFunction = stub_kernel_get_function;
    api.cuKernelGetParamInfo = stub_kernel_get_param_info;
    api.cuFuncGetParamInfo = stub_func_get_param_info;
    api.driver_version = 13000;
    return api;
}

}  // namespace kcache::fakes
