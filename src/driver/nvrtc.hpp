// SPDX-License-Identifier: Apache-2.0
// One NVRTC program, as src/compile asks for it: each step a typed result, no CUDA type in sight.
// An error names the NVRTC call that failed and NVRTC's word for why ("nvrtcGetCUBIN:
// NVRTC_ERROR_..."); the caller adds which program and target it was.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::driver {

// How a compile ended, with NVRTC's log in every case.
struct NvrtcCompile {
    enum class Status {
        kSucceeded,
        kInvalidOption,  // NVRTC refused an option (its log names which)
        kFailed,         // the code did not compile, or NVRTC failed otherwise
    };
    Status status = Status::kFailed;
    std::string error;  // NVRTC's name for a failure ("NVRTC_ERROR_COMPILATION"); empty on success
    std::string log;
};

// The move-only owner of an nvrtcProgram: whichever way its holder leaves, the program is
// destroyed once.
class NvrtcProgram {
public:
    // `headers`: (include name, contents) pairs, for #include "name". kUnsupported, saying why,
    // when NVRTC cannot be loaded; kCompileFailed when NVRTC refuses to make the program.
    static Result<NvrtcProgram> create(
        const std::string& code, const std::string& name,
        const std::vector<std::pair<std::string, std::string>>& headers);

    NvrtcProgram(NvrtcProgram&&) noexcept;
    NvrtcProgram& operator=(NvrtcProgram&&) noexcept;
    NvrtcProgram(const NvrtcProgram&) = delete;
    NvrtcProgram& operator=(const NvrtcProgram&) = delete;
    ~NvrtcProgram();

    // A template instantiation whose lowered name lowered_name() gives after the compile.
    Result<void> add_name_expression(const std::string& expression);
    NvrtcCompile compile(const std::vector<std::string>& options);

    // After a successful compile; kCompileFailed when NVRTC cannot give it.
    Result<std::string> lowered_name(const std::string& expression) const;
    Result<std::string> cubin() const;   // for a real arch (sm_XX)
    Result<std::string> lto_ir() const;  // for -dlto

private:
    struct State;  // NVRTC's table and the program: CUDA types, kept in nvrtc.cpp
    explicit NvrtcProgram(std::unique_ptr<State> state);

    std::unique_ptr<State> state_;
};

}  // namespace kcache::driver
