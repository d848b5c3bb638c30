#include "compile/compiler.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <tuple>
#include <vector>

#include "compile/options.hpp"
#include "driver/compiler_api.hpp"
#include "util/closed_fd.hpp"
#include "util/env.hpp"
#include "util/log.hpp"

namespace kcache::compile {

std::string Target::name() const {
    return "sm_" + std::to_string(arch) + (arch_specific ? "a" : "");
}

namespace {

// How compile_cuda() makes a cubin, as cuda_compiler_identity() names it: keep the two in step.
// The lean recipe is taken when nvJitLink is there and loads, and lean_recipe_allows() the
// options. The identity names nvJitLink's file, not whether it loads or links (that would cost a
// warm start the library's load), so where it cannot, NVRTC's own cubin is stored under the same
// fingerprint: the same instructions (tested), plus the unused variables.
// The time trace only lists the headers read (see compile_cuda), which the code does not depend
// on; it is named so that the recipe stays the whole truth.
constexpr const char* kCudaRecipe =
    "NVRTC -arch=<target> --no-source-include --fdevice-time-trace, or when the lean recipe "
    "applies: NVRTC -arch=compute_<target> -dlto --no-source-include --fdevice-time-trace, "
    "nvJitLink -arch=<target> -lto -optimize-unused-variables";

// The name NVRTC's trace gives the header it builds in, which every compile processes.
constexpr std::string_view kBuiltinHeader = "__nv_nvrtc_builtin_header.h";

// Owns an nvrtcProgram so that every exit path destroys it.
class NvrtcProgram {
public:
    explicit NvrtcProgram(const driver::NvrtcApi& api) : api_(api) {}
    ~NvrtcProgram() {
        if (program_ != nullptr) (void)api_.nvrtcDestroyProgram(&program_);
    }
    NvrtcProgram(const NvrtcProgram&) = delete;
    NvrtcProgram& operator=(const NvrtcProgram&) = delete;
    nvrtcProgram* out() { return &program_; }
    nvrtcProgram get() const { return program_; }

    std::string log() const {
        std::size_t size = 0;
        if (api_.nvrtcGetProgramLogSize(program_, &size) != NVRTC_SUCCESS || size <= 1) return {};
        std::string text(size, '\0');
        if (api_.nvrtcGetProgramLog(program_, text.data()) != NVRTC_SUCCESS) return {};
        text.resize(size - 1);  // drop the terminating NUL
        return text;
    }

private:
    const driver::NvrtcApi& api_;
    nvrtcProgram program_ = nullptr;
};

class JitLinkHandle {
public:
    explicit JitLinkHandle(const driver::NvJitLinkApi& api) : api_(api) {}
    ~JitLinkHandle() {
        if (handle_ != nullptr) (void)api_.destroy(&handle_);
    }
    JitLinkHandle(const JitLinkHandle&) = delete;
    JitLinkHandle& operator=(const JitLinkHandle&) = delete;
    nvJitLinkHandle* out() { return &handle_; }
    nvJitLinkHandle get() const { return handle_; }

    std::string log(bool errors) const {
        std::size_t size = 0;
        auto size_fn = errors ? api_.error_log_size : api_.info_log_size;
        auto log_fn = errors ? api_.error_log : api_.info_log;
        if (size_fn(handle_, &size) != NVJITLINK_SUCCESS || size <= 1) return {};
        std::string text(size, '\0');
        if (log_fn(handle_, text.data()) != NVJITLINK_SUCCESS) return {};
        text.resize(size - 1);
        return text;
    }

private:
    const driver::NvJitLinkApi& api_;
    nvJitLinkHandle handle_ = nullptr;
};

}  // namespace

namespace {

Result<std::string> identity_of(const char* label,
                                const Result<driver::CompilerIdentity>& identity) {
    if (!identity) return identity.error();
    return std::string(label) + " " + identity->build;
}

}  // namespace

namespace {

std::string real_path(const std::string& path) {
    char resolved[PATH_MAX];
    return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

// `path` is `folder` or inside it; both real paths, so no ".." or link leads out.
bool inside(const std::string& path, const std::string& folder) {
    return !folder.empty() && path.starts_with(folder) &&
           (path.size() == folder.size() || path[folder.size()] == '/');
}

// The first line of a small file that starts with `prefix`, without the prefix: the toolkit's
// header version, read without parsing a megabyte of cuda.h.
std::string line_after(const std::string& path, std::string_view prefix) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return {};
    const util::ClosedOnExit closer(fd);
    struct stat status {};
    if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size > 64 * 1024) {
        return {};
    }
    std::string text(static_cast<std::size_t>(status.st_size), '\0');
    if (read(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return {};
    const std::size_t at = text.find(prefix);
    if (at == std::string::npos) return {};
    const std::size_t start = at + prefix.size();
    return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

const std::string& toolkit_include_folder() {
    // A toolkit, a pip wheel and a distribution package all keep NVRTC in <root>/lib (or
    // lib64, targets/<triple>/lib) beside <root>/include.
    static const std::string folder = []() -> std::string {
        const auto& identity = driver::nvrtc_identity();
        if (!identity) return {};
        std::string library = real_path(identity->path);
        if (library.empty()) return {};
        const std::string lib = library.substr(0, library.rfind('/'));
        const std::string include = real_path(lib.substr(0, lib.rfind('/')) + "/include");
        struct stat status {};
        if (include.empty() || stat(include.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
            return {};
        }
        return include;
    }();
    return folder;
}

const Result<std::string>& cuda_compiler_identity() {
    static const Result<std::string> named = []() -> Result<std::string> {
        auto identity = identity_of("NVRTC", driver::nvrtc_identity());
        if (!identity) return identity;
        auto linker = identity_of("nvJitLink", driver::nvjitlink_identity());
        // The toolkit's headers are read from disk without a fingerprint of their own: their
        // folder and CCCL's version stand for them (NVRTC's build names the rest of the toolkit).
        const std::string& headers = toolkit_include_folder();
        const std::string cccl =
            headers.empty()
                ? std::string()
                : line_after(headers + "/cccl/cuda/std/__cccl/version.h", "#define CCCL_VERSION ");
        return *identity + "; " + (linker ? *linker : std::string("no nvJitLink")) +
               "; toolkit headers " + (headers.empty() ? std::string("none") : headers) +
               (cccl.empty() ? std::string() : " (CCCL " + cccl + ")") + "; " + kCudaRecipe;
    }();
    return named;
}

namespace {

// A reader of NVRTC's trace (Chrome's trace format: {"traceEvents": [{"name": ..., "args":
// {"detail": ...}}, ...]}) that keeps, per object, its "name" and its args' "detail". Written by
// NVRTC in a folder only this process can write to, but read as untrusted: depth and every
// length are bounded by the bytes present.
class TraceReader {
public:
    explicit TraceReader(std::string_view text) : text_(text) {}

    bool read_document(std::vector<std::string>& headers) {
        headers_ = &headers;
        Object ignored;
        if (!value(0, ignored)) return false;
        skip_space();
        return at_ == text_.size();
    }

private:
    struct Object {
        std::string name;
        std::string detail;
        bool has_name = false;
    };
    static constexpr int kMaxDepth = 64;

    void skip_space() {
        while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' ||
                                      text_[at_] == '\r' || text_[at_] == '\t')) {
            ++at_;
        }
    }
    bool take(char c) {
        skip_space();
        if (at_ >= text_.size() || text_[at_] != c) return false;
        ++at_;
        return true;
    }
    bool string(std::string& out) {
        if (!take('"')) return false;
        out.clear();
        while (at_ < text_.size()) {
            const char c = text_[at_++];
            if (c == '"') return true;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (at_ >= text_.size()) return false;
            const char escaped = text_[at_++];
            switch (escaped) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'u': {
                    if (at_ + 4 > text_.size()) return false;
                    unsigned code = 0;
                    for (int i = 0; i < 4; ++i) {
                        const char h = text_[at_++];
                        code <<= 4;
                        if (h >= '0' && h <= '9')
                            code |= static_cast<unsigned>(h - '0');
                        else if (h >= 'a' && h <= 'f')
                            code |= static_cast<unsigned>(h - 'a' + 10);
                        else if (h >= 'A' && h <= 'F')
                            code |= static_cast<unsigned>(h - 'A' + 10);
                        else
                            return false;
                    }
                    // UTF-8, as a path's bytes are; a surrogate (past U+FFFF) is kept as it comes,
                    // which no real path matches: such a file is reported, never mistaken.
                    if (code < 0x80) {
                        out += static_cast<char>(code);
                    } else if (code < 0x800) {
                        out += static_cast<char>(0xc0 | (code >> 6));
                        out += static_cast<char>(0x80 | (code & 0x3f));
                    } else {
                        out += static_cast<char>(0xe0 | (code >> 12));
                        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
                        out += static_cast<char>(0x80 | (code & 0x3f));
                    }
                    break;
                }
                default:
                    out += escaped;
                    break;  // '"', '\\', '/'
            }
        }
        return false;
    }
    bool value(int depth, Object& parent_args) {
        if (depth > kMaxDepth) return false;
        skip_space();
        if (at_ >= text_.size()) return false;
        const char c = text_[at_];
        if (c == '"') {
            std::string ignored;
            return string(ignored);
        }
        if (c == '{') return object(depth, parent_args);
        if (c == '[') {
            ++at_;
            if (take(']')) return true;
            do {
                Object ignored;
                if (!value(depth + 1, ignored)) return false;
            } while (take(','));
            return take(']');
        }
        // A number, true, false or null: nothing here needs its value.
        const std::size_t start = at_;
        while (at_ < text_.size() &&
               std::string_view(",]} \n\r\t").find(text_[at_]) == std::string_view::npos) {
            ++at_;
        }
        return at_ > start;
    }
    // `into` receives this object's "detail" when it is an event's "args".
    bool object(int depth, Object& into) {
        ++at_;  // '{'
        Object self;
        if (!take('}')) {
            do {
                std::string member;
                if (!string(member) || !take(':')) return false;
                skip_space();
                if (at_ < text_.size() && text_[at_] == '"' &&
                    (member == "name" || member == "detail")) {
                    std::string text;
                    if (!string(text)) return false;
                    if (member == "name") {
                        self.name = std::move(text);
                        self.has_name = true;
                    } else {
                        self.detail = std::move(text);
                    }
                } else if (member == "args") {
                    if (!value(depth + 1, self)) return false;
                } else {
                    Object ignored;
                    if (!value(depth + 1, ignored)) return false;
                }
            } while (take(','));
            if (!take('}')) return false;
        }
        into.detail = self.detail;
        if (self.has_name && self.name == "Processing Header File") {
            headers_->push_back(self.detail);
        }
        return true;
    }

    std::string_view text_;
    std::size_t at_ = 0;
    std::vector<std::string>* headers_ = nullptr;
};

}  // namespace

std::optional<std::vector<std::string>> headers_in_trace(std::string_view trace) {
    std::vector<std::string> headers;
    if (!TraceReader(trace).read_document(headers)) return std::nullopt;
    if (std::find(headers.begin(), headers.end(), kBuiltinHeader) == headers.end()) {
        return std::nullopt;
    }
    return headers;
}

const Result<std::string>& ptx_compiler_identity() {
    static const Result<std::string> named = identity_of("nvJitLink", driver::nvjitlink_identity());
    return named;
}

namespace {

struct Input {
    nvJitLinkInputType type;
    std::string_view bytes;
    std::string name;  // shown in nvJitLink's messages
};

// One input through nvJitLink to a cubin for `target`. kCompileFailed with nvJitLink's log on an
// error; kUnsupported if nvJitLink is missing.
Result<Compiled> link(const Input& input, const Target& target,
                      const std::vector<std::string>& extra_options) {
    const auto& loaded = driver::nvjitlink_api();
    if (!loaded) return loaded.error();
    const driver::NvJitLinkApi& api = **loaded;
    JitLinkHandle handle(api);
    const char* what = input.type == NVJITLINK_INPUT_PTX ? "PTX" : "LTO IR";
    auto failed = [&](const std::string& step, nvJitLinkResult rc) {
        return Error(Errc::kCompileFailed,
                     std::string(what) + " for " + target.name() + ": " + step +
                         " failed (nvJitLink error " + std::to_string(static_cast<int>(rc)) + ")",
                     handle.get() != nullptr ? handle.log(true) : std::string());
    };
    std::vector<std::string> texts = {"-arch=" + target.name()};
    if (input.type == NVJITLINK_INPUT_LTOIR) {
        texts.insert(texts.end(), {"-lto", "-optimize-unused-variables"});
    }
    texts.insert(texts.end(), extra_options.begin(), extra_options.end());
    std::vector<const char*> options;
    for (const auto& text : texts) options.push_back(text.c_str());
    nvJitLinkResult rc =
        api.create(handle.out(), static_cast<std::uint32_t>(options.size()), options.data());
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkCreate", rc);
    rc = api.add_data(handle.get(), input.type, input.bytes.data(), input.bytes.size(),
                      input.name.c_str());
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkAddData", rc);
    rc = api.complete(handle.get());
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkComplete", rc);

    Compiled out;
    out.log = handle.log(false);
    std::size_t size = 0;
    rc = api.cubin_size(handle.get(), &size);
    if (rc != NVJITLINK_SUCCESS || size == 0) return failed("nvJitLinkGetLinkedCubinSize", rc);
    out.cubin.resize(size);
    rc = api.cubin(handle.get(), out.cubin.data());
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkGetLinkedCubin", rc);
    return out;
}

// Whether the lean recipe applies: nvJitLink there and usable, and every option one it allows.
bool lean_recipe_applies(const CudaProgram& program) {
    if (!driver::nvjitlink_identity()) return false;
    if (const auto& linker = driver::nvjitlink_api(); !linker) {
        // Found but not usable: NVRTC's own cubin serves as well, only slower to load.
        util::log_line(util::LogLevel::kInfo, "nvJitLink unusable (" + linker.error().message() +
                                                  "); CUDA C++ compiles to NVRTC's own cubin");
        return false;
    }
    auto normalized = normalize_options(program.options);
    return normalized && lean_recipe_allows(*normalized);
}

// Where NVRTC writes its time trace: a fresh folder only this user may write in (mkdtemp makes
// it 0700, so nobody can plant a link or a FIFO there), removed with the trace.
class TraceFolder {
public:
    TraceFolder() {
        std::string base = util::env_string("TMPDIR").value_or("");
        if (base.empty()) base = "/tmp";
        std::string pattern = base + "/kcache-trace-XXXXXX";
        if (mkdtemp(pattern.data()) != nullptr) folder_ = std::move(pattern);
    }
    ~TraceFolder() {
        if (folder_.empty()) return;
        std::ignore = unlink(file().c_str());
        std::ignore = rmdir(folder_.c_str());  // NVRTC writes nothing else there
    }
    TraceFolder(const TraceFolder&) = delete;
    TraceFolder& operator=(const TraceFolder&) = delete;

    bool usable() const { return !folder_.empty(); }
    // NVRTC appends ".json" to the name it is given.
    std::string option() const { return "--fdevice-time-trace=" + folder_ + "/trace"; }
    std::string file() const { return folder_ + "/trace.json"; }

    std::optional<std::string> read() const {
        const int fd = open(file().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) return std::nullopt;
        const util::ClosedOnExit closer(fd);
        struct stat status {};
        // A CUB compile's trace is under a megabyte; the bound only keeps a surprise finite.
        constexpr off_t kMaxTrace = off_t{256} << 20;
        if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size > kMaxTrace) {
            return std::nullopt;
        }
        std::string text(static_cast<std::size_t>(status.st_size), '\0');
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) return std::nullopt;
            done += static_cast<std::size_t>(got);
        }
        return text;
    }

private:
    std::string folder_;
};

// Set once an NVRTC refuses --fdevice-time-trace (older than 13.0's): it cannot say what it read.
std::atomic<bool> trace_unsupported{false};
std::atomic<bool> trace_unreadable_said{false};

// The option without its leading dashes, which NVRTC takes one or two of.
std::string_view undashed(std::string_view option) {
    while (option.starts_with('-')) option.remove_prefix(1);
    return option;
}

bool is_string_header(const CudaProgram& program, std::string_view name) {
    return std::any_of(program.headers.begin(), program.headers.end(),
                       [&](const auto& header) { return header.first == name; });
}

std::string how_to_fix() {
    return "pass it in Source::headers under the name it is included by, or set "
           "Source::allow_disk_headers (headers read from disk are then not fingerprinted)";
}

// Before compiling: an option that makes NVRTC read from disk what no fingerprint covers. Only
// the toolkit's include folder (or one inside it) is covered, through the compiler's identity;
// a search folder elsewhere is refused even before it supplies a header, since a file created
// there later would shadow one the fingerprint knows.
Result<void> check_disk_options(const CudaProgram& program) {
    if (program.allow_disk_headers) return {};
    auto normalized = normalize_options(program.options);
    if (!normalized) return std::move(normalized).error();
    const std::string& toolkit = toolkit_include_folder();
    auto refused = [&](const std::string& option, const std::string& what) {
        return Error(Errc::kInvalidArgument,
                     "option '" + option + "' makes NVRTC read " + what +
                         " from disk, which no fingerprint covers (only the toolkit's " +
                         (toolkit.empty() ? std::string("headers") : toolkit) +
                         " are): " + how_to_fix());
    };
    for (const std::string& option : *normalized) {
        if (option.starts_with("-I")) {
            if (!inside(real_path(option.substr(2)), toolkit)) return refused(option, "headers");
        } else if (option.starts_with("-include=")) {
            const std::string file = option.substr(std::string_view("-include=").size());
            if (!is_string_header(program, file) && !inside(real_path(file), toolkit)) {
                return refused(option, "a header");
            }
        } else {
            const std::string_view name = undashed(option);
            for (std::string_view pch : {"pch", "use-pch", "pch-dir", "create-pch"}) {
                if (name == pch || (name.starts_with(pch) &&
                                    (name[pch.size()] == '=' || name[pch.size()] == ' '))) {
                    return refused(option, "precompiled headers");
                }
            }
        }
    }
    return {};
}

// After compiling: the files the trace names that are neither a header passed as a string, nor
// NVRTC's built-in one, nor the toolkit's. A string header wins over a file of the same name
// (NVRTC looks there first), and a relative name is NVRTC's own, relative to the working folder.
std::vector<std::string> disk_headers_of(const CudaProgram& program,
                                         const std::vector<std::string>& processed) {
    const std::string& toolkit = toolkit_include_folder();
    std::vector<std::string> found;
    for (const std::string& name : processed) {
        if (name == kBuiltinHeader || is_string_header(program, name)) continue;
        if (inside(real_path(name), toolkit)) continue;  // realpath: no ".." leads out of it
        if (std::find(found.begin(), found.end(), name) == found.end()) found.push_back(name);
    }
    return found;
}

}  // namespace

Result<Compiled> compile_cuda(const CudaProgram& program, const Target& target, CudaRecipe recipe) {
    const auto& loaded = driver::nvrtc_api();
    if (!loaded) return loaded.error();
    const driver::NvrtcApi& api = **loaded;
    auto failed = [&](const std::string& what, nvrtcResult rc, std::string log) {
        return Error(Errc::kCompileFailed,
                     program.name + " for " + target.name() + ": " + what + ": " +
                         api.nvrtcGetErrorString(rc),
                     std::move(log));
    };

    std::vector<const char*> header_texts, header_names;
    for (const auto& [name, text] : program.headers) {
        header_names.push_back(name.c_str());
        header_texts.push_back(text.c_str());
    }
    NvrtcProgram prog(api);
    nvrtcResult rc = api.nvrtcCreateProgram(prog.out(), program.code.c_str(), program.name.c_str(),
                                            static_cast<int>(header_texts.size()),
                                            header_texts.data(), header_names.data());
    if (rc != NVRTC_SUCCESS) return failed("nvrtcCreateProgram", rc, {});
    for (const auto& expression : program.name_expressions) {
        rc = api.nvrtcAddNameExpression(prog.get(), expression.c_str());
        if (rc != NVRTC_SUCCESS)
            return failed("nvrtcAddNameExpression(" + expression + ")", rc, {});
    }

    // Lean: LTO IR for the virtual arch, which nvJitLink compiles below as one program, leaving
    // out the variables nothing uses. NVRTC's own cubin keeps every static constexpr member its
    // headers declare (over 800 with CUB), and the driver pays for each at every load: 3.2-4.7 ms
    // for one CUB block reduce on the H200, 0.1 ms without them. Otherwise a real arch (sm_XX)
    // makes NVRTC emit the cubin itself.
    const bool lean = recipe == CudaRecipe::kChosen && lean_recipe_applies(program);
    const std::string arch_option =
        lean ? "-arch=compute_" + target.name().substr(3) : "-arch=" + target.name();
    // --no-source-include: NVRTC would otherwise look for #include "x.h" in the working
    // directory, which no fingerprint covers; headers come from CudaProgram::headers.
    std::vector<const char*> options = {arch_option.c_str(), "--no-source-include"};
    if (lean) options.push_back("-dlto");
    // The time trace names every header NVRTC processed, the only account it gives of what it
    // read from disk (it has no -M): an "#include "/abs/path.h"" needs no option at all.
    const TraceFolder trace;
    const std::string trace_option = trace.option();
    const bool tracing = trace.usable() && !trace_unsupported.load(std::memory_order_relaxed);
    if (tracing) options.push_back(trace_option.c_str());
    for (const auto& option : program.options) options.push_back(option.c_str());
    if (auto checked = check_disk_options(program); !checked) return checked.error();
    rc = api.nvrtcCompileProgram(prog.get(), static_cast<int>(options.size()), options.data());
    std::string log = prog.log();
    if (tracing && rc == NVRTC_ERROR_INVALID_OPTION &&
        log.find("fdevice-time-trace") != std::string::npos) {
        trace_unsupported.store(true, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo,
                       "this NVRTC cannot list the headers it reads (no --fdevice-time-trace): "
                       "a header read from disk by an absolute #include is not noticed");
        return compile_cuda(program, target, recipe);
    }
    if (rc != NVRTC_SUCCESS) return failed("compilation failed", rc, log);

    Compiled out;
    out.log = std::move(log);
    if (tracing) {
        const auto text = trace.read();
        const auto processed = text ? headers_in_trace(*text) : std::nullopt;
        if (!processed) {
            if (!trace_unreadable_said.exchange(true, std::memory_order_relaxed)) {
                util::log_line(util::LogLevel::kInfo,
                               "NVRTC's time trace did not list the headers it read; a header "
                               "read from disk by an absolute #include is not noticed");
            }
        } else {
            out.disk_headers = disk_headers_of(program, *processed);
        }
    }
    if (!out.disk_headers.empty() && !program.allow_disk_headers) {
        std::string files;
        for (const auto& file : out.disk_headers) files += (files.empty() ? "" : ", ") + file;
        return Error(Errc::kInvalidArgument,
                     program.name + " for " + target.name() + " reads " + files +
                         " from disk, which no fingerprint covers (a change there would not be "
                         "noticed): " +
                         how_to_fix());
    }
    for (const auto& expression : program.name_expressions) {
        const char* lowered = nullptr;
        rc = api.nvrtcGetLoweredName(prog.get(), expression.c_str(), &lowered);
        if (rc != NVRTC_SUCCESS || lowered == nullptr) {
            return failed("nvrtcGetLoweredName(" + expression + ")", rc, out.log);
        }
        out.lowered_names[expression] = lowered;
    }
    std::size_t size = 0;
    if (lean) {
        rc = api.nvrtcGetLTOIRSize(prog.get(), &size);
        if (rc != NVRTC_SUCCESS || size == 0) return failed("nvrtcGetLTOIRSize", rc, out.log);
        std::string ir(size, '\0');
        rc = api.nvrtcGetLTOIR(prog.get(), ir.data());
        if (rc != NVRTC_SUCCESS) return failed("nvrtcGetLTOIR", rc, out.log);
        std::vector<std::string> link_options;
        // A variable a name expression asks for ("&table") is kept, used or not.
        for (const auto& [expression, lowered] : out.lowered_names) {
            if (expression.starts_with('&')) link_options.push_back("-variables-used=" + lowered);
        }
        auto linked = link(Input{NVJITLINK_INPUT_LTOIR, ir, program.name}, target, link_options);
        if (!linked) {
            // Say an nvJitLink older than this NVRTC, which cannot read its IR: NVRTC's own
            // cubin runs the same code (a real compile error shows again there, with its log).
            util::log_line(util::LogLevel::kInfo,
                           "nvJitLink could not link NVRTC's LTO IR for " + program.name + " (" +
                               linked.error().message() + "); compiling NVRTC's own cubin");
            return compile_cuda(program, target, CudaRecipe::kNvrtcCubin);
        }
        out.cubin = std::move(linked->cubin);
        if (!linked->log.empty()) out.log += (out.log.empty() ? "" : "\n") + linked->log;
        return out;
    }
    rc = api.nvrtcGetCUBINSize(prog.get(), &size);
    if (rc != NVRTC_SUCCESS || size == 0) return failed("nvrtcGetCUBINSize", rc, out.log);
    out.cubin.resize(size);
    rc = api.nvrtcGetCUBIN(prog.get(), out.cubin.data());
    if (rc != NVRTC_SUCCESS) return failed("nvrtcGetCUBIN", rc, out.log);
    return out;
}

Result<Compiled> link_ptx(const std::string& ptx, const Target& target) {
    // The size includes the terminating NUL, as nvJitLink expects for PTX text.
    return link(
        Input{NVJITLINK_INPUT_PTX, std::string_view(ptx.c_str(), ptx.size() + 1), "kernel.ptx"},
        target, {});
}

}  // namespace kcache::compile
