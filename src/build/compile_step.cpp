// SPDX-License-Identifier: Apache-2.0
#include "build/compile_step.hpp"

#include <string>
#include <string_view>
#include <utility>

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

// `on_worker` if there are usable workers, else `here`; `here` again when the workers fail
// (kIoError: they died or spoke garbage), not the compile.
template <class OnWorker, class Here>
Result<compile::Compiled> on_workers_or_here(compile::WorkerPool* workers, OnWorker on_worker,
                                             Here here) {
    if (workers == nullptr || !workers->usable_here()) return here();
    auto compiled = on_worker(*workers);
    if (!compiled && compiled.error().code() == Errc::kIoError) {
        util::warn_once("workers-failed", "compile workers failed (" + compiled.error().message() +
                                              "); compiling in this process");
        return here();
    }
    return compiled;
}

Result<compile::Compiled> compile_cuda(const Source& source, const compile::Target& target,
                                       compile::WorkerPool* workers) {
    compile::CudaProgram program;
    program.code = source.bytes;
    program.headers = source.headers;
    program.options = source.options;
    program.name_expressions = source.name_expressions;
    program.allow_disk_headers = source.allow_disk_headers;
    return on_workers_or_here(
        workers, [&](compile::WorkerPool& pool) { return pool.compile_cuda(program, target); },
        [&] { return compile::compile_cuda(program, target); });
}

Result<compile::Compiled> link_ptx(const Source& source, const compile::Target& target,
                                   compile::WorkerPool* workers) {
    return on_workers_or_here(
        workers, [&](compile::WorkerPool& pool) { return pool.link_ptx(source.bytes, target); },
        [&] { return compile::link_ptx(source.bytes, target); });
}

}  // namespace

Result<std::optional<compile::Compiled>> compile_planned(const Source& source,
                                                         const BuildPlan& plan,
                                                         compile::WorkerPool* workers) {
    Result<compile::Compiled> compiled = source.kind == SourceKind::kCuda
                                             ? compile_cuda(source, plan.target, workers)
                                             : link_ptx(source, plan.target, workers);
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
