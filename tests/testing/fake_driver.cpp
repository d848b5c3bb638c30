// SPDX-License-Identifier: Apache-2.0
#include "testing/fake_driver.hpp"

#include <cctype>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "build/unique_names.hpp"
#include "util/try.hpp"

namespace kcache::fakes {

struct FakeDriver::FakeKernel {
    std::string name;
    std::vector<KernelParam> params;
    bool params_unknown = false;  // a real cubin's kernel: layout not parsed
    const FakeLibrary* library = nullptr;
    // What was set on it; under the driver's mutex_.
    std::map<KernelAttribute, int> attributes;
    std::optional<CacheConfig> cache_config;
};

struct FakeDriver::FakeLibrary {
    std::vector<std::unique_ptr<FakeKernel>> kernels;
    std::atomic<bool> unloaded{false};
    bool lazy_jit_error =
        false;  // the JIT "fails" at the first kernel lookup, as lazy loading does
    std::shared_ptr<const void> image_owner;     // an in-place load's bytes, held until unload
    ImageSource again;                           // a binary's way back to its bytes, if given
    std::map<std::string, std::size_t> globals;  // PTX's .global and .const variables: sizes
};

namespace {

thread_local int t_scoped_arch = -1;  // -1: no ScopedContext on this thread

// The most dynamic shared memory an H200 block may have, as the real driver would refuse more.
constexpr int kMaxSharedPerBlock = 227 * 1024;
constexpr std::uint32_t kDefaultSharedLimit = 48 * 1024;

std::size_t param_type_size(std::string_view type) {
    if (type.ends_with("64")) return 8;
    if (type.ends_with("32")) return 4;
    if (type.ends_with("16")) return 2;
    return 1;  // .b8/.u8/.s8
}

// PTX's module-scope variables, `.global .align 4 .f32 table[256];` or `.const .u32 n;`: their
// sizes by name.
std::map<std::string, std::size_t> parse_globals(std::string_view text) {
    std::map<std::string, std::size_t> globals;
    std::size_t line_start = 0;
    while (line_start < text.size()) {
        std::size_t line_end = text.find('\n', line_start);
        if (line_end == std::string_view::npos) line_end = text.size();
        std::string_view line = text.substr(line_start, line_end - line_start);
        line_start = line_end + 1;
        const std::size_t first = line.find_first_not_of(" \t");
        if (first == std::string_view::npos) continue;
        line.remove_prefix(first);
        if (!line.starts_with(".global") && !line.starts_with(".const") &&
            !line.starts_with(".visible .global") && !line.starts_with(".visible .const")) {
            continue;
        }
        const std::size_t semicolon = line.find(';');
        if (semicolon == std::string_view::npos) continue;
        line = line.substr(0, semicolon);
        const std::size_t last_space = line.find_last_of(" \t");
        std::string_view declarator = line.substr(last_space + 1);
        std::size_t count = 1;
        if (const std::size_t bracket = declarator.find('['); bracket != std::string_view::npos) {
            count = std::strtoul(std::string(declarator.substr(bracket + 1)).c_str(), nullptr, 10);
            declarator = declarator.substr(0, bracket);
        }
        std::size_t element = 4;
        for (std::string_view type :
             {".f64", ".u64", ".s64", ".b64", ".f32", ".u32", ".s32", ".b32", ".f16", ".u16",
              ".s16", ".b16", ".u8", ".s8", ".b8"}) {
            if (line.find(std::string(type) + " ") != std::string_view::npos) {
                element = param_type_size(type);
                break;
            }
        }
        globals[std::string(declarator)] = element * count;
    }
    return globals;
}

// Parses ".param .u64 name" / ".param .align 8 .b8 name[16]" declarations between parentheses.
std::vector<KernelParam> parse_params(std::string_view list) {
    std::vector<KernelParam> params;
    std::size_t offset = 0;
    std::size_t pos = 0;
    while ((pos = list.find(".param", pos)) != std::string_view::npos) {
        pos += 6;
        std::size_t end = list.find_first_of(",)", pos);
        std::string_view decl = list.substr(pos, end == std::string_view::npos ? end : end - pos);
        std::size_t align = 0;
        std::size_t size = 0;
        std::size_t cursor = 0;
        while (cursor < decl.size()) {
            while (cursor < decl.size() && std::isspace(static_cast<unsigned char>(decl[cursor])))
                ++cursor;
            std::size_t word_end = cursor;
            while (word_end < decl.size() &&
                   !std::isspace(static_cast<unsigned char>(decl[word_end])))
                ++word_end;
            std::string_view word = decl.substr(cursor, word_end - cursor);
            if (word == ".align") {
                cursor = word_end;
                while (cursor < decl.size() &&
                       std::isspace(static_cast<unsigned char>(decl[cursor])))
                    ++cursor;
                align = std::strtoul(decl.data() + cursor, nullptr, 10);
                while (cursor < decl.size() &&
                       std::isdigit(static_cast<unsigned char>(decl[cursor])))
                    ++cursor;
                continue;
            }
            if (word.starts_with(".") && size == 0) {
                size = param_type_size(word);
            } else if (auto bracket = word.find('['); bracket != std::string_view::npos) {
                size *= std::strtoul(word.data() + bracket + 1, nullptr, 10);
            }
            cursor = word_end;
        }
        if (align == 0) align = size;
        if (align > 0) offset = (offset + align - 1) / align * align;
        params.push_back({offset, size});
        offset += size;
    }
    return params;
}

}  // namespace

FakeDriver::FakeDriver(int default_arch) : default_arch_(default_arch) {}
FakeDriver::~FakeDriver() = default;

FakeDriver::ScopedContext::ScopedContext(int arch) : previous_(t_scoped_arch) {
    t_scoped_arch = arch;
}
FakeDriver::ScopedContext::~ScopedContext() {
    t_scoped_arch = previous_;
}

int FakeDriver::uniform_arch() const noexcept {
    return uniform_arch_.load(std::memory_order_relaxed);
}

Result<int> FakeDriver::current_arch() {
    if (count_arch_queries_.load(std::memory_order_relaxed)) arch_queries_.fetch_add(1);
    int arch = t_scoped_arch >= 0 ? t_scoped_arch : default_arch_;
    if (arch == 0) return Error(Errc::kNoContext, "no current CUDA context on this thread (fake)");
    return arch;
}

Result<ModuleId> FakeDriver::load_module(const Source& source) {
    attempts_.fetch_add(1);
    if (auto delay = load_delay_ms_.load(); delay > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }
    if (int throwing = throw_next_loads_.load(); throwing > 0) {
        while (throwing > 0 && !throw_next_loads_.compare_exchange_weak(throwing, throwing - 1)) {
        }
        if (throwing > 0) throw std::bad_alloc();
    }
    int remaining = fail_next_loads_.load();
    while (remaining > 0 && !fail_next_loads_.compare_exchange_weak(remaining, remaining - 1)) {
    }
    if (remaining > 0) {
        return Error(Errc::kCompileFailed, "fake JIT failure (injected)",
                     "ptxas fatal   : injected failure");
    }
    if (source.bytes.find("FAKE_JIT_ERROR") != std::string::npos) {
        return Error(Errc::kCompileFailed, "fake JIT rejected the source",
                     "ptxas application ptx input, line 1; error   : FAKE_JIT_ERROR found");
    }
    if (source.kind == SourceKind::kCubin && !source.bytes.starts_with("\x7f"
                                                                       "ELF")) {
        return Error(Errc::kCompileFailed, "not a cubin: missing ELF header");
    }

    auto library = std::make_unique<FakeLibrary>();
    library->lazy_jit_error = source.bytes.find("FAKE_LAZY_JIT_ERROR") != std::string::npos;
    std::string_view text = source.bytes;
    std::size_t pos = 0;
    while ((pos = text.find(".entry", pos)) != std::string_view::npos) {
        pos += 6;
        while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
        std::size_t name_end = pos;
        while (name_end < text.size() &&
               (std::isalnum(static_cast<unsigned char>(text[name_end])) || text[name_end] == '_' ||
                text[name_end] == '$'))
            ++name_end;
        auto kernel = std::make_unique<FakeKernel>();
        kernel->name = std::string(text.substr(pos, name_end - pos));
        kernel->library = library.get();
        std::size_t open = text.find('(', name_end);
        std::size_t brace = text.find('{', name_end);
        if (open != std::string_view::npos && open < brace) {
            std::size_t close = text.find(')', open);
            kernel->params = parse_params(text.substr(open, close - open + 1));
        }
        library->kernels.push_back(std::move(kernel));
        pos = name_end;
    }
    library->globals = parse_globals(text);
    // A real cubin (from nvJitLink or NVRTC) names each kernel's code section ".text.<name>";
    // its parameter layout is not parsed, so those kernels report none.
    if (library->kernels.empty() && source.kind != SourceKind::kPtx) {
        for (std::size_t at = text.find(".text."); at != std::string_view::npos;
             at = text.find(".text.", at)) {
            at += 6;
            const std::size_t end = text.find('\0', at);
            if (end == std::string_view::npos) break;
            auto kernel = std::make_unique<FakeKernel>();
            kernel->name = std::string(text.substr(at, end - at));
            kernel->library = library.get();
            kernel->params_unknown = true;
            library->kernels.push_back(std::move(kernel));
            at = end;
        }
    }
    if (library->kernels.empty()) {
        return Error(Errc::kCompileFailed, "fake JIT found no .entry in the source",
                     "ptxas fatal   : no kernel entry found");
    }

    std::lock_guard lock(mutex_);
    loads_.fetch_add(1);
    FakeLibrary* raw = library.get();
    live_.insert(raw);
    all_.push_back(std::move(library));
    return ModuleId{raw};
}

Result<ModuleId> FakeDriver::load_binary(Image image, ImageSource again) {
    auto loaded = load_module(Source::cubin(std::string(image.bytes)));
    if (loaded) {
        in_place_loads_.fetch_add(1);
        auto* library = loaded->as<FakeLibrary>();
        // As the real driver in a process of one device: a way back means the bytes can go.
        if (again) {
            library->again = std::move(again);
        } else {
            library->image_owner = std::move(image.owner);
        }
    }
    return loaded;
}

int FakeDriver::kept_owners() const {
    std::lock_guard lock(mutex_);
    std::set<const void*> owners;
    for (const FakeLibrary* library : live_) {
        if (library->image_owner != nullptr) owners.insert(library->image_owner.get());
    }
    return static_cast<int>(owners.size());
}

int FakeDriver::kept_images() const {
    std::lock_guard lock(mutex_);
    int kept = 0;
    for (const FakeLibrary* library : live_) kept += library->image_owner != nullptr ? 1 : 0;
    return kept;
}

std::vector<std::string> FakeDriver::kernel_names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    for (const FakeLibrary* library : live_) {
        for (const auto& kernel : library->kernels) names.push_back(kernel->name);
    }
    return names;
}

std::vector<Result<std::string>> FakeDriver::load_again() {
    std::vector<ImageSource> sources;
    {
        std::lock_guard lock(mutex_);
        for (const FakeLibrary* library : live_) {
            if (library->again) sources.push_back(library->again);
        }
    }
    std::vector<Result<std::string>> results;
    for (const ImageSource& source : sources) {
        auto image = source();
        if (!image) {
            results.emplace_back(std::move(image).error());
        } else {
            results.emplace_back(std::string(image->bytes));
        }
    }
    return results;
}

void FakeDriver::unload_module(ModuleId id) noexcept {
    auto* library = id.as<FakeLibrary>();
    std::lock_guard lock(mutex_);
    if (live_.erase(library) == 0) {
        use_after_unload_.fetch_add(1);  // double unload
        return;
    }
    library->unloaded.store(true);
    library->image_owner.reset();
    unloads_.fetch_add(1);
}

int FakeDriver::live_libraries() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(live_.size());
}

Result<KernelId> FakeDriver::get_kernel(ModuleId id, const std::string& name) {
    auto* library = id.as<FakeLibrary>();
    if (library->unloaded.load()) {
        use_after_unload_.fetch_add(1);
        return Error(Errc::kDriverError, "library used after unload (fake)");
    }
    for (int lose = lose_images_at_lookup_.load(); lose > 0;) {
        if (lose_images_at_lookup_.compare_exchange_weak(lose, lose - 1)) {
            return Error(Errc::kArtifactGone, "the code's bytes are gone (fake)");
        }
    }
    if (library->lazy_jit_error) {
        return Error(Errc::kCompileFailed, "CUDA_ERROR_INVALID_PTX (fake, deferred JIT)",
                     "ptxas application ptx input, line 1; error   : FAKE_LAZY_JIT_ERROR found");
    }
    for (auto& kernel : library->kernels) {
        if (kernel->name == name) return KernelId{kernel.get()};
    }
    return Error(Errc::kKernelNotFound, "no kernel named '" + name + "' in the module");
}

Result<std::vector<KernelParam>> FakeDriver::kernel_params(KernelId id) {
    param_queries_.fetch_add(1);
    if (auto delay = params_delay_ms_.load(); delay > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }
    if (!params_supported_.load()) {
        return Error(Errc::kUnsupported, "parameter info not supported (fake)");
    }
    auto* kernel = id.as<FakeKernel>();
    if (kernel->params_unknown) {
        return Error(Errc::kUnsupported, "parameter info of a real cubin (fake)");
    }
    return kernel->params;
}

Result<void> FakeDriver::launch(KernelId id, const LaunchConfig& config, void** /*args*/) {
    auto* kernel = id.as<FakeKernel>();
    if (kernel->library->unloaded.load()) {
        use_after_unload_.fetch_add(1);
        return Error(Errc::kDriverError, "kernel launched after its library was unloaded (fake)");
    }
    if (config.grid.x == 0 || config.block.x == 0) {
        return Error(Errc::kDriverError, "CUDA_ERROR_INVALID_VALUE (fake): zero grid or block");
    }
    {
        std::lock_guard lock(mutex_);
        last_launch_ = config;
        // As the real driver: above 48 KiB of dynamic shared memory only where allowed.
        const auto allowed = kernel->attributes.find(KernelAttribute::kMaxDynamicSharedBytes);
        const std::uint32_t limit = allowed == kernel->attributes.end()
                                        ? kDefaultSharedLimit
                                        : static_cast<std::uint32_t>(allowed->second);
        if (config.shared_bytes > limit) {
            return Error(Errc::kDriverError,
                         "CUDA_ERROR_INVALID_VALUE (fake): more dynamic shared memory than the "
                         "kernel is allowed");
        }
    }
    for (int lose = lose_images_.load(); lose > 0;) {
        if (lose_images_.compare_exchange_weak(lose, lose - 1)) {
            return Error(Errc::kArtifactGone, "the code's bytes are gone (fake)");
        }
    }
    launches_.fetch_add(1);
    std::lock_guard lock(mutex_);
    ++launch_counts_[kernel->name];
    return ok();
}

Result<void*> FakeDriver::native_function(KernelId id) {
    TRY(current_arch());
    return static_cast<void*>(id.as<FakeKernel>());
}

Result<void*> FakeDriver::native_kernel(KernelId id) {
    return static_cast<void*>(id.as<FakeKernel>());
}

Result<DeviceGlobal> FakeDriver::module_global(ModuleId id, const std::string& name) {
    TRY(current_arch());
    auto* library = id.as<FakeLibrary>();
    const auto found = library->globals.find(name);
    if (found == library->globals.end()) {
        return Error(Errc::kInvalidArgument,
                     "no __device__ or __constant__ variable named '" + name + "' (fake)");
    }
    // A made-up address, distinct per library and variable.
    const auto address =
        reinterpret_cast<std::uintptr_t>(library) +
        static_cast<std::uintptr_t>(std::distance(library->globals.begin(), found) * 4096);
    return DeviceGlobal{address, found->second};
}

Result<void> FakeDriver::set_kernel_attribute(KernelId id, KernelAttribute attribute, int value) {
    if (attribute == KernelAttribute::kMaxDynamicSharedBytes &&
        (value < 0 || value > kMaxSharedPerBlock)) {
        return Error(Errc::kInvalidArgument,
                     "CUDA_ERROR_INVALID_VALUE (fake): more shared memory than a block may have");
    }
    std::lock_guard lock(mutex_);
    id.as<FakeKernel>()->attributes[attribute] = value;
    return ok();
}

Result<void> FakeDriver::set_cache_config(KernelId id, CacheConfig config) {
    std::lock_guard lock(mutex_);
    id.as<FakeKernel>()->cache_config = config;
    return ok();
}

std::optional<int> FakeDriver::attribute_of(KernelId id, KernelAttribute attribute) const {
    std::lock_guard lock(mutex_);
    const auto& set = id.as<FakeKernel>()->attributes;
    const auto found = set.find(attribute);
    return found == set.end() ? std::nullopt : std::optional<int>(found->second);
}

std::optional<CacheConfig> FakeDriver::cache_config_of(KernelId id) const {
    std::lock_guard lock(mutex_);
    return id.as<FakeKernel>()->cache_config;
}

LaunchConfig FakeDriver::last_launch() const {
    std::lock_guard lock(mutex_);
    return last_launch_;
}

int FakeDriver::launches_of(const std::string& kernel_name) const {
    std::lock_guard lock(mutex_);
    int launches = 0;
    for (const auto& [name, count] : launch_counts_) {
        // A module linked alone from PTX names its kernels with a suffix (build/unique_names.hpp).
        if (name == kernel_name ||
            (name.starts_with(kernel_name) &&
             name.compare(kernel_name.size(), build::kUniqueNameMarker.size(),
                          build::kUniqueNameMarker) == 0)) {
            launches += count;
        }
    }
    return launches;
}

}  // namespace kcache::fakes
