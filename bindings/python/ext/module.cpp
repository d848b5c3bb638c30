// SPDX-License-Identifier: Apache-2.0
// kcache._kcache: the C++ API as Python classes. The GIL is released during lookups, compiles
// and warm-ups, and taken again only to call a caller's source generator (from whichever thread
// runs it: a warm-up's workers too).
#include <Python.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "kcache/version.hpp"

namespace kcache::python {
namespace {

using namespace nb::literals;

// ---- source generators ----

// A caller's `make`, called on a miss with the GIL taken. What it raised is kept in `raised`
// (under the GIL) to become the kcache error's __cause__; kcache sees a kSourceFailed error.
struct Generator {
    nb::handle make;     // the caller's reference keeps it alive through the call
    nb::object* raised;  // written and read with the GIL held

    Result<Source> operator()() const {
        nb::gil_scoped_acquire gil;
        try {
            nb::object made = make();
            Source* source = nullptr;
            if (!nb::try_cast<Source*>(made, source) || source == nullptr) {
                const std::string type = nb::cast<std::string>(
                    nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(made.ptr())))
                                .attr("__qualname__")));
                return Error(Errc::kSourceFailed,
                             "make returned a " + type +
                                 ", not a kcache.Source (Source.ptx, Source.cuda, ...)");
            }
            return *source;
        } catch (nb::python_error& e) {
            nb::handle value = e.value();
            std::string type = nb::cast<std::string>(
                nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr())))
                            .attr("__qualname__")));
            std::string text;
            try {
                text = nb::cast<std::string>(nb::str(value));
            } catch (nb::python_error& unprintable) {
                // An exception whose __str__ raises is still named by its type.
                unprintable.restore();
                PyErr_Clear();
            }
            *raised = nb::borrow(value);
            return Error(Errc::kSourceFailed,
                         "make raised " + type + (text.empty() ? "" : ": " + text));
        } catch (const std::exception& e) {
            return Error(Errc::kSourceFailed, std::string("make failed: ") + e.what());
        }
    }
};

// ---- the cache's options ----

std::chrono::milliseconds milliseconds(double seconds) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

// ---- statistics: every CacheStats field, listed once ----

// clang-format off
#define KCACHE_PY_STATS(X)                                                                       \
    X(hits) X(misses) X(compiles) X(compile_failures) X(compile_ns) X(waits) X(evictions)        \
    X(verify_failures) X(code_gone) X(entries) X(loaded_libraries) X(memory_hits) X(disk_hits)   \
    X(read_backs) X(disk_misses) X(disk_rejected) X(disk_writes) X(disk_errors) X(disk_corrupt)  \
    X(disk_evicted) X(disk_evicted_bytes) X(prebuilds) X(prebuild_compiles) X(config_errors)     \
    X(disk_enabled) X(disk_read_only) X(remote_hits) X(remote_misses) X(remote_errors)           \
    X(remote_timeouts) X(remote_skipped) X(remote_corrupt) X(remote_signature_rejects)           \
    X(remote_too_large) X(remote_writes) X(remote_writes_exists) X(remote_write_errors)          \
    X(remote_writes_dropped) X(remote_breaker_openings) X(remote_lease_won)                      \
    X(remote_lease_waited) X(remote_lease_wait_timeouts) X(remote_lease_takeovers)               \
    X(remote_bytes_in) X(remote_bytes_out) X(remote_enabled)
// clang-format on

// The number of members of an aggregate, so that a field added to CacheStats without a line
// above fails to compile here instead of going missing in Python.
struct AnyField {
    template <class T>
    operator T() const;  // NOLINT: declared only, for the count
};
template <class T, class... Fields>
consteval std::size_t field_count() {
    if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
        return field_count<T, Fields..., AnyField>();
    } else {
        return sizeof...(Fields);
    }
}
#define KCACHE_PY_COUNT(name) +1
static_assert(field_count<CacheStats>() == 0 KCACHE_PY_STATS(KCACHE_PY_COUNT),
              "a CacheStats field is missing from KCACHE_PY_STATS");

nb::dict stats_dict(const CacheStats& stats) {
    nb::dict out;
#define KCACHE_PY_ITEM(name) out[#name] = stats.name;
    KCACHE_PY_STATS(KCACHE_PY_ITEM)
#undef KCACHE_PY_ITEM
    return out;
}

std::string repr_value(std::uint64_t value) {
    return std::to_string(value);
}
std::string repr_value(bool value) {
    return value ? "True" : "False";
}

Kernel make_kernel(KernelHandle handle, nb::handle cache) {
    return Kernel{std::move(handle), nb::borrow(cache)};
}

nb::object lookup(nb::handle self, std::string_view key, nb::handle make,
                  std::string_view kernel_name) {
    KernelCache& cache = *nb::inst_ptr<KernelCache>(self);
    nb::object raised;
    Generator generator{make, &raised};
    std::optional<Result<KernelHandle>> handle;
    {
        nb::gil_scoped_release unlocked;
        handle.emplace(cache.kernel(key, generator, kernel_name));
    }
    if (!*handle) raise_error(handle->error(), raised);
    return nb::cast(make_kernel(std::move(*handle).value(), self));
}

nb::list warm_up(nb::handle self, nb::iterable items, unsigned threads, nb::object progress) {
    KernelCache& cache = *nb::inst_ptr<KernelCache>(self);
    std::vector<nb::object> makes;
    std::vector<WarmUpItem> list;
    for (nb::handle item : items) {
        if (!nb::isinstance<nb::sequence>(item) || nb::len(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "warm_up takes (key, make, kernel_name) tuples");
            throw nb::python_error();
        }
        makes.push_back(nb::borrow(item[1]));
        list.push_back(
            WarmUpItem{nb::cast<std::string>(item[0]), nullptr, nb::cast<std::string>(item[2])});
    }
    // Filled before any generator runs: the generators point into it.
    std::vector<nb::object> raised(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
        list[i].make_source = Generator{makes[i], &raised[i]};
    }
    std::function<void(const WarmUpProgress&)> report;
    if (!progress.is_none()) {
        report = [&progress](const WarmUpProgress& p) {
            nb::gil_scoped_acquire gil;
            try {
                nb::object error = p.error != nullptr ? error_object(*p.error) : nb::none();
                progress(p.done, p.total, nb::str(p.key.data(), p.key.size()), error);
            } catch (nb::python_error& e) {
                e.discard_as_unraisable("kcache warm_up progress callback");
            }
        };
    }
    std::vector<Result<KernelHandle>> results;
    {
        nb::gil_scoped_release unlocked;
        results = cache.warm_up(list, threads, report);
    }
    nb::list out;
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i]) {
            out.append(nb::cast(make_kernel(std::move(results[i]).value(), self)));
        } else {
            out.append(error_object(results[i].error(), raised[i]));
        }
    }
    return out;
}

Provenance prebuild(KernelCache& cache, std::string_view key, nb::handle make, int arch) {
    nb::object raised;
    Generator generator{make, &raised};
    std::optional<Result<Provenance>> built;
    {
        nb::gil_scoped_release unlocked;
        built.emplace(cache.prebuild(key, generator, arch));
    }
    if (!*built) raise_error(built->error(), raised);
    return built->value();
}

template <class T>
T take(Result<T> result) {
    if (!result) raise_error(result.error());
    if constexpr (!std::is_void_v<T>) return std::move(result).value();
}

std::vector<std::pair<std::string, std::string>> header_list(
    const std::map<std::string, std::string>& headers) {
    return {headers.begin(), headers.end()};
}

std::string source_repr(const Source& source) {
    std::string out = std::string("kcache.Source(") + source_kind_name(source.kind) + ", " +
                      std::to_string(source.bytes.size()) + " bytes";
    if (!source.options.empty()) out += ", " + std::to_string(source.options.size()) + " options";
    if (!source.headers.empty()) out += ", " + std::to_string(source.headers.size()) + " headers";
    return out + ")";
}

}  // namespace
}  // namespace kcache::python

NB_MODULE(_kcache, m) {
    using namespace kcache;
    using namespace kcache::python;
    m.doc() = "kcache's C++ library; use the kcache package, which re-exports it.";
    m.attr("__version__") = kVersion;

    bind_scalars(m);

    nb::enum_<Provenance>(m, "Provenance", "How a kernel's code was had (prebuild's answer).")
        .value("COMPILED", Provenance::kCompiled, "compiled on the host now, put to every tier")
        .value("DRIVER_JIT", Provenance::kDriverJit, "PTX given to the driver's JIT, not stored")
        .value("MEMORY_TIER", Provenance::kMemoryTier, "found in this process's memory tier")
        .value("DISK_TIER", Provenance::kDiskTier, "found in the disk tier")
        .value("BINARY", Provenance::kBinary, "the caller's cubin or fatbin, kept as given")
        .value("REMOTE_TIER", Provenance::kRemoteTier, "found in the remote tier (Redis)");

    nb::class_<Source>(m, "Source",
                       "What a kernel is built from: PTX, CUDA C++, a cubin or a fatbin. Made by "
                       "the static methods; a generator returns one on a miss.")
        .def_static(
            "ptx", [](std::string text) { return Source::ptx(std::move(text)); }, "text"_a,
            "PTX text (compiled on the host by nvJitLink, else the driver's JIT).")
        .def_static(
            "cuda",
            [](std::string code, std::vector<std::string> options,
               std::vector<std::string> name_expressions,
               std::map<std::string, std::string> headers, bool arch_specific,
               bool allow_disk_headers) {
                Source source =
                    Source::cuda(std::move(code), std::move(options), std::move(name_expressions));
                source.headers = header_list(headers);
                source.arch_specific = arch_specific;
                source.allow_disk_headers = allow_disk_headers;
                return source;
            },
            "code"_a, "options"_a = std::vector<std::string>{},
            "name_expressions"_a = std::vector<std::string>{},
            "headers"_a = std::map<std::string, std::string>{}, "arch_specific"_a = false,
            "allow_disk_headers"_a = false,
            "CUDA C++ compiled by NVRTC for the device's arch.\n\n"
            "options: NVRTC options other than the arch (\"-DN=4\", \"-std=c++17\").\n"
            "name_expressions: template instantiations to compile (\"scale<float>\"); the kernel\n"
            "    is then looked up by that text. extern \"C\" kernels need none.\n"
            "headers: {include name: contents} for #include \"name\"; headers from disk outside\n"
            "    the toolkit are refused unless allow_disk_headers (then not fingerprinted).\n"
            "arch_specific: compile for sm_XXa (wgmma, setmaxnreg).")
        .def_static(
            "cubin",
            [](nb::bytes data) { return Source::cubin(std::string(data.c_str(), data.size())); },
            "data"_a, "An ELF cubin for one exact arch, loaded as given.")
        .def_static(
            "fatbin",
            [](nb::bytes data) { return Source::fatbin(std::string(data.c_str(), data.size())); },
            "data"_a, "A fatbinary (several archs and/or PTX), loaded as given.")
        .def_prop_ro(
            "kind", [](const Source& s) { return source_kind_name(s.kind); },
            "\"ptx\", \"cuda\", \"cubin\" or \"fatbin\".")
        .def_prop_ro(
            "data", [](const Source& s) { return nb::bytes(s.bytes.data(), s.bytes.size()); },
            "The text or image, as bytes.")
        .def_ro("options", &Source::options)
        .def_ro("name_expressions", &Source::name_expressions)
        .def_prop_ro("headers",
                     [](const Source& s) {
                         nb::dict out;
                         for (const auto& [name, text] : s.headers) out[name.c_str()] = text;
                         return out;
                     })
        .def("__repr__", &source_repr);

    nb::class_<CacheStats>(m, "CacheStats",
                           "What a cache counted (KernelCache.stats()); every field of the C++ "
                           "CacheStats, as attributes and through as_dict().")
#define KCACHE_PY_FIELD(name) .def_ro(#name, &CacheStats::name)
        KCACHE_PY_STATS(KCACHE_PY_FIELD)
#undef KCACHE_PY_FIELD
            .def("as_dict", &stats_dict, "The fields as a dict, in declaration order.")
            .def("__repr__", [](const CacheStats& s) {
                std::string out = "kcache.CacheStats(";
#define KCACHE_PY_REPR(name) out += #name "=" + repr_value(s.name) + ", ";
                KCACHE_PY_STATS(KCACHE_PY_REPR)
#undef KCACHE_PY_REPR
                out.resize(out.size() - 2);
                return out + ")";
            });

    // A C++ enumerator without its line here fails to compile, instead of going missing.
    static_assert(static_cast<int>(KernelAttribute::kClusterSchedulingPolicyPreference) == 6,
                  "a KernelAttribute is missing from the Python enum");
    static_assert(static_cast<int>(CacheConfig::kPreferEqual) == 3,
                  "a CacheConfig is missing from the Python enum");
    nb::enum_<KernelAttribute>(m, "KernelAttribute",
                               "What Kernel.set_attribute sets (CUfunction_attribute's settable "
                               "ones).")
        .value("MAX_DYNAMIC_SHARED_BYTES", KernelAttribute::kMaxDynamicSharedBytes,
               "the most dynamic shared memory a launch may ask for")
        .value("PREFERRED_SHARED_CARVEOUT", KernelAttribute::kPreferredSharedCarveout,
               "percent of L1/shared memory to give shared memory (-1: any)")
        .value("REQUIRED_CLUSTER_WIDTH", KernelAttribute::kRequiredClusterWidth,
               "a cluster shape the kernel requires (sm_90)")
        .value("REQUIRED_CLUSTER_HEIGHT", KernelAttribute::kRequiredClusterHeight)
        .value("REQUIRED_CLUSTER_DEPTH", KernelAttribute::kRequiredClusterDepth)
        .value("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", KernelAttribute::kNonPortableClusterSizeAllowed,
               "1: clusters over 8 blocks where the device has them")
        .value("CLUSTER_SCHEDULING_POLICY_PREFERENCE",
               KernelAttribute::kClusterSchedulingPolicyPreference,
               "CUclusterSchedulingPolicy's values");
    nb::enum_<CacheConfig>(m, "CacheConfig",
                           "A kernel's preference between L1 cache and shared memory "
                           "(Kernel.set_cache_config).")
        .value("PREFER_NONE", CacheConfig::kPreferNone)
        .value("PREFER_SHARED", CacheConfig::kPreferShared)
        .value("PREFER_L1", CacheConfig::kPreferL1)
        .value("PREFER_EQUAL", CacheConfig::kPreferEqual);

    nb::class_<DeviceGlobal>(m, "DeviceGlobal",
                             "A module's __device__ or __constant__ variable in one context "
                             "(Kernel.module_global): unpacks as (address, size).")
        .def(
            "__init__",
            [](DeviceGlobal* self, std::uint64_t address, std::size_t size) {
                new (self) DeviceGlobal{address, size};
            },
            "address"_a, "size"_a)
        .def_ro("address", &DeviceGlobal::address, "Its device address (a CUdeviceptr).")
        .def_ro("size", &DeviceGlobal::size, "Its size in bytes.")
        .def("__iter__",
             [](const DeviceGlobal& g) { return nb::iter(nb::make_tuple(g.address, g.size)); })
        .def("__repr__", [](const DeviceGlobal& g) {
            char address[24];
            std::snprintf(address, sizeof address, "0x%llx",
                          static_cast<unsigned long long>(g.address));
            return std::string("kcache.DeviceGlobal(address=") + address +
                   ", size=" + std::to_string(g.size) + ")";
        });

    nb::class_<Kernel>(m, "Kernel",
                       "One loaded kernel, ready to launch with no lookup in any context on a "
                       "device of its arch. Keeps its code loaded and its cache alive.")
        .def_prop_ro(
            "name", [](const Kernel& k) { return std::string(k.handle.name()); },
            "The kernel's name as looked up.")
        .def_prop_ro(
            "param_count", [](const Kernel& k) { return k.handle.param_count(); },
            "Parameter count as the driver reports it; -1 if it cannot tell.")
        .def_prop_ro(
            "key", [](const Kernel& k) { return k.handle.module().key(); },
            "The cache key it was looked up by.")
        .def_prop_ro(
            "arch", [](const Kernel& k) { return k.handle.module().arch(); },
            "The arch its code was built for (e.g. 90).")
        .def_prop_ro(
            "fingerprint", [](const Kernel& k) { return k.handle.module().fingerprint(); },
            "The artifact's fingerprint (hex), as `kcache ls` names it; empty for code "
            "no tier holds.")
        .def("launch", &launch, "grid"_a, "block"_a, "args"_a = nb::tuple(), "shared_mem"_a = 0,
             "stream"_a.none() = nb::none(), nb::kw_only(), "cluster"_a.none() = nb::none(),
             "cooperative"_a = false, "pdl"_a = false,
             "Launches in the calling thread's current CUDA context.\n\n"
             "grid, block: an int or a tuple of 1 to 3 ints.\n"
             "args: a tuple (or list) of kernel arguments, each a typed scalar (kcache.f32(1.0),\n"
             "    numpy.int32(3)), a device buffer (torch CUDA tensor, CuPy array, an object with\n"
             "    __cuda_array_interface__ or __dlpack__), kcache.ptr(address), or bytes (a\n"
             "    struct by value). A bare Python int or float is a TypeError: its C type is not\n"
             "    known. Count and sizes are checked against the kernel's parameters.\n"
             "shared_mem: dynamic shared memory in bytes; above 48 KiB, first\n"
             "    set_attribute(KernelAttribute.MAX_DYNAMIC_SHARED_BYTES, n).\n"
             "stream: None (the default stream), an int CUstream, a torch.cuda.Stream, a CuPy\n"
             "    stream, or an object with __cuda_stream__.\n"
             "cluster: blocks per thread block cluster (sm_90), an int or 1 to 3 ints that\n"
             "    divide the grid; None: none, or the kernel's own __cluster_dims__.\n"
             "cooperative: every block resident at once (a grid-wide sync may be used).\n"
             "pdl: programmatic dependent launch: may start before the previous kernel in the\n"
             "    stream has finished (it waits where it calls griddepcontrol.wait).")
        .def("__call__", &launch, "grid"_a, "block"_a, "args"_a = nb::tuple(), "shared_mem"_a = 0,
             "stream"_a.none() = nb::none(), nb::kw_only(), "cluster"_a.none() = nb::none(),
             "cooperative"_a = false, "pdl"_a = false,
             "The same as launch() (CuPy's RawKernel spelling).")
        .def(
            "set_attribute",
            [](const Kernel& k, KernelAttribute attribute, int value) {
                take(k.handle.set_attribute(attribute, value));
            },
            "attribute"_a, "value"_a,
            "Sets a KernelAttribute of the kernel (shared by every Kernel of it) in every\n"
            "context it launches in, later ones included; e.g. MAX_DYNAMIC_SHARED_BYTES before\n"
            "a launch asking for more than 48 KiB. A value the device refuses raises\n"
            "InvalidArgumentError and is not kept.")
        .def(
            "set_cache_config",
            [](const Kernel& k, CacheConfig config) { take(k.handle.set_cache_config(config)); },
            "config"_a,
            "Sets the kernel's preference between L1 cache and shared memory (a CacheConfig).")
        .def_prop_ro(
            "native_function",
            [](const Kernel& k) {
                return reinterpret_cast<std::uintptr_t>(take(k.handle.native_function()));
            },
            "The kernel's CUfunction in the calling thread's current context, as an int, for\n"
            "calls kcache does not make (cuFuncGetAttribute, occupancy). Valid while the Kernel\n"
            "lives.")
        .def_prop_ro(
            "native_kernel",
            [](const Kernel& k) {
                return reinterpret_cast<std::uintptr_t>(take(k.handle.native_kernel()));
            },
            "The kernel's CUkernel (serves every context), as an int. Valid while the Kernel\n"
            "lives.")
        .def(
            "module_global",
            [](const Kernel& k, std::string_view name) {
                return take(k.handle.module().global(name));
            },
            "name"_a,
            "A __device__ or __constant__ variable of the kernel's module in the calling\n"
            "thread's current context (each context has its own copy): a DeviceGlobal with its\n"
            "device address and size in bytes, to write (a table of constants) before\n"
            "launching. InvalidArgumentError when the module has no variable of that name\n"
            "(an extern \"C\" or __device__ name as the module spells it).")
        .def("__repr__", [](const Kernel& k) {
            return "kcache.Kernel(" + std::string(k.handle.name()) +
                   ", key=" + k.handle.module().key() + ", sm_" +
                   std::to_string(k.handle.module().arch()) + ")";
        });

    const CacheOptions defaults;
    nb::class_<KernelCache>(m, "KernelCache",
                            "A kernel cache: a key -> a loaded kernel, compiled once per arch and "
                            "kept in memory, on disk and (optionally) in Redis.")
        .def(
            "__init__",
            [](KernelCache* self, std::optional<std::string> disk_directory,
               std::optional<std::string> remote, bool verify, std::size_t max_entries,
               bool read_only, std::size_t compile_workers, bool host_compile,
               std::size_t memory_bytes, bool allow_shared_directory, std::uint64_t disk_max_bytes,
               std::uint64_t disk_max_files, std::optional<std::string> compile_worker_command,
               double remote_lease_time, double remote_lease_wait, bool bundle_warm_ups) {
                CacheOptions options;
                options.disk_directory = disk_directory.value_or("");
                options.remote = remote.value_or("");
                options.verify = verify;
                options.max_entries = max_entries;
                options.read_only = read_only;
                options.compile_workers = compile_workers;
                options.host_compile = host_compile;
                options.memory_bytes = memory_bytes;
                options.allow_shared_directory = allow_shared_directory;
                options.disk_max_bytes = disk_max_bytes;
                options.disk_max_files = disk_max_files;
                options.compile_worker_command = compile_worker_command.value_or("");
                options.remote_lease_time = milliseconds(remote_lease_time);
                options.remote_lease_wait = milliseconds(remote_lease_wait);
                options.bundle_warm_ups = bundle_warm_ups;
                take(options.check());
                nb::gil_scoped_release unlocked;
                new (self) KernelCache(std::move(options));
            },
            "disk_directory"_a = nb::none(), "remote"_a = nb::none(), "verify"_a = defaults.verify,
            "max_entries"_a = defaults.max_entries, "read_only"_a = defaults.read_only,
            "compile_workers"_a = defaults.compile_workers,
            "host_compile"_a = defaults.host_compile, "memory_bytes"_a = defaults.memory_bytes,
            "allow_shared_directory"_a = defaults.allow_shared_directory,
            "disk_max_bytes"_a = defaults.disk_max_bytes,
            "disk_max_files"_a = defaults.disk_max_files, "compile_worker_command"_a = nb::none(),
            "remote_lease_time"_a = defaults.remote_lease_time.count() / 1000.0,
            "remote_lease_wait"_a = defaults.remote_lease_wait.count() / 1000.0,
            "bundle_warm_ups"_a = defaults.bundle_warm_ups,
            "A cache configured by its arguments alone (no environment; see from_env()).\n\n"
            "disk_directory: the disk tier's directory; None: memory only.\n"
            "remote: Redis backends (\"redis://host:6379\"), as KCACHE_REMOTE; None: none.\n"
            "verify: run the generator on every hit and compare fingerprints.\n"
            "max_entries: loaded (key, arch) entries kept; least recently used go beyond it.\n"
            "read_only: read the disk directory, write nothing to it.\n"
            "compile_workers: compile CUDA C++ in this many worker processes (a `kcache`\n"
            "    command: compile_worker_command or KCACHE_COMPILE_WORKER); 0: in this process.\n"
            "host_compile: compile PTX with nvJitLink so it can be stored (else driver JIT).\n"
            "memory_bytes: compiled artifacts kept in memory; disk_max_bytes, disk_max_files:\n"
            "    the disk budgets (0: none). remote_lease_time, remote_lease_wait: seconds.\n"
            "bundle_warm_ups: warm_up links its PTX modules into bundles, and loads the\n"
            "    bundles a tier has, each as one module (KCACHE_BUNDLES).")
        .def_static(
            "from_env",
            []() {
                CacheOptions options = take(CacheOptions::from_env());
                nb::gil_scoped_release unlocked;
                return new KernelCache(std::move(options));
            },
            nb::rv_policy::take_ownership,
            "A cache configured as kcache's command is: KCACHE_* variables, kcache.conf in the "
            "cache directory, then defaults (KCACHE_DIR, else ~/.cache/kcache). A bad setting "
            "raises InvalidArgumentError.")
        .def("kernel", &lookup, "key"_a, "make"_a, "name"_a,
             "The kernel `name` of the module cached under `key` for the current context's "
             "arch.\n\n"
             "On a miss only, calls make() - any callable returning a Source - and compiles it\n"
             "once however many threads ask; a hit does not call it. An exception in make\n"
             "becomes a SourceError (the exception is its __cause__) and nothing is cached. A\n"
             "miss needs a current CUDA context (NoDriverError / NoContextError otherwise).")
        .def("prebuild", &prebuild, "key"_a, "make"_a, "arch"_a,
             "Compiles key's source for `arch` (e.g. 90) into the tiers without loading it: no "
             "GPU needed. Returns the Provenance (COMPILED, DISK_TIER, ...).")
        .def("warm_up", &warm_up, "items"_a, "threads"_a = 16, "progress"_a.none() = nb::none(),
             "Builds many kernels at once: items are (key, make, kernel_name) tuples; sources\n"
             "are made and compiled on `threads` worker threads (make is then called from\n"
             "them, with the GIL) and loaded on this thread, which needs a current context.\n"
             "Returns, in the items' order, a Kernel or the Error instance (not raised) for\n"
             "each. progress(done, total, key, error_or_None) is called after each item.")
        .def("stats", &KernelCache::stats, "What this cache counted (a CacheStats).")
        .def("clear", &KernelCache::clear, nb::call_guard<nb::gil_scoped_release>(),
             "Empties the map; live Kernel objects keep working.")
        .def("__len__", &KernelCache::size, "Loaded entries in the map now.")
        .def("wait_for_uploads", &KernelCache::wait_for_uploads,
             nb::call_guard<nb::gil_scoped_release>(),
             "Waits until queued remote uploads were sent or failed.")
        .def_prop_ro(
            "disk_directory", [](const KernelCache& c) { return c.options().disk_directory; },
            "The disk tier's directory as configured (\"\" for none).");

    m.def("global_cache", &KernelCache::global, nb::rv_policy::reference,
          "The process-wide cache, configured from the environment (KernelCache.from_env()'s "
          "settings, a bad one logged and left at its default); never destroyed.");
    m.def(
        "thread_stats",
        []() {
            const ThreadStats s = thread_stats();
            return std::make_pair(s.hits, s.misses);
        },
        "The calling thread's (hits, misses) across caches since its last reset.");
    m.def("reset_thread_stats", &reset_thread_stats, "Resets the calling thread's counters.");
    // For the tests: a Kernel with no kernel behind it, whose every call is an error.
    m.def("_empty_kernel", []() { return Kernel{}; });
}
