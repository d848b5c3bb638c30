#include "compile/compiler.hpp"

#include <memory>
#include <set>

#include "compile/options.hpp"
#include "compile/ptx_prune.hpp"
#include "driver/compiler_api.hpp"
#include "util/log.hpp"

namespace kcache::compile {

std::string Target::name() const {
    return "sm_" + std::to_string(arch) + (arch_specific ? "a" : "");
}

namespace {

// How compile_cuda() makes a cubin, as cuda_compiler_identity() names it: keep the two in step.
// The lean recipe is taken when nvJitLink is there and every option acts before PTX; the choice
// follows from the options and the identity, both in every fingerprint.
constexpr const char* kCudaRecipe =
    "NVRTC -arch=<target> --no-source-include, or when every option acts before PTX: NVRTC "
    "-arch=compute_<target> --no-source-include, unreferenced internal .global variables "
    "dropped, nvJitLink -arch=<target>";

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

Result<std::string> cuda_compiler_identity() {
    auto identity = identity_of("NVRTC", driver::nvrtc_identity());
    if (!identity) return identity;
    auto linker = identity_of("nvJitLink", driver::nvjitlink_identity());
    return *identity + "; " + (linker ? *linker : std::string("no nvJitLink")) + "; " + kCudaRecipe;
}

Result<std::string> ptx_compiler_identity() {
    return identity_of("nvJitLink", driver::nvjitlink_identity());
}

namespace {

// The lean recipe applies: nvJitLink is there to compile NVRTC's PTX, and no option could have
// reached the ptxas inside NVRTC.
bool lean_recipe_applies(const CudaProgram& program) {
    if (!driver::nvjitlink_identity()) return false;
    if (const auto& linker = driver::nvjitlink_api(); !linker) {
        // Found but not usable: NVRTC's own cubin serves as well, only slower to load.
        util::log_line(util::LogLevel::kInfo, "nvJitLink unusable (" + linker.error().message() +
                                                  "); CUDA C++ compiles to NVRTC's own cubin");
        return false;
    }
    auto normalized = normalize_options(program.options);
    return normalized && acts_before_ptx_only(*normalized);
}

// NVRTC's PTX, its unreferenced internal globals dropped, compiled to a cubin by nvJitLink. The
// lowered names are kept whatever they name. If the pruned PTX does not link (which would be a
// defect of the pruning), the PTX as NVRTC made it is linked instead, and that is logged.
Result<Compiled> cubin_from_ptx(std::string ptx, const Target& target, Compiled out) {
    std::set<std::string> keep;
    for (const auto& [expression, lowered] : out.lowered_names) keep.insert(lowered);
    PrunedPtx pruned = drop_unreferenced_globals(ptx, keep);
    auto linked = link_ptx(pruned.ptx, target);
    if (!linked && pruned.dropped > 0) {
        util::log_line(util::LogLevel::kInfo, "PTX without its " + std::to_string(pruned.dropped) +
                                                  " unreferenced globals did not link (" +
                                                  linked.error().message() +
                                                  "); linking NVRTC's PTX as it was");
        linked = link_ptx(ptx, target);
    }
    if (!linked) return std::move(linked).error();
    out.cubin = std::move(linked->cubin);
    if (!linked->log.empty()) out.log += (out.log.empty() ? "" : "\n") + linked->log;
    return out;
}

}  // namespace

Result<Compiled> compile_cuda(const CudaProgram& program, const Target& target) {
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

    // Lean: PTX only (a virtual arch), compiled below. Otherwise a real arch (sm_XX) makes NVRTC
    // emit the cubin itself.
    const bool lean = lean_recipe_applies(program);
    const std::string arch_option =
        lean ? "-arch=compute_" + target.name().substr(3) : "-arch=" + target.name();
    // --no-source-include: NVRTC would otherwise look for #include "x.h" in the working
    // directory, which no fingerprint covers; headers come from CudaProgram::headers.
    std::vector<const char*> options = {arch_option.c_str(), "--no-source-include"};
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
        rc = api.nvrtcGetPTXSize(prog.get(), &size);
        if (rc != NVRTC_SUCCESS || size == 0) return failed("nvrtcGetPTXSize", rc, out.log);
        std::string ptx(size, '\0');
        rc = api.nvrtcGetPTX(prog.get(), ptx.data());
        if (rc != NVRTC_SUCCESS) return failed("nvrtcGetPTX", rc, out.log);
        ptx.resize(size - 1);  // the size counts the terminating NUL
        return cubin_from_ptx(std::move(ptx), target, std::move(out));
    }
    rc = api.nvrtcGetCUBINSize(prog.get(), &size);
    if (rc != NVRTC_SUCCESS || size == 0) return failed("nvrtcGetCUBINSize", rc, out.log);
    out.cubin.resize(size);
    rc = api.nvrtcGetCUBIN(prog.get(), out.cubin.data());
    if (rc != NVRTC_SUCCESS) return failed("nvrtcGetCUBIN", rc, out.log);
    return out;
}

Result<Compiled> link_ptx(const std::string& ptx, const Target& target) {
    const auto& loaded = driver::nvjitlink_api();
    if (!loaded) return loaded.error();
    const driver::NvJitLinkApi& api = **loaded;
    JitLinkHandle link(api);
    auto failed = [&](const std::string& what, nvJitLinkResult rc) {
        return Error(Errc::kCompileFailed,
                     "PTX for " + target.name() + ": " + what + " failed (nvJitLink error " +
                         std::to_string(static_cast<int>(rc)) + ")",
                     link.get() != nullptr ? link.log(true) : std::string());
    };

    const std::string arch_option = "-arch=" + target.name();
    const char* options[] = {arch_option.c_str()};
    nvJitLinkResult rc = api.create(link.out(), 1, options);
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkCreate", rc);
    // The size includes the terminating NUL, as nvJitLink expects for PTX text.
    rc = api.add_data(link.get(), NVJITLINK_INPUT_PTX, ptx.c_str(), ptx.size() + 1, "kernel.ptx");
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkAddData", rc);
    rc = api.complete(link.get());
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkComplete", rc);

    Compiled out;
    out.log = link.log(false);
    std::size_t size = 0;
    rc = api.cubin_size(link.get(), &size);
    if (rc != NVJITLINK_SUCCESS || size == 0) return failed("nvJitLinkGetLinkedCubinSize", rc);
    out.cubin.resize(size);
    rc = api.cubin(link.get(), out.cubin.data());
    if (rc != NVJITLINK_SUCCESS) return failed("nvJitLinkGetLinkedCubin", rc);
    return out;
}

}  // namespace kcache::compile
