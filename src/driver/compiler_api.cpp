// SPDX-License-Identifier: Apache-2.0
#include "driver/compiler_api.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "util/elf_build_id.hpp"
#include "util/unique_fd.hpp"

namespace kcache::driver {
namespace {

// The exported name as the header declares it (see cuda_api.cpp).
#define KCACHE_COMPILER_SYMBOL_NAME(name) KCACHE_COMPILER_SYMBOL_TEXT(name)
#define KCACHE_COMPILER_SYMBOL_TEXT(name) #name

struct Library {
    const char* label;              // "NVRTC"
    const char* override_variable;  // KCACHE_NVRTC_LIBRARY
    std::initializer_list<const char*> names;
};

const Library kNvrtc{"NVRTC", "KCACHE_NVRTC_LIBRARY", {"libnvrtc.so.13", "libnvrtc.so"}};
const Library kNvJitLink{
    "nvJitLink", "KCACHE_NVJITLINK_LIBRARY", {"libnvJitLink.so.13", "libnvJitLink.so"}};

std::string loaded_path(void* handle, const std::string& fallback) {
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
        *map->l_name != '\0') {
        return map->l_name;
    }
    return fallback;
}

// A loaded object's DT_SONAME, from its dynamic section as the loader relocated it; empty if it
// has none. What dlopen(RTLD_NOLOAD) of a bare name also matches, whatever the file is called.
std::string_view soname_of(const dl_phdr_info& info) {
    for (ElfW(Half) i = 0; i < info.dlpi_phnum; ++i) {
        if (info.dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        const ElfW(Addr) address = info.dlpi_addr + info.dlpi_phdr[i].p_vaddr;
        // NOLINTNEXTLINE(performance-no-int-to-ptr): the loader gives an address
        const auto* dynamic = reinterpret_cast<const ElfW(Dyn)*>(address);
        ElfW(Addr) strings = 0;
        ElfW(Xword) soname = 0;
        bool has_soname = false;
        for (const ElfW(Dyn)* entry = dynamic; entry->d_tag != DT_NULL; ++entry) {
            if (entry->d_tag == DT_STRTAB) strings = entry->d_un.d_ptr;
            if (entry->d_tag == DT_SONAME) {
                soname = entry->d_un.d_val;
                has_soname = true;
            }
        }
        // The loader relocates the addresses of what it loads, not the vDSO's: an address below
        // the object's base is still relative to it.
        if (strings != 0 && strings < info.dlpi_addr) strings += info.dlpi_addr;
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        if (strings != 0 && has_soname) return reinterpret_cast<const char*>(strings + soname);
    }
    return {};
}

// The path of a copy of `library` already in the process, found among the loaded objects by file
// name or SONAME: no file system work, where dlopen(RTLD_NOLOAD) of a bare name searches the
// loader's cache and opens each candidate file (18 system calls a library, paid in every new
// process).
std::optional<std::string> loaded_copy(const Library& library) {
    struct Search {
        const Library* library;
        std::optional<std::string> path;
    } search{&library, std::nullopt};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto* wanted = static_cast<Search*>(data);
            if (info->dlpi_name == nullptr || *info->dlpi_name == '\0') return 0;
            const std::string_view path(info->dlpi_name);
            const std::size_t slash = path.rfind('/');
            const std::string_view file =
                slash == std::string_view::npos ? path : path.substr(slash + 1);
            const std::string_view soname = soname_of(*info);
            for (const char* name : wanted->library->names) {
                if (file == name || soname == name) {
                    wanted->path = std::string(path);
                    return 1;  // stop
                }
            }
            return 0;
        },
        &search);
    return search.path;
}

std::vector<std::string> search_folders() {
    std::vector<std::string> folders;
    auto add_list = [&](const char* list) {
        if (list == nullptr) return;
        std::string_view rest(list);
        while (!rest.empty()) {
            const std::size_t colon = rest.find(':');
            const std::string_view folder = rest.substr(0, colon);
            if (!folder.empty()) folders.emplace_back(folder);
            if (colon == std::string_view::npos) break;
            rest.remove_prefix(colon + 1);
        }
    };
    add_list(std::getenv("LD_LIBRARY_PATH"));
    for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
        if (const char* root = std::getenv(variable); root != nullptr && *root != '\0') {
            folders.push_back(std::string(root) + "/lib64");
            folders.push_back(std::string(root) + "/lib");
        }
    }
    for (const char* folder : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib",
                               "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
        folders.emplace_back(folder);
    }
    return folders;
}

// The build of a file already open: its GNU build ID, or without one its size and modification
// time, which together tell builds apart far better than either alone (a reinstall of the same
// build then costs one recompile per kernel).
std::string build_of_open(int fd, const struct stat& info) {
    if (auto id = util::elf_build_id_of(fd)) return "build-id " + *id;
    return "size " + std::to_string(info.st_size) + " mtime " + std::to_string(info.st_mtime);
}

// The identity of `path` if it is a regular file this process can read; nullopt otherwise. One
// open serves as the existence test and the build's read: a new process pays this search once
// for each compiler it names, before its first kernel.
std::optional<CompilerIdentity> identity_if_readable(std::string path) {
    // Non-blocking: a FIFO named by mistake must not hang the caller.
    const util::UniqueFd file{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    struct stat info {};
    if (!file || fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
    std::string build = build_of_open(file.get(), info);
    return CompilerIdentity{std::move(path), std::move(build)};
}

std::string build_of(const std::string& path) {
    if (auto identity = identity_if_readable(path)) return std::move(identity->build);
    return "unreadable " + path;
}

Result<CompilerIdentity> locate(const Library& library) {
    std::string tried;
    auto found = [](std::string path) {
        std::string build = build_of(path);
        return CompilerIdentity{std::move(path), std::move(build)};
    };
    if (const char* path = std::getenv(library.override_variable);
        path != nullptr && *path != '\0') {
        // Resolved here: dlopen() of a name without a slash would search the loader's path and
        // could load another file than the one whose build was read.
        if (char* resolved = realpath(path, nullptr); resolved != nullptr) {
            std::string full(resolved);
            free(resolved);
            if (auto identity = identity_if_readable(std::move(full))) return std::move(*identity);
        }
        return Error(Errc::kUnsupported, std::string(library.label) +
                                             " not found: " + library.override_variable + "=" +
                                             path + " cannot be read");
    }
    // Already in the process (say, loaded by PyTorch from its own wheel): use that copy.
    if (auto path = loaded_copy(library)) return found(std::move(*path));
    for (const auto& folder : search_folders()) {
        for (const char* name : library.names) {
            std::string path = folder + "/" + name;
            if (auto identity = identity_if_readable(path)) return std::move(*identity);
            tried += "\n  " + path + ": not there";
        }
    }
    // Last, the loader's own search (its cache, the executable's run path): this loads the
    // library, which the search above exists to avoid, but only where nothing else found it.
    for (const char* name : library.names) {
        if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL); handle != nullptr) {
            return found(loaded_path(handle, name));  // stays loaded: the api loader uses it
        }
        const char* why = dlerror();
        tried += std::string("\n  ") + name + ": " + (why != nullptr ? why : "dlopen failed");
    }
    return Error(Errc::kUnsupported, std::string(library.label) + " not found", tried);
}

// dlopen of exactly the identified file, so that what compiles is what the fingerprint names;
// with a `link_map` other than the process's (LM_ID_BASE), a copy of it there (dlmopen;
// LM_ID_NEWLM: a link map of its own).
Result<void*> open_identified(const Library& library, const Result<CompilerIdentity>& identity,
                              Lmid_t link_map = LM_ID_BASE) {
    if (!identity) return identity.error();
    void* handle = link_map != LM_ID_BASE
                       ? dlmopen(link_map, identity->path.c_str(), RTLD_NOW | RTLD_LOCAL)
                       : dlopen(identity->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr && build_of(identity->path) != identity->build) {
        // Replaced (an upgrade) since its identity was read: its output would be stored under
        // the old compiler's name.
        dlclose(handle);
        return Error(Errc::kUnsupported, std::string(library.label) + " at " + identity->path +
                                             " changed since this process named it; restart "
                                             "to use the new one");
    }
    if (handle == nullptr) {
        const char* why = dlerror();
        return Error(Errc::kUnsupported,
                     std::string(library.label) + " at " + identity->path +
                         " cannot be loaded: " + (why != nullptr ? why : "dlopen failed"));
    }
    return handle;
}

// NVRTC's entry points in the library at `handle`, loaded from `path`.
Result<std::unique_ptr<NvrtcApi>> resolve_nvrtc(void* handle, const std::string& path) {
    auto api = std::make_unique<NvrtcApi>();
    std::string missing;
#define KCACHE_NVRTC_LOAD(name)                                                       \
    if (void* fn = dlsym(handle, KCACHE_COMPILER_SYMBOL_NAME(name)); fn != nullptr) { \
        api->name = reinterpret_cast<decltype(api->name)>(fn);                        \
    } else {                                                                          \
        missing += missing.empty() ? #name : ", " #name;                              \
    }
    KCACHE_NVRTC_FUNCTIONS(KCACHE_NVRTC_LOAD)
#undef KCACHE_NVRTC_LOAD
    if (!missing.empty()) return Error(Errc::kUnsupported, path + " lacks " + missing);
    api->nvrtcVersion(&api->major, &api->minor);
    api->library_path = path;
    return api;
}

Result<const NvrtcApi*> load_nvrtc() {
    const auto& identity = nvrtc_identity();
    auto opened = open_identified(kNvrtc, identity);
    if (!opened) {
        return Error(Errc::kUnsupported,
                     opened.error().message() + ": CUDA C++ cannot be compiled here",
                     opened.error().log());
    }
    auto api = resolve_nvrtc(*opened, identity->path);
    if (!api) return api.error();
    return static_cast<const NvrtcApi*>(api->release());  // lives for the process
}

// nvJitLink's entry points in the library at `handle`, loaded from `path`.
Result<std::unique_ptr<NvJitLinkApi>> resolve_nvjitlink(void* handle, const std::string& path) {
    auto api = std::make_unique<NvJitLinkApi>();
    std::string missing;
    auto load = [&](auto& slot, const char* symbol) {
        void* fn = dlsym(handle, symbol);
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
    if (!missing.empty()) return Error(Errc::kUnsupported, path + " lacks " + missing);
    api->version(&api->major, &api->minor);
    api->library_path = path;
    return api;
}

Result<const NvJitLinkApi*> load_nvjitlink() {
    const auto& identity = nvjitlink_identity();
    auto opened = open_identified(kNvJitLink, identity);
    if (!opened) {
        return Error(Errc::kUnsupported,
                     opened.error().message() + ": PTX is left to the driver's JIT",
                     opened.error().log());
    }
    auto api = resolve_nvjitlink(*opened, identity->path);
    if (!api) return api.error();
    return static_cast<const NvJitLinkApi*>(api->release());  // lives for the process
}

}  // namespace

const Result<CompilerIdentity>& nvrtc_identity() {
    static const Result<CompilerIdentity> identity = locate(kNvrtc);
    return identity;
}

const Result<CompilerIdentity>& nvjitlink_identity() {
    static const Result<CompilerIdentity> identity = locate(kNvJitLink);
    return identity;
}

const Result<const NvrtcApi*>& nvrtc_api() {
    static const Result<const NvrtcApi*> api = load_nvrtc();
    return api;
}

const Result<const NvJitLinkApi*>& nvjitlink_api() {
    static const Result<const NvJitLinkApi*> api = load_nvjitlink();
    return api;
}

Result<std::unique_ptr<NvJitLinkApi>> load_nvjitlink_copy() {
    const auto& identity = nvjitlink_identity();
    auto opened = open_identified(kNvJitLink, identity, LM_ID_NEWLM);
    if (!opened) return opened.error();
    auto api = resolve_nvjitlink(*opened, identity->path);
    if (!api) return api.error();
    Lmid_t link_map = LM_ID_BASE;
    if (dlinfo(*opened, RTLD_DI_LMID, &link_map) != 0) {
        const char* why = dlerror();
        return Error(Errc::kUnsupported, "the link map of a copy of " + identity->path +
                                             " is unknown: " + (why != nullptr ? why : "dlinfo"));
    }
    (*api)->link_map = link_map;
    // glibc sets a new thread's character tables up in the C library of the first link map
    // only; the copy's C library reads null pointers for them on any thread it did not start.
    void* init = dlsym(*opened, "__ctype_init");
    if (init == nullptr) {
        return Error(Errc::kUnsupported, "a copy of " + identity->path +
                                             " has no __ctype_init in its C library to call on "
                                             "each thread that uses it");
    }
    (*api)->enter_thread = reinterpret_cast<void (*)()>(init);
    return api;
}

Result<void> nvrtc_usable() {
    if (const auto& api = nvrtc_api(); !api) return api.error();
    return ok();
}

Result<void> nvjitlink_usable() {
    if (const auto& api = nvjitlink_api(); !api) return api.error();
    return ok();
}

Result<std::unique_ptr<NvrtcApi>> load_nvrtc_copy(const NvJitLinkApi& copy) {
    const auto& identity = nvrtc_identity();
    if (copy.link_map == LM_ID_BASE) {
        return Error(Errc::kInvalidArgument, "NVRTC is copied only beside a copy of nvJitLink");
    }
    auto opened = open_identified(kNvrtc, identity, copy.link_map);
    if (!opened) return opened.error();
    return resolve_nvrtc(*opened, identity->path);
}

Result<void> compile_once(const NvrtcApi& nvrtc) {
    nvrtcProgram program = nullptr;
    nvrtcResult rc = nvrtc.nvrtcCreateProgram(
        &program, "extern \"C\" __global__ void kcache_first(int* x) { *x = 1; }\n",
        "kcache_first.cu", 0, nullptr, nullptr);
    if (rc == NVRTC_SUCCESS) {
        rc = nvrtc.nvrtcCompileProgram(program, 0, nullptr);
        std::ignore = nvrtc.nvrtcDestroyProgram(&program);
    }
    if (rc != NVRTC_SUCCESS) {
        return Error(Errc::kUnsupported,
                     std::string("a first compile in a copy of NVRTC failed: ") +
                         nvrtc.nvrtcGetErrorString(rc));
    }
    return ok();
}

}  // namespace kcache::driver
