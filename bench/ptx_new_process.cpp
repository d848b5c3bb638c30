// SPDX-License-Identifier: Apache-2.0
// Issue 3's warm start as the issue words it: a new process loading 64 PTX kernels, each round
// a new process per mode in turn: kcache from its disk tier (one kernel after another, and all at
// once through warm_up), the floor (the same cubins, read into memory before the clock starts,
// then loaded), the driver's own ComputeCache on the same PTX, and for scale the library API, one
// file per kernel done by hand, and kcache's own work without the driver. Context creation is
// timed apart and left out; everything else a process does is in.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "bench/bench.hpp"
#include "bench/child_process.hpp"
#include "compile/compiler.hpp"
#include "driver/cuda_api.hpp"
#include "driver/device_memory.hpp"
#include "driver/nvjitlink.hpp"
#include "kcache/kernel_cache.hpp"
#include "ptx_kernels.hpp"
#include "store/artifact_format.hpp"
#include "store/cache_directory.hpp"
#include "util/files.hpp"

namespace kcache::bench {
namespace {

constexpr int kKernels = 64;

std::string floor_file(const std::string& directory) {
    return directory + "/floor.cubins";
}
// For scale: the floor's kernels linked into one cubin (when their names and globals allow it).
std::string bundle_file(const std::string& directory) {
    return directory + "/bundle.cubins";
}
// The floor-threads-N modes: the floor's loads on N threads.
constexpr std::string_view kFloorThreads = "floor-threads-";

// Kernel i's name in the bundle: generators reuse names (Triton's triton_poi_fused_0 in many
// graphs), so each is made unique.
std::string bundled_name(const std::string& name, int i) {
    return name + "_kcache_bundle_" + std::to_string(i);
}

// The kernels' PTX linked into one cubin by nvJitLink, each an input of its own, each kernel
// renamed by bundled_name; fails where two inputs define another symbol alike.
Result<std::string> link_bundle(const KernelSet& set, const compile::Target& target) {
    auto session = driver::NvJitLinkSession::create({"-arch=" + target.name()});
    if (!session) return std::move(session).error();
    for (int i = 0; i < set.count(); ++i) {
        std::string ptx = set.ptx[static_cast<std::size_t>(i)];
        const std::string entry = ".entry " + set.name(i);
        const std::size_t at = ptx.find(entry + "(");
        if (at == std::string::npos) {
            return Error(Errc::kInvalidArgument, "no `" + entry + "(` in kernel " + set.key(i));
        }
        ptx.replace(at, entry.size(), ".entry " + bundled_name(set.name(i), i));
        // The size includes the terminating NUL, as nvJitLink expects for PTX text.
        auto added =
            session->add(driver::LinkInput::kPtx, std::string_view(ptx.c_str(), ptx.size() + 1),
                         "kernel" + std::to_string(i) + ".ptx");
        if (!added) return std::move(added).error();
    }
    if (auto completed = session->complete(); !completed) return std::move(completed).error();
    return session->cubin();
}

// The floor's cubins in one file: for each, its size as text on a line, then its bytes.
bool write_cubins(const std::string& path, const std::vector<std::string>& cubins) {
    std::ofstream out(path, std::ios::binary);
    for (const auto& cubin : cubins) out << cubin.size() << '\n' << cubin;
    return static_cast<bool>(out);
}

std::vector<std::string> read_cubins(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<std::string> cubins;
    for (std::size_t size = 0; in >> size;) {
        in.get();  // the newline
        std::string cubin(size, '\0');
        in.read(cubin.data(), static_cast<std::streamsize>(size));
        cubins.push_back(std::move(cubin));
    }
    return cubins;
}

// The disk tier's entry files, in name order (found before any clock starts).
std::vector<std::string> entry_files(const std::string& directory) {
    std::vector<std::string> paths;
    for (const auto& item : std::filesystem::recursive_directory_iterator(directory)) {
        if (item.is_regular_file() && item.path().extension() == ".kc") {
            paths.push_back(item.path().string());
        }
    }
    std::sort(paths.begin(), paths.end());
    return paths;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> compute_cache_env(const std::string& directory) {
    return {{"CUDA_CACHE_DISABLE", "0"},
            {"CUDA_CACHE_PATH", directory + "/compute-cache"},
            {"CUDA_CACHE_MAXSIZE", "4294967296"}};
}

std::optional<ChildRun> run_ptx_child(
    const std::string& mode, const std::string& directory, const std::string& spec,
    const std::vector<std::pair<std::string, std::string>>& environment) {
    auto out = run_self({"--ptx-warm-child", mode, directory, spec}, environment);
    ChildRun run;
    if (!out || std::sscanf(out->c_str(), "%lf %lf %lf %lf %lf %lf %lf", &run.context_ms,
                            &run.total_ms, &run.open_ms, &run.first_ms, &run.launch_ms, &run.faults,
                            &run.driver_ms) != 7) {
        return std::nullopt;
    }
    return run;
}

// Distinct modules: the row length is baked into each softmax's code.
std::vector<std::string> ptx_kernel_set() {
    std::vector<std::string> ptx;
    ptx.reserve(kKernels);
    for (int i = 0; i < kKernels; ++i) ptx.push_back(examples::softmax_rows_ptx(1000 + i));
    return ptx;
}

std::string ptx_kernel_key(int i) {
    return "softmax:" + std::to_string(1000 + i);
}

std::vector<WarmUpItem> ptx_warm_up_items(const std::vector<std::string>& ptx) {
    std::vector<WarmUpItem> items;
    items.reserve(ptx.size());
    for (std::size_t i = 0; i < ptx.size(); ++i) {
        const std::string* text = &ptx[i];
        items.push_back({ptx_kernel_key(static_cast<int>(i)),
                         [text]() -> Result<Source> { return Source::ptx(*text); },
                         "softmax_rows"});
    }
    return items;
}

// `steps` rounds of 64 dependent FMAs over 64 accumulators seeded from memory; `variant` changes
// the constants only, so that kernels of one size are distinct modules. Its parameters are
// softmax_rows's, and like it, it returns at once when n is 0.
std::string fma_chain_ptx_kernel(int steps, int variant) {
    std::string ptx =
        ".version 7.8\n.target sm_70\n.address_size 64\n\n"
        ".visible .entry large_kernel(.param .u64 out, .param .u64 in, .param .u32 n)\n{\n"
        "  .reg .pred %p;\n  .reg .f32 %a<64>;\n  .reg .f32 %x;\n  .reg .u32 %t<2>;\n"
        "  .reg .u64 %rd<6>;\n"
        "  mov.u32 %t0, %tid.x;\n  ld.param.u32 %t1, [n];\n  setp.ge.u32 %p, %t0, %t1;\n"
        "  @%p bra done;\n"
        "  ld.param.u64 %rd1, [in];\n  ld.param.u64 %rd2, [out];\n"
        "  cvta.to.global.u64 %rd1, %rd1;\n  cvta.to.global.u64 %rd2, %rd2;\n"
        "  mul.wide.u32 %rd3, %t0, 4;\n  add.u64 %rd4, %rd1, %rd3;\n  add.u64 %rd5, %rd2, %rd3;\n"
        "  ld.global.f32 %x, [%rd4];\n";
    char line[128];
    const auto shift = static_cast<unsigned>(variant) * 7u;
    for (unsigned j = 0; j < 64; ++j) {
        std::snprintf(line, sizeof line, "  add.f32 %%a%u, %%x, 0f%08X;\n", j,
                      0x3f800000u + (j + shift) * 4096u);
        ptx += line;
    }
    for (unsigned step = 0; step < static_cast<unsigned>(steps); ++step) {
        for (unsigned j = 0; j < 64; ++j) {
            std::snprintf(line, sizeof line, "  fma.rn.f32 %%a%u, %%a%u, %%a%u, 0f%08X;\n", j, j,
                          (j + 1 + step) % 64,
                          0x3e800000u + ((step * 64 + j + shift) % 997) * 512u);
            ptx += line;
        }
    }
    for (unsigned j = 1; j < 64; ++j) {
        std::snprintf(line, sizeof line, "  add.f32 %%a0, %%a0, %%a%u;\n", j);
        ptx += line;
    }
    return ptx + "  st.global.f32 [%rd5], %a0;\ndone:\n  ret;\n}\n";
}

namespace {

// One large kernel, for the comparison with the driver's ComputeCache that DESIGN.md makes on one
// large kernel: `kLargeSteps` rounds of 64 dependent FMAs over 64 accumulators seeded from
// memory, about 550 KB of PTX and a 210 KB cubin, 1.2 s in nvJitLink on the CPU machine.
constexpr int kLargeSteps = 200;

std::string large_ptx_kernel() {
    return fma_chain_ptx_kernel(kLargeSteps, 0);
}

// The name in `.visible .entry NAME(`, the first entry's; empty when there is none.
std::string entry_name(const std::string& ptx) {
    const std::string mark = ".visible .entry ";
    const std::size_t at = ptx.find(mark);
    if (at == std::string::npos) return {};
    const std::size_t start = at + mark.size();
    const std::size_t end = ptx.find_first_of("( \t\r\n", start);
    return end == std::string::npos ? std::string() : ptx.substr(start, end - start);
}

bool targets_arch_specific(const std::string& ptx) {
    const std::size_t at = ptx.find(".target sm_");
    if (at == std::string::npos) return false;
    const std::size_t end = ptx.find_first_of(", \t\r\n", at + 8);
    return end != std::string::npos && ptx[end - 1] == 'a';
}

// A directory's *.ptx files in name order, each keyed by its file name and kernel name.
std::optional<KernelSet> directory_set(const std::string& directory, std::string& note) {
    std::vector<std::filesystem::path> paths;
    std::error_code error;
    for (const auto& item : std::filesystem::directory_iterator(directory, error)) {
        if (item.is_regular_file() && item.path().extension() == ".ptx") {
            paths.push_back(item.path());
        }
    }
    if (error || paths.empty()) {
        note = "no *.ptx files in " + directory + (error ? ": " + error.message() : "");
        return std::nullopt;
    }
    std::sort(paths.begin(), paths.end());
    KernelSet set;
    set.launchable = false;
    for (const auto& path : paths) {
        std::ifstream in(path, std::ios::binary);
        std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        std::string name = entry_name(text);
        if (!in.is_open() || name.empty()) {
            note = path.string() + ": cannot read it, or no `.visible .entry NAME(` in it";
            return std::nullopt;
        }
        set.keys.push_back("corpus:" + path.stem().string() + ":" + name);
        set.names.push_back(std::move(name));
        set.arch_specific.push_back(targets_arch_specific(text));
        set.ptx.push_back(std::move(text));
    }
    return set;
}

}  // namespace

std::optional<KernelSet> kernel_set(const std::string& spec, std::string& note) {
    KernelSet set;
    if (spec == "large") {
        set.ptx = {large_ptx_kernel()};
        set.names = {"large_kernel"};
        set.keys = {"large"};
    } else if (spec == "small") {
        set.ptx = ptx_kernel_set();
        set.names.assign(set.ptx.size(), "softmax_rows");
        for (int i = 0; i < set.count(); ++i) set.keys.push_back(ptx_kernel_key(i));
    } else if (is_cuda_corpus(spec)) {
        return cuda_corpus_set(spec, note);
    } else {
        return directory_set(spec, note);
    }
    set.arch_specific.assign(set.ptx.size(), false);
    return set;
}

namespace {

// The driver-only ways to load a kernel, by child mode; an empty function for another mode. Each
// gives what cuLaunchKernel takes (a CUfunction, or a CUkernel), nullptr on failure.
//   floor: cuModuleLoadData + cuModuleGetFunction (what kcache does in the loading context);
//   floor-read: the same, the file read timed too; compute: the same on the PTX, which the
//   driver's ComputeCache serves when warm
//   floor-library: cuLibraryLoadData + cuLibraryGetKernel + cuKernelGetFunction (what serves
//   every context); floor-preserved: the same with CU_LIBRARY_BINARY_IS_PRESERVED;
//   floor-nofunc: the library's load alone, no load into the context (the first launch does it)
std::function<void*(const std::string&, const std::string&)> driver_load(const driver::CudaApi& cu,
                                                                         const std::string& mode) {
    if (mode == "floor" || mode == "floor-read" || mode == "compute" || mode == "floor-again") {
        return [&cu](const std::string& image, const std::string& name) -> void* {
            CUmodule module = nullptr;
            CUfunction function = nullptr;
            const bool ok = cu.cuModuleLoadData(&module, image.c_str()) == CUDA_SUCCESS &&
                            cu.cuModuleGetFunction(&function, module, name.c_str()) == CUDA_SUCCESS;
            return ok ? function : nullptr;
        };
    }
    if (mode != "floor-library" && mode != "floor-preserved" && mode != "floor-nofunc") {
        return {};
    }
    const bool preserved = mode == "floor-preserved";
    const bool to_context = mode != "floor-nofunc";
    return
        [&cu, preserved, to_context](const std::string& image, const std::string& name) -> void* {
            CUlibraryOption option = CU_LIBRARY_BINARY_IS_PRESERVED;
            void* value =
                reinterpret_cast<void*>(std::uintptr_t{1});  // NOLINT(performance-no-int-to-ptr)
            CUlibrary library = nullptr;
            CUkernel kernel = nullptr;
            CUfunction function = nullptr;
            const bool ok =
                cu.cuLibraryLoadData(&library, image.data(), nullptr, nullptr, 0,
                                     preserved ? &option : nullptr, preserved ? &value : nullptr,
                                     preserved ? 1 : 0) == CUDA_SUCCESS &&
                cu.cuLibraryGetKernel(&kernel, library, name.c_str()) == CUDA_SUCCESS &&
                (!to_context || cu.cuKernelGetFunction(&function, kernel) == CUDA_SUCCESS);
            return ok ? kernel : nullptr;
        };
}

// softmax_rows over zero rows (or the large kernel for n = 0): every thread returns at once, so
// null buffers are never touched.
struct EmptyLaunch {
    LaunchConfig config{{1, 1, 1}, {32, 1, 1}, 0, nullptr};
    std::uint64_t out = 0, in = 0;
    std::uint32_t rows = 0;
    void* args[3] = {&out, &in, &rows};
};

// Time inside the driver's loads (cuModuleLoadData + cuModuleGetFunction), whoever calls them:
// a child swaps the process's table entries for timed ones before any clock starts (a
// benchmark's liberty: the table is made once per process, on the heap, and lives on).
struct DriverClock {
    static inline std::uint64_t ns = 0;
    static inline decltype(&::cuModuleLoadData) load = nullptr;
    static inline decltype(&::cuModuleGetFunction) get = nullptr;

    static std::uint64_t now() {
        return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch() /
                                          std::chrono::nanoseconds(1));
    }
    static CUresult CUDAAPI timed_load(CUmodule* module, const void* image) {
        const std::uint64_t start = now();
        const CUresult rc = load(module, image);
        ns += now() - start;
        return rc;
    }
    static CUresult CUDAAPI timed_get(CUfunction* function, CUmodule module, const char* name) {
        const std::uint64_t start = now();
        const CUresult rc = get(function, module, name);
        ns += now() - start;
        return rc;
    }
    static void install(const driver::CudaApi& api) {
        auto& table = const_cast<driver::CudaApi&>(api);  // see above
        load = table.cuModuleLoadData;
        get = table.cuModuleGetFunction;
        table.cuModuleLoadData = timed_load;
        table.cuModuleGetFunction = timed_get;
    }
    static double ms() { return static_cast<double>(ns) / 1e6; }
};

// Launches each handle once and synchronizes; the time taken into `launch_ms`.
bool launch_each(const std::vector<KernelHandle>& handles, const EmptyLaunch& empty,
                 driver::PrimaryContext& context, double& launch_ms) {
    const auto launches = std::chrono::steady_clock::now();
    for (const auto& handle : handles) {
        if (!handle.launch_with(empty.config, empty.out, empty.in, empty.rows)) return false;
    }
    if (!context.synchronize()) return false;
    launch_ms = ms_since(launches);
    return true;
}

// Minor page faults of this process so far: first touches of fresh memory, which a new process
// pays for everything it keeps (or cannot reuse).
double minor_faults() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_minflt);
}

}  // namespace

int run_ptx_warm_child(const std::string& mode, const std::string& directory,
                       const std::string& spec) {
    const auto& api = driver::cuda_api();
    if (!api) return 3;
    const driver::CudaApi& cu = **api;
    const auto context_start = std::chrono::steady_clock::now();
    auto context = driver::PrimaryContext::open(0);
    if (!context || !context->make_current()) return 3;
    const double context_ms = ms_since(context_start);
    std::optional<KernelSet> read = child_kernel_set(spec);  // before any clock starts
    if (!read) return 4;
    KernelSet& set = *read;
    const std::vector<std::string>& ptx = set.ptx;
    const int count = set.count();
    DriverClock::install(cu);
    EmptyLaunch empty;
    double total_ms = 0, open_ms = 0, first_ms = 0, launch_ms = 0, faults = 0, driver_ms = 0;
    if (mode == "kcache" || mode == "kcache-again") {
        if (mode == "kcache-again") {
            // The same work once before the clock, in a cache of its own: what is left is
            // kcache's cost in a process that has run its code before.
            CacheOptions options;
            options.disk_directory = directory + "/kcache";
            KernelCache before(options);
            for (int i = 0; i < count; ++i) {
                const std::string* text = &ptx[static_cast<std::size_t>(i)];
                if (!before.kernel(
                        set.key(i), [text] { return Source::ptx(*text); }, set.name(i))) {
                    return 4;
                }
            }
            DriverClock::ns = 0;
        }
        faults = -minor_faults();
        const auto start = std::chrono::steady_clock::now();  // the cache's opening included
        profile_window("enable");
        CacheOptions options;
        options.disk_directory = directory + "/kcache";
        KernelCache cache(options);
        open_ms = ms_since(start);
        std::vector<KernelHandle> handles;
        handles.reserve(count);
        for (int i = 0; i < count; ++i) {
            if (i == 1) first_ms = ms_since(start) - open_ms;
            auto kernel = cache.kernel(set.key(i), set.handing_over(i), set.name(i));
            if (!kernel) {
                std::fprintf(stderr, "%s\n", kernel.error().describe().c_str());
                return 4;
            }
            handles.push_back(std::move(*kernel));
        }
        profile_window("disable");
        total_ms = ms_since(start);
        driver_ms = DriverClock::ms();
        faults += minor_faults();
        if (cache.stats().compiles != 0 ||
            cache.stats().disk_hits != static_cast<std::uint64_t>(count))
            return 5;
        if (set.launchable && !launch_each(handles, empty, *context, launch_ms)) return 6;
    } else if (mode == "kcache-fill") {
        // Not timed: a cold warm-up of the set that stores its entries and bundles, so that a
        // profile of the warm modes can start from a filled disk tier (scripts/gpu-profile.sh).
        CacheOptions options;
        options.disk_directory = directory + "/kcache";
        options.bundle_warm_ups = true;
        KernelCache cache(options);
        for (const auto& result : cache.warm_up(set.warm_up_items(), 16)) {
            if (!result) {
                std::fprintf(stderr, "%s\n", result.error().describe().c_str());
                return 4;
            }
        }
        cache.wait_for_uploads();
    } else if (mode == "kcache-warm-up" || mode == "kcache-warm-up-unbundled") {
        // The same kernels asked for at once, 16 threads; their bundles loaded, or not.
        faults = -minor_faults();
        const auto start = std::chrono::steady_clock::now();
        profile_window("enable");
        CacheOptions options;
        options.disk_directory = directory + "/kcache";
        options.bundle_warm_ups = mode == "kcache-warm-up";
        KernelCache cache(options);
        open_ms = ms_since(start);
        const std::vector<WarmUpItem> items = set.handed_over_items();
        std::vector<KernelHandle> handles;
        handles.reserve(count);
        for (auto& result : cache.warm_up(items, 16)) {
            if (!result) {
                std::fprintf(stderr, "%s\n", result.error().describe().c_str());
                return 4;
            }
            handles.push_back(std::move(*result));
        }
        profile_window("disable");
        total_ms = ms_since(start);
        driver_ms = DriverClock::ms();
        faults += minor_faults();
        if (cache.stats().compiles != 0 ||
            cache.stats().disk_hits != static_cast<std::uint64_t>(count))
            return 5;
        if (set.launchable && !launch_each(handles, empty, *context, launch_ms)) return 6;
    } else if (mode == "floor-file") {  // one file per kernel by hand: read, verify, load
        // The entry files do not say which kernel each holds: only for sets of one name.
        if (!set.launchable) return 2;
        const std::vector<std::string> paths = entry_files(directory + "/kcache");
        if (paths.size() != ptx.size()) return 4;
        util::Files& files = util::real_files();
        auto held = files.open_directory(directory + "/kcache");
        if (!held) return 4;
        faults = -minor_faults();
        const auto start = std::chrono::steady_clock::now();
        profile_window("enable");
        std::vector<CUfunction> functions;
        for (const auto& path : paths) {
            if (functions.size() == 1) first_ms = ms_since(start);
            // As the disk tier reads: below the held directory.
            auto bytes = files.read(*held, path.substr(held->path().size() + 1),
                                    store::kMaxEntryBytes, util::kNeverStamp);
            if (!bytes || !*bytes) return 4;
            auto entry = store::VerifiedArtifact::decode(std::move(**bytes));
            if (!entry) return 4;
            CUmodule module = nullptr;
            CUfunction function = nullptr;
            if (cu.cuModuleLoadData(&module, (*entry)->payload().data()) != CUDA_SUCCESS ||
                cu.cuModuleGetFunction(&function, module, set.name(0).c_str()) != CUDA_SUCCESS) {
                return 4;
            }
            functions.push_back(function);  // the entry goes: the driver has its copy
        }
        profile_window("disable");
        total_ms = ms_since(start);
        driver_ms = DriverClock::ms();
        faults += minor_faults();
        const auto launches = std::chrono::steady_clock::now();
        for (CUfunction function : functions) {
            const LaunchConfig& c = empty.config;
            if (cu.cuLaunchKernel(function, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y,
                                  c.block.z, 0, nullptr, empty.args, nullptr) != CUDA_SUCCESS) {
                return 6;
            }
        }
        if (!context->synchronize()) return 6;
        launch_ms = ms_since(launches);
    } else if (mode == "kcache-cpu" || mode == "kcache-cpu-ident") {
        // kcache's own work alone: from disk, no driver load; -ident knows nvJitLink's identity
        // (a read of its ELF notes) before the clock starts.
        if (mode == "kcache-cpu-ident" && !compile::ptx_compiler_identity()) return 4;
        const auto start = std::chrono::steady_clock::now();
        profile_window("enable");
        CacheOptions options;
        options.disk_directory = directory + "/kcache";
        KernelCache cache(options);
        open_ms = ms_since(start);
        for (int i = 0; i < count; ++i) {
            if (i == 1) first_ms = ms_since(start) - open_ms;
            auto built = cache.prebuild(set.key(i), set.handing_over(i), context->info().arch);
            if (!built || *built != Provenance::kDiskTier) return 4;
        }
        profile_window("disable");
        total_ms = ms_since(start);
        driver_ms = DriverClock::ms();
    } else if (mode == "touch") {  // for scale: first touches of 25 KiB of fresh heap, 64 times
        std::vector<std::unique_ptr<char[]>> blocks;
        constexpr std::size_t kBlockBytes = std::size_t{25} * 1024;
        blocks.reserve(count);
        const auto start = std::chrono::steady_clock::now();
        profile_window("enable");
        for (int i = 0; i < count; ++i) {
            blocks.push_back(std::make_unique<char[]>(kBlockBytes));  // value-initialised: touched
        }
        profile_window("disable");
        total_ms = ms_since(start);
        driver_ms = DriverClock::ms();
    } else if (mode.starts_with(kFloorThreads)) {  // the floor's loads spread over threads
        // Whether the driver loads modules in parallel: what a warm-up loading on its workers
        // could gain over loading on the calling thread.
        const std::vector<std::string> images = read_cubins(floor_file(directory));
        if (images.size() != ptx.size()) return 4;
        CUcontext current = nullptr;
        if (cu.cuCtxGetCurrent(&current) != CUDA_SUCCESS) return 4;
        std::vector<CUfunction> functions(images.size());
        std::atomic<int> next{0};
        std::atomic<bool> failed{false};
        const auto start = std::chrono::steady_clock::now();
        const int loaders = std::max(1, std::atoi(mode.c_str() + kFloorThreads.size()));
        std::vector<std::thread> threads;
        threads.reserve(static_cast<std::size_t>(loaders));
        for (int t = 0; t < loaders; ++t) {
            threads.emplace_back([&] {
                if (cu.cuCtxSetCurrent(current) != CUDA_SUCCESS) failed = true;
                for (int i = next++; i < count && !failed; i = next++) {
                    const auto at = static_cast<std::size_t>(i);
                    CUmodule module = nullptr;
                    if (cu.cuModuleLoadData(&module, images[at].c_str()) != CUDA_SUCCESS ||
                        cu.cuModuleGetFunction(&functions[at], module, set.name(i).c_str()) !=
                            CUDA_SUCCESS) {
                        failed = true;
                    }
                }
            });
        }
        for (auto& thread : threads) thread.join();
        total_ms = ms_since(start);
        if (failed) return 4;
    } else if (mode == "floor-bundle") {  // every kernel in one module, linked before the clock
        const std::vector<std::string> images = read_cubins(bundle_file(directory));
        if (images.size() != 1) return 4;
        const auto start = std::chrono::steady_clock::now();
        CUmodule module = nullptr;
        if (cu.cuModuleLoadData(&module, images[0].c_str()) != CUDA_SUCCESS) return 4;
        for (int i = 0; i < count; ++i) {
            CUfunction function = nullptr;
            if (cu.cuModuleGetFunction(&function, module, bundled_name(set.name(i), i).c_str()) !=
                CUDA_SUCCESS) {
                return 4;
            }
        }
        total_ms = ms_since(start);
    } else if (auto load = driver_load(cu, mode)) {  // the floors and the ComputeCache
        // The images are in memory before the clock starts, but for floor-read, whose file read
        // is timed too.
        const bool read_timed = mode == "floor-read";
        const auto start = std::chrono::steady_clock::now();
        const std::vector<std::string> images =
            mode == "compute" ? ptx : read_cubins(floor_file(directory));
        if (images.size() != ptx.size()) return 4;
        if (mode == "floor-again") {  // the same loads once before the clock
            for (int i = 0; i < count; ++i) {
                if (load(images[static_cast<std::size_t>(i)], set.name(i)) == nullptr) return 4;
            }
            DriverClock::ns = 0;
        }
        faults = -minor_faults();
        const auto loads_start = std::chrono::steady_clock::now();
        profile_window("enable");
        std::vector<void*> functions;
        functions.reserve(count);
        for (int i = 0; i < count; ++i) {
            if (i == 1) first_ms = ms_since(loads_start);
            functions.push_back(load(images[static_cast<std::size_t>(i)], set.name(i)));
            if (functions.back() == nullptr) return 4;
        }
        profile_window("disable");
        total_ms = ms_since(read_timed ? start : loads_start);
        driver_ms = DriverClock::ms();
        faults += minor_faults();
        const auto launches = std::chrono::steady_clock::now();
        for (void* function : set.launchable ? functions : std::vector<void*>{}) {
            const LaunchConfig& c = empty.config;
            if (cu.cuLaunchKernel(static_cast<CUfunction>(function), c.grid.x, c.grid.y, c.grid.z,
                                  c.block.x, c.block.y, c.block.z, 0, nullptr, empty.args,
                                  nullptr) != CUDA_SUCCESS) {
                return 6;
            }
        }
        if (set.launchable && !context->synchronize()) return 6;
        launch_ms = set.launchable ? ms_since(launches) : 0;
    } else {
        return 2;
    }
    // The driver's loads only until the loading is done: launches load nothing more here.
    std::printf("%.4f %.4f %.4f %.4f %.4f %.0f %.4f\n", context_ms, total_ms, open_ms, first_ms,
                launch_ms, faults, driver_ms);
    return 0;
}

// The new-process table of one kernel set: its cache, floor and ComputeCache filled in
// `directory`, then `rounds` rounds of one process per mode.
std::string run_ptx_new_process_set(const std::string& directory, const std::string& spec,
                                    int rounds, std::string& note) {
    const bool large = spec == "large";
    std::optional<KernelSet> read = kernel_set(spec, note);
    if (!read) return {};
    const KernelSet& set = *read;
    auto context = driver::PrimaryContext::open(0);
    if (!context) {
        note = context.error().message();
        return {};
    }
    (void)context->make_current();
    const int arch = context->info().arch;
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);
    const std::vector<std::string>& ptx = set.ptx;
    const int count = set.count();

    // kcache's disk tier, filled by a warm-up.
    {
        const std::vector<WarmUpItem> items = set.warm_up_items();
        CacheOptions options;
        options.disk_directory = directory + "/kcache";
        options.bundle_warm_ups = true;  // its bundles, for the row that loads them
        KernelCache cache(options);
        for (const auto& result : cache.warm_up(items, 16)) {
            if (!result) {
                note = result.error().describe();
                return {};
            }
        }
        if (cache.stats().compiles != static_cast<std::uint64_t>(count)) {
            note = "the fill did not compile every kernel (no nvJitLink?)";
            return {};
        }
        cache.wait_for_uploads();  // its entries and bundles written before the warm processes
    }
    // The floor's cubins: the same compiler, the same target.
    std::vector<std::string> cubins;
    for (int i = 0; i < count; ++i) {
        const auto at = static_cast<std::size_t>(i);
        auto linked = compile::link_ptx(ptx[at], compile::Target{arch, set.arch_specific[at]});
        if (!linked) {
            note = linked.error().describe();
            return {};
        }
        cubins.push_back(std::move(linked->cubin));
    }
    if (!write_cubins(floor_file(directory), cubins)) {
        note = "could not write " + floor_file(directory);
        return {};
    }
    // For scale: one module for them all, where nvJitLink can link them together.
    std::string bundle_note;
    if (!set.launchable && set.ptx.size() == static_cast<std::size_t>(set.count())) {
        auto bundle = link_bundle(set, compile::Target{arch, set.arch_specific[0]});
        if (!bundle || !write_cubins(bundle_file(directory), {*bundle})) {
            bundle_note = bundle ? "could not write the bundle" : bundle.error().describe();
            bundle_note = bundle_note.substr(0, bundle_note.find('\n'));
        }
    }
    // The driver's ComputeCache, filled by a first process (a cold JIT of them all).
    auto fill = run_ptx_child("compute", directory, spec, compute_cache_env(directory));
    if (!fill) {
        note = "the ComputeCache fill child failed";
        return {};
    }

    // Rounds of new processes, one per mode, the order turning each round so none always goes
    // first. "Ready" is loaded and launched once (synchronized): what a driver leaves to the
    // first launch (lazy loading) counts too.
    struct Mode {
        const char* name;
        const char* what;
    };
    std::vector<Mode> modes = {
        {"kcache", "kcache: a new cache on its disk tier (opening included), read + verify + load"},
        {"floor",
         "floor: the same cubins, in memory before the clock starts, cuModuleLoadData + "
         "cuModuleGetFunction (how kcache loads in the context that asks)"},
        {"compute",
         "the driver's ComputeCache, warm (cuModuleLoadData of the PTX + cuModuleGetFunction)"},
        {"floor-library",
         "for scale: the floor's cubins through cuLibraryLoadData + "
         "cuLibraryGetKernel + cuKernelGetFunction (what serves every context)"},
        {"kcache-warm-up",
         "kcache: the same, the 64 asked for at once (warm_up, 16 threads; opening included)"},
        {"floor-file",
         "for scale: one file per kernel by hand: kcache's entry files read, checked (decode) "
         "and loaded as the floor does, each dropped after its load, no cache around them"},
        {"kcache-cpu",
         "for scale: kcache's own work alone: disk tier to memory (prebuild), "
         "no driver load (no launch either)"},
        {"kcache-cpu-ident", "for scale: the same, nvJitLink's identity known before the clock"},
        {"kcache-again",
         "for scale: kcache, after the same 64 once before the clock in another "
         "cache of this process"},
        {"floor-again", "for scale: the floor, after the same 64 loads once before the clock"},
    };
    if (large) {  // what the comparison with the ComputeCache needs, and the file floor for scale
        modes = {modes[0], modes[1], modes[2], modes[5], modes[6]};
    } else if (!set.launchable) {  // a directory's: the comparison and warm_up
        modes = {modes[0], modes[1], modes[2], modes[4]};
        modes[3].what =
            "kcache: the same, all asked for at once (warm_up, 16 threads; opening "
            "included; its bundles loaded)";
        modes.push_back({"kcache-warm-up-unbundled",
                         "kcache: the same warm_up with bundles off (one module per key)"});
        modes.push_back({"floor-threads-4",
                         "for scale: the floor's loads spread over 4 threads, the context current "
                         "on each"});
        modes.push_back({"floor-threads-16", "for scale: the same on 16 threads"});
        if (bundle_note.empty()) {
            modes.push_back({"floor-bundle",
                             "for scale: every kernel linked into one cubin before the clock "
                             "(nvJitLink), one cuModuleLoadData + a cuModuleGetFunction each"});
        } else {
            bundle_note = "\n- no bundle row: " + bundle_note + "\n";
        }
    }
    const int kModes = static_cast<int>(modes.size());
    constexpr int kCompute = 2;
    struct Times {
        std::vector<double> load, launch, ready, faults, first, open, ratio, driver;
    };
    std::vector<Times> times(modes.size());
    std::vector<double> contexts;
    for (int round = 0; round < rounds; ++round) {
        std::vector<double> ready(kModes);
        for (int k = 0; k < kModes; ++k) {
            const int m = (round + k) % kModes;
            auto run = m == kCompute ? run_ptx_child(modes[m].name, directory, spec,
                                                     compute_cache_env(directory))
                                     : run_ptx_child(modes[m].name, directory, spec);
            if (!run) {
                note = std::string("a ") + modes[m].name + " child failed";
                return {};
            }
            ready[m] = (run->total_ms + run->launch_ms) / count;
            times[m].load.push_back(run->total_ms / count);
            times[m].launch.push_back(run->launch_ms / count);
            times[m].ready.push_back(ready[m]);
            times[m].faults.push_back(run->faults / count);
            times[m].first.push_back(run->first_ms);
            times[m].open.push_back(run->open_ms);
            times[m].driver.push_back(run->driver_ms / count);
            contexts.push_back(run->context_ms);
        }
        // Paired within the round: the host's drift between rounds cancels.
        for (int m = 0; m < kModes; ++m) times[m].ratio.push_back(ready[0] / ready[m]);
    }
    auto lowest = [](const std::vector<double>& v) {
        return *std::min_element(v.begin(), v.end());
    };
    char line[1024];
    std::string what = std::to_string(count) + " PTX kernels";
    if (!set.launchable) {
        what = std::to_string(count) + " PTX kernels of " + spec +
               " (loaded, not launched: their arguments are unknown here, so ready = loaded)";
    } else if (large) {
        what = "1 large PTX kernel (" + std::to_string(ptx[0].size() / 1024) + " KiB of PTX, a " +
               std::to_string(cubins[0].size() / 1024) + " KiB cubin)";
    }
    std::snprintf(line, sizeof line,
                  "| %s, warm, new process per run (%d rounds of %d processes, order "
                  "turning; context creation apart: median %.1f ms), ms per kernel | loaded, "
                  "median | min | + first launch, median | ready, median | min | kcache / this, "
                  "ready (median / min) | kcache / this, median of the rounds' ratios | page "
                  "faults a kernel, loading (median) | first kernel, once (median ms) | "
                  "cache's opening, once (median ms) | of loaded: in cuModuleLoadData + "
                  "cuModuleGetFunction (median) "
                  "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                  what.c_str(), rounds, kModes, median(contexts));
    std::string text = line;
    const double kcache_ready = median(times[0].ready), kcache_min = lowest(times[0].ready);
    for (int m = 0; m < kModes; ++m) {
        const Times& t = times[m];
        std::snprintf(line, sizeof line,
                      "| %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.2fx / %.2fx | %.2fx | %.1f | "
                      "%.4f | %.4f | %.4f |\n",
                      modes[m].what, median(t.load), lowest(t.load), median(t.launch),
                      median(t.ready), lowest(t.ready), kcache_ready / median(t.ready),
                      kcache_min / lowest(t.ready), median(t.ratio), median(t.faults),
                      median(t.first), median(t.open), median(t.driver));
        text += line;
    }
    std::snprintf(line, sizeof line,
                  "| (the ComputeCache's fill, a cold JIT in its first process) | %.4f | | | | | "
                  "| | | | | |\n",
                  fill->total_ms / count);
    return text + line + bundle_note;
}

std::string run_ptx_new_process(const std::string& directory, int rounds, std::string& note) {
    std::string small = run_ptx_new_process_set(directory + "/small", "small", rounds, note);
    if (small.empty()) return {};
    std::string large = run_ptx_new_process_set(directory + "/large", "large", rounds, note);
    if (large.empty()) return {};
    return small + "\n" + large;
}

}  // namespace kcache::bench
