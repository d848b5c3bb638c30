#include "driver/compiler_api.hpp"

#include <dlfcn.h>
#include <link.h>

#include <array>
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kcache::driver {
namespace {

// The exported name as the header declares it (see cuda_api.cpp).
#define KCACHE_COMPILER_SYMBOL_NAME(name) KCACHE_COMPILER_SYMBOL_TEXT(name)
#define KCACHE_COMPILER_SYMBOL_TEXT(name) #name

struct Opened {
    void* handle = nullptr;
    std::string path;
    std::string tried;  // why each candidate failed, for the error
};

// Tries the environment override first, then the sonames the loader knows, then the toolkit's
// usual folder (a toolkit that is installed but not on the loader path is common).
Opened open_first(const char* override_variable, std::initializer_list<const char*> names) {
    Opened opened;
    std::vector<std::string> candidates;
    if (const char* path = std::getenv(override_variable); path != nullptr && *path != '\0') {
        candidates.emplace_back(path);
    }
    for (const char* name : names) candidates.emplace_back(name);
    for (const char* name : names)
        candidates.push_back(std::string("/usr/local/cuda/lib64/") + name);
    for (const auto& candidate : candidates) {
        opened.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (opened.handle != nullptr) {
            link_map* map = nullptr;
            opened.path = dlinfo(opened.handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr
                              ? map->l_name
                              : candidate;
            return opened;
        }
        const char* why = dlerror();
        opened.tried += "\n  " + candidate + ": " + (why != nullptr ? why : "dlopen failed");
    }
    return opened;
}

Result<const NvrtcApi*> load_nvrtc() {
    Opened lib = open_first("KCACHE_NVRTC_LIBRARY", {"libnvrtc.so.13", "libnvrtc.so"});
    if (lib.handle == nullptr) {
        return Error(Errc::kUnsupported, "NVRTC not found: CUDA C++ cannot be compiled here",
                     lib.tried);
    }
    auto* api = new NvrtcApi();  // lives for the process
    std::string missing;
#define KCACHE_NVRTC_LOAD(name)                                                           \
    if (void* fn = dlsym(lib.handle, KCACHE_COMPILER_SYMBOL_NAME(name)); fn != nullptr) { \
        api->name = reinterpret_cast<decltype(api->name)>(fn);                            \
    } else {                                                                              \
        missing += missing.empty() ? #name : ", " #name;                                  \
    }
    KCACHE_NVRTC_FUNCTIONS(KCACHE_NVRTC_LOAD)
#undef KCACHE_NVRTC_LOAD
    if (!missing.empty()) {
        delete api;
        return Error(Errc::kUnsupported, lib.path + " lacks " + missing);
    }
    api->nvrtcVersion(&api->major, &api->minor);
    api->library_path = lib.path;
    return static_cast<const NvrtcApi*>(api);
}

Result<const NvJitLinkApi*> load_nvjitlink() {
    Opened lib = open_first("KCACHE_NVJITLINK_LIBRARY", {"libnvJitLink.so.13", "libnvJitLink.so"});
    if (lib.handle == nullptr) {
        return Error(Errc::kUnsupported, "nvJitLink not found: PTX is left to the driver's JIT",
                     lib.tried);
    }
    auto* api = new NvJitLinkApi();
    std::string missing;
    auto load = [&](auto& slot, const char* symbol) {
        void* fn = dlsym(lib.handle, symbol);
        if (fn == nullptr) {
            missing += missing.empty() ? symbol : std::string(", ") + symbol;
            return;
        }
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(fn);
    };
    load(api->create, "__nvJitLinkCreate_13_0");
    load(api->destroy, "__nvJitLinkDestroy_13_0");
    load(api->add_data, "__nvJitLinkAddData_13_0");
    load(api->complete, "__nvJitLinkComplete_13_0");
    load(api->cubin_size, "__nvJitLinkGetLinkedCubinSize_13_0");
    load(api->cubin, "__nvJitLinkGetLinkedCubin_13_0");
    load(api->error_log_size, "__nvJitLinkGetErrorLogSize_13_0");
    load(api->error_log, "__nvJitLinkGetErrorLog_13_0");
    load(api->info_log_size, "__nvJitLinkGetInfoLogSize_13_0");
    load(api->info_log, "__nvJitLinkGetInfoLog_13_0");
    load(api->version, "nvJitLinkVersion");
    if (!missing.empty()) {
        delete api;
        return Error(Errc::kUnsupported, lib.path + " lacks " + missing);
    }
    api->version(&api->major, &api->minor);
    api->library_path = lib.path;
    return static_cast<const NvJitLinkApi*>(api);
}

}  // namespace

const Result<const NvrtcApi*>& nvrtc_api() {
    static const Result<const NvrtcApi*> api = load_nvrtc();
    return api;
}

const Result<const NvJitLinkApi*>& nvjitlink_api() {
    static const Result<const NvJitLinkApi*> api = load_nvjitlink();
    return api;
}

}  // namespace kcache::driver
