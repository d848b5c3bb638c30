// SPDX-License-Identifier: Apache-2.0
#include "compile/link.hpp"

#include <utility>

namespace kcache::compile {

Result<Compiled> link(driver::LinkInput type, std::string_view bytes, const std::string& name,
                      const Target& target, const std::vector<std::string>& extra_options) {
    const char* what = type == driver::LinkInput::kPtx ? "PTX" : "LTO IR";
    // "<PTX|LTO IR> for sm_90: nvJitLinkComplete failed (nvJitLink error N)", with the log.
    auto failed = [&](Error error) {
        if (error.code() != Errc::kCompileFailed) return error;  // nvJitLink missing: as it says
        return Error(error.code(),
                     std::string(what) + " for " + target.name() + ": " + error.message(),
                     error.log());
    };
    std::vector<std::string> options = {"-arch=" + target.name()};
    if (type == driver::LinkInput::kLtoIr) {
        options.insert(options.end(), {"-lto", "-optimize-unused-variables"});
    }
    options.insert(options.end(), extra_options.begin(), extra_options.end());
    auto session = driver::NvJitLinkSession::create(options);
    if (!session) return failed(std::move(session).error());
    if (auto added = session->add(type, bytes, name); !added) {
        return failed(std::move(added).error());
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

Result<Compiled> link_ptx(const std::string& ptx, const Target& target) {
    // The size includes the terminating NUL, as nvJitLink expects for PTX text.
    return link(driver::LinkInput::kPtx, std::string_view(ptx.c_str(), ptx.size() + 1),
                "kernel.ptx", target, {});
}

}  // namespace kcache::compile
