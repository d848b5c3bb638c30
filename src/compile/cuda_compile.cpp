// SPDX-License-Identifier: Apache-2.0
// CUDA C++ to a cubin: NVRTC, then for the lean recipe nvJitLink, with the headers NVRTC read
// checked against what the fingerprint covers.
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compile/compiler.hpp"
#include "compile/disk_headers.hpp"
#include "compile/header_trace.hpp"
#include "compile/link.hpp"
#include "compile/options.hpp"
#include "driver/compiler_libraries.hpp"
#include "driver/nvrtc.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::compile {

std::string Target::name() const {
    return "sm_" + std::to_string(arch) + (arch_specific ? "a" : "");
}

namespace {

// Whether the lean recipe applies: nvJitLink there and usable, and every option one it allows.
bool lean_recipe_applies(const CudaProgram& program) {
    if (!driver::nvjitlink_identity()) return false;
    if (auto linker = driver::nvjitlink_usable(); !linker) {
        // Found but not usable: NVRTC's own cubin serves as well, only slower to load.
        util::log_line(util::LogLevel::kInfo, "nvJitLink unusable (" + linker.error().message() +
                                                  "); CUDA C++ compiles to NVRTC's own cubin");
        return false;
    }
    auto normalized = normalize_options(program.options);
    return normalized && lean_recipe_allows(*normalized);
}

// Set once an NVRTC refuses --fdevice-time-trace (older than 13.0's): it cannot say what it read.
std::atomic<bool> trace_unsupported{false};
std::atomic<bool> trace_unreadable_said{false};

// The lean recipe's second step: NVRTC's LTO IR through nvJitLink into `out`. False when
// nvJitLink cannot link it, which compile_cuda() answers with NVRTC's own cubin.
Result<bool> link_lto_ir(const driver::NvrtcProgram& nvrtc, const CudaProgram& program,
                         const Target& target, Compiled& out) {
    TRY_ASSIGN(const auto ir, nvrtc.lto_ir());
    std::vector<std::string> link_options;
    // A variable a name expression asks for ("&table") is kept, used or not.
    for (const auto& [expression, lowered] : out.lowered_names) {
        if (expression.starts_with('&')) link_options.push_back("-variables-used=" + lowered);
    }
    auto linked = link(driver::LinkInput::kLtoIr, ir, program.name, target, link_options);
    if (!linked) {
        // Say an nvJitLink older than this NVRTC, which cannot read its IR: NVRTC's own
        // cubin runs the same code (a real compile error shows again there, with its log).
        util::log_line(util::LogLevel::kInfo, "nvJitLink could not link NVRTC's LTO IR for " +
                                                  program.name + " (" + linked.error().message() +
                                                  "); compiling NVRTC's own cubin");
        return false;
    }
    out.cubin = std::move(linked->cubin);
    if (!linked->log.empty()) out.log += (out.log.empty() ? "" : "\n") + linked->log;
    return true;
}

}  // namespace

Result<Compiled> compile_cuda(const CudaProgram& program, const Target& target, CudaRecipe recipe) {
    // NVRTC's error ("nvrtcGetCUBIN: NVRTC_ERROR_...") said of this program and target.
    auto failed = [&](Error error, std::string log) {
        if (error.code() != Errc::kCompileFailed) return error;  // NVRTC missing: as it says
        return Error(Errc::kCompileFailed,
                     program.name + " for " + target.name() + ": " + error.message(),
                     std::move(log));
    };

    auto nvrtc = driver::NvrtcProgram::create(program.code, program.name, program.headers);
    if (!nvrtc) return failed(std::move(nvrtc).error(), {});
    // Before compiling again another way: a program alive holds its NVRTC, and the next would
    // take another (driver/nvjitlink_copies.hpp).
    auto again = [&](CudaRecipe how) {
        { const driver::NvrtcProgram done = std::move(*nvrtc); }
        return compile_cuda(program, target, how);
    };
    for (const auto& expression : program.name_expressions) {
        if (auto added = nvrtc->add_name_expression(expression); !added) {
            return failed(std::move(added).error(), {});
        }
    }

    // Lean: LTO IR for the virtual arch, which nvJitLink compiles as one program, leaving out the
    // variables nothing uses. NVRTC's own cubin keeps every static constexpr member its headers
    // declare, and the driver pays for each at every load (README, "How CUDA C++ becomes a
    // cubin"). Otherwise a real arch (sm_XX) makes NVRTC emit the cubin itself.
    const bool lean = recipe == CudaRecipe::kChosen && lean_recipe_applies(program);
    std::vector<std::string> options = {lean ? "-arch=compute_" + target.name().substr(3)
                                             : "-arch=" + target.name()};
    if (lean) options.emplace_back("-dlto");
    // The time trace names every header NVRTC processed, the only account it gives of what it
    // read from disk (it has no -M): an "#include "/abs/path.h"" needs no option at all.
    const TraceFolder trace;
    const bool tracing = trace.usable() && !trace_unsupported.load(std::memory_order_relaxed);
    if (tracing) {
        options.push_back(trace.option());
    } else {
        // Without the trace nothing would notice #include "x.h" read from the working folder,
        // so NVRTC is kept out of it. The option also stops every quoted include from being
        // looked up beside the header that says it (cooperative_groups' "info.h"), which is why
        // a traced compile goes without it: the trace refuses a working folder's header.
        options.emplace_back("--no-source-include");
    }
    options.insert(options.end(), program.options.begin(), program.options.end());
    if (auto checked = check_disk_options(program); !checked) return checked.error();
    driver::NvrtcCompile compiled = nvrtc->compile(options);
    if (tracing && compiled.status == driver::NvrtcCompile::Status::kInvalidOption &&
        compiled.log.find("fdevice-time-trace") != std::string::npos) {
        trace_unsupported.store(true, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo,
                       "this NVRTC cannot list the headers it reads (no --fdevice-time-trace): "
                       "a header read from disk by an absolute #include is not noticed");
        return again(recipe);
    }
    if (compiled.status != driver::NvrtcCompile::Status::kSucceeded) {
        return Error(
            Errc::kCompileFailed,
            program.name + " for " + target.name() + ": compilation failed: " + compiled.error,
            std::move(compiled.log));
    }

    Compiled out;
    out.log = std::move(compiled.log);
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
        return disk_headers_refused(program, target, out.disk_headers);
    }
    for (const auto& expression : program.name_expressions) {
        auto lowered = nvrtc->lowered_name(expression);
        if (!lowered) return failed(std::move(lowered).error(), out.log);
        out.lowered_names[expression] = std::move(*lowered);
    }
    if (lean) {
        auto linked = link_lto_ir(*nvrtc, program, target, out);
        if (!linked) return failed(std::move(linked).error(), out.log);
        if (!*linked) return again(CudaRecipe::kNvrtcCubin);
        return out;
    }
    auto cubin = nvrtc->cubin();
    if (!cubin) return failed(std::move(cubin).error(), out.log);
    out.cubin = std::move(*cubin);
    return out;
}

}  // namespace kcache::compile
