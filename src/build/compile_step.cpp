// SPDX-License-Identifier: Apache-2.0
#include "build/compile_step.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "build/unique_names.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::build {
namespace {

// An ELF of type ET_EXEC (2), which the driver loads as it is.
bool is_executable_cubin(std::string_view cubin) {
    return cubin.size() > 17 &&
           cubin.starts_with(
               "\x7f"
               "ELF") &&
           cubin[16] == 2 && cubin[17] == 0;
}

// The workers failed (kIoError: they died or spoke garbage), not the compile: this process can
// still do it.
bool workers_failed(const Error& error) {
    if (error.code() != Errc::kIoError) return false;
    util::warn_once("workers-failed",
                    "compile workers failed (" + error.message() + "); compiling in this process");
    return true;
}

Result<compile::Compiled> compile_cuda(const Source& source, const compile::Target& target,
                                       compile::WorkerPool* workers) {
    compile::CudaProgram program;
    program.code = source.bytes;
    program.headers = source.headers;
    program.options = source.options;
    program.name_expressions = source.name_expressions;
    program.allow_disk_headers = source.allow_disk_headers;
    if (workers != nullptr && workers->usable_here()) {
        auto compiled = workers->compile_cuda(program, target);
        if (compiled || !workers_failed(compiled.error())) return compiled;
    }
    return compile::compile_cuda(program, target);
}

// On a compile worker that is started and idle, else here: a worker's start costs more than a
// PTX link gains outside this process (docs/performance.md), so PTX never starts one or waits.
// Its own names renamed first where the plan says so and its text allows.
Result<compile::Compiled> link_ptx(const Source& source, const BuildPlan& plan,
                                   compile::WorkerPool* workers) {
    std::optional<std::string> renamed;
    if (plan.unique_names) renamed = with_unique_names(source.bytes, *plan.unique_names);
    const std::string& ptx = renamed ? *renamed : source.bytes;
    if (workers != nullptr && workers->usable_here()) {
        if (auto linked = workers->link_ptx_if_idle(ptx, plan.target)) return std::move(*linked);
    }
    return compile::link_ptx(ptx, plan.target);
}

}  // namespace

Result<std::optional<compile::Compiled>> compile_planned(const Source& source,
                                                         const BuildPlan& plan,
                                                         compile::WorkerPool* workers) {
    Result<compile::Compiled> compiled = source.kind == SourceKind::kCuda
                                             ? compile_cuda(source, plan.target, workers)
                                             : link_ptx(source, plan, workers);
    if (!compiled && source.kind == SourceKind::kPtx &&
        compiled.error().code() == Errc::kUnsupported) {
        util::warn_once("nvjitlink", "nvJitLink unusable (" + compiled.error().message() +
                                         "); PTX goes to the driver's JIT");
        return std::optional<compile::Compiled>();
    }
    TRY_ASSIGN(compile::Compiled cubin, std::move(compiled));
    if (!is_executable_cubin(cubin.cubin)) {
        return Error(Errc::kCompileFailed,
                     "the compiler made a relocatable or otherwise non-executable cubin (an "
                     "option like -dc or -rdc true?); nothing was stored",
                     cubin.log);
    }
    return std::optional<compile::Compiled>(std::move(cubin));
}

}  // namespace kcache::build
