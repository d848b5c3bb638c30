#include "compile/compiler.hpp"

#include <memory>
#include <string_view>
#include <vector>

#include "compile/options.hpp"
#include "driver/compiler_api.hpp"
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
constexpr const char* kCudaRecipe =
    "NVRTC -arch=<target> --no-source-include, or when the lean recipe applies: NVRTC "
    "-arch=compute_<target> -dlto --no-source-include, nvJitLink -arch=<target> -lto "
    "-optimize-unused-variables";

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

const Result<std::string>& cuda_compiler_identity() {
    static const Result<std::string> named = []() -> Result<std::string> {
        auto identity = identity_of("NVRTC", driver::nvrtc_identity());
        if (!identity) return identity;
        auto linker = identity_of("nvJitLink", driver::nvjitlink_identity());
        return *identity + "; " + (linker ? *linker : std::string("no nvJitLink")) + "; " +
               kCudaRecipe;
    }();
    return named;
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
    for (const auto& option : program.options) options.push_back(option.c_str());
    rc = api.nvrtcCompileProgram(prog.get(), static_cast<int>(options.size()), options.data());
    std::string log = prog.log();
    if (rc != NVRTC_SUCCESS) return failed("compilation failed", rc, log);

    Compiled out;
    out.log = std::move(log);
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
