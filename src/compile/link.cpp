// SPDX-License-Identifier: Apache-2.0
#include "compile/link.hpp"

#include <string>
#include <utility>
#include <vector>

namespace kcache::compile {
namespace {

// `what` names the inputs in an error: "PTX for sm_90: nvJitLinkComplete failed (nvJitLink error
// N)", with the log.
Result<Compiled> link_inputs(driver::LinkInput type, const std::vector<LinkSource>& inputs,
                             const std::string& what, const Target& target,
                             const std::vector<std::string>& extra_options) {
    auto failed = [&](Error error) {
        if (error.code() != Errc::kCompileFailed) return error;  // nvJitLink missing: as it says
        return Error(error.code(), what + " for " + target.name() + ": " + error.message(),
                     error.log());
    };
    // nvJitLink keeps a cache of its own in the driver's ComputeCache (~/.nv) where a driver is
    // loaded: a second copy of every cubin kcache stores, written during the compile, and a
    // compile of PTX seen before on the machine served from it (docs/performance.md).
    std::vector<std::string> options = {"-arch=" + target.name(), "-no-cache"};
    if (type == driver::LinkInput::kLtoIr) {
        options.insert(options.end(), {"-lto", "-optimize-unused-variables"});
    }
    options.insert(options.end(), extra_options.begin(), extra_options.end());
    auto session = driver::NvJitLinkSession::create(options);
    if (!session) return failed(std::move(session).error());
    for (const LinkSource& input : inputs) {
        if (auto added = session->add(type, input.bytes, input.name); !added) {
            return failed(std::move(added).error());
        }
    }
    if (auto completed = session->complete(); !completed) {
        return failed(std::move(completed).error());
    }
    Compiled out;
    out.log = session->info_log();
    auto cubin = session->cubin();
    if (!cubin) return failed(std::move(cubin).error());
    out.cubin = std::move(*cubin);
    return out;
}

// PTX text as nvJitLink takes it: with its terminating NUL.
std::string_view with_nul(const std::string& ptx) {
    return {ptx.c_str(), ptx.size() + 1};
}

}  // namespace

Result<Compiled> link(driver::LinkInput type, std::string_view bytes, const std::string& name,
                      const Target& target, const std::vector<std::string>& extra_options) {
    return link_inputs(type, {{bytes, name}}, type == driver::LinkInput::kPtx ? "PTX" : "LTO IR",
                       target, extra_options);
}

Result<Compiled> link_ptx(const std::string& ptx, const Target& target) {
    return link(driver::LinkInput::kPtx, with_nul(ptx), "kernel.ptx", target, {});
}

Result<Compiled> link_ptx_bundle(const std::vector<const std::string*>& modules,
                                 const Target& target) {
    std::vector<LinkSource> inputs;
    inputs.reserve(modules.size());
    for (std::size_t i = 0; i < modules.size(); ++i) {
        inputs.push_back({with_nul(*modules[i]), "module" + std::to_string(i) + ".ptx"});
    }
    return link_inputs(driver::LinkInput::kPtx, inputs,
                       "a bundle of " + std::to_string(modules.size()) + " PTX modules", target,
                       {});
}

}  // namespace kcache::compile
