// SPDX-License-Identifier: Apache-2.0
#include "build/plan.hpp"

#include <string.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "build/fingerprints.hpp"
#include "build/unique_names.hpp"
#include "compile/arch.hpp"
#include "compile/options.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::build {
namespace {

// PTX written for arch-specific features (.target sm_90a) must be compiled for that target:
// nvJitLink refuses to build it for plain sm_90.
bool targets_arch_specific(std::string_view ptx) {
    // memmem, not string_view::find: PTX has a '.' on every line, where find's first-character
    // scan stops each time (docs/performance.md, warm start).
    const void* found = memmem(ptx.data(), ptx.size(), ".target", 7);
    if (found == nullptr) return false;
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(found) - ptx.data());
    const std::size_t end = ptx.find_first_of("\n,", at);
    const std::string_view target =
        ptx.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    const std::size_t last = target.find_last_not_of(" \t\r");
    return last != std::string_view::npos && target[last] == 'a';
}

std::vector<std::string> sorted(std::vector<std::string> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
}

// What a CUDA C++ Source may not ask of NVRTC: the arch is the cache's to choose, a name
// expression is one line of key material, and two headers of one name leave NVRTC's choice open.
Result<void> check_cuda_source(const Source& source) {
    for (const auto& expression : source.name_expressions) {
        if (expression.empty() || expression.find_first_of("\r\n") != std::string::npos) {
            return Error(Errc::kInvalidArgument,
                         "name expression '" + expression + "' is empty or spans lines");
        }
    }
    std::vector<std::string> names;
    for (const auto& [name, text] : source.headers) names.push_back(name);
    std::sort(names.begin(), names.end());
    if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
        return Error(Errc::kInvalidArgument,
                     "header '" + *twice + "' is given twice: which one NVRTC uses is not defined");
    }
    return ok();
}

}  // namespace

Result<std::optional<BuildPlan>> plan_build(int arch, const Source& source, bool host_compile) {
    BuildPlan plan;
    std::string toolchain;
    std::vector<std::string> options;
    if (source.kind == SourceKind::kPtx) {
        if (!host_compile) return std::optional<BuildPlan>();
        const auto& identity = compile::ptx_compiler_identity();
        if (!identity) return std::optional<BuildPlan>();  // the driver's JIT takes it
        toolchain = *identity;
        plan.target = compile::Target{arch, targets_arch_specific(source.bytes)};
        if (auto checked = compile::check_target(plan.target); !checked) {
            // The device's own arch (a prebuild checked its arch before): its driver JITs it.
            KCACHE_LOG(kInfo, checked.error().message() + "; PTX goes to the driver's JIT");
            return std::optional<BuildPlan>();
        }
    } else if (source.kind == SourceKind::kCuda) {
        const auto& identity = compile::cuda_compiler_identity();
        if (!identity) {
            return Error(Errc::kUnsupported,
                         "CUDA C++ needs NVRTC, which is not here: " + identity.error().message(),
                         identity.error().log());
        }
        toolchain = *identity;  // names compile_cuda's own NVRTC options too
        TRY_ASSIGN(options, compile::normalize_options(source.options));
        TRY(check_cuda_source(source));
        // Not an NVRTC option: a compile that read unfingerprinted headers is kept apart.
        if (source.allow_disk_headers) options.emplace_back("[disk headers not fingerprinted]");
        plan.target = compile::Target{arch, source.arch_specific};
        TRY(compile::check_target(plan.target));
    } else {
        return std::optional<BuildPlan>();  // a binary: nothing to compile
    }
    // A cubin does not depend on the driver's version, so it stays out: that is what lets a
    // CPU-only machine fill the cache for a GPU machine.
    toolchain.append("; entry format ").append(std::to_string(store::kFormatVersion));

    plan.source_bytes = util::bytes_hash(source.bytes);
    const util::Fingerprint hash = source_hash(source, plan.source_bytes);
    if (source.kind == SourceKind::kPtx) {
        plan.unique_names = unique_names_number(hash);
        toolchain.append("; module-scope names end in ")
            .append(kUniqueNameMarker)
            .append("<48 bits of the source hash>");
    }
    plan.key.arch = plan.target.name();
    plan.key.source_kind = source_kind_name(source.kind);
    plan.key.source_hash = hash.hex();
    plan.key.options = compile::options_line(options);
    plan.key.toolchain = std::move(toolchain);
    // Only CUDA C++ has name expressions; PTX names its kernels itself.
    const std::vector<std::string> expressions = source.kind == SourceKind::kCuda
                                                     ? sorted(source.name_expressions)
                                                     : std::vector<std::string>{};
    for (const auto& expression : expressions) {
        if (!plan.key.names.empty()) plan.key.names += "; ";
        plan.key.names += expression;
    }
    plan.fingerprint = artifact_fingerprint(plan.key, options, expressions, hash);
    return std::optional<BuildPlan>(std::move(plan));
}

}  // namespace kcache::build
