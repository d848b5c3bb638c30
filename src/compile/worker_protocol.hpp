// SPDX-License-Identifier: Apache-2.0
// The payloads between a WorkerPool and its compile worker processes: a request (CUDA C++ to
// compile, or PTX to link), a response, or the worker's hello. They travel in frames
// (compile/worker_frame.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "compile/compiler.hpp"
#include "compile/worker_frame.hpp"
#include "kcache/result.hpp"

namespace kcache::compile {

// CUDA C++ through NVRTC (compile_cuda).
struct CompileRequest {
    CudaProgram program;
    Target target;
};

// PTX through nvJitLink (link_ptx): nvJitLink, like NVRTC, scales worse over threads of one process
// than over processes (docs/performance.md).
struct LinkRequest {
    std::string ptx;
    Target target;
};

// What a request payload asks for, from its first byte alone; the decoder of that kind checks
// the rest. kUnknown for anything else (decode_request then says what it found).
enum class RequestKind { kCompileCuda, kLinkPtx, kUnknown };
RequestKind request_kind(std::string_view payload);

// Compiled on success, else the worker's compile_cuda error (code, message, log) unchanged.
using CompileResponse = Result<Compiled>;

// Sent once by a worker when it starts, before reading anything: it proves that the command is a
// kcache compile worker speaking this version, and names the NVRTC it would use, so that the pool
// can refuse a worker whose compiler differs from the one in this process's fingerprints.
struct WorkerHello {
    std::string compiler_identity;      // cuda_compiler_identity(), empty when it has none
    std::string ptx_compiler_identity;  // ptx_compiler_identity(), empty when it has none
};

// Payloads (without the frame header). Decoding is strict: the bytes must hold exactly one
// message of the expected kind; anything else is a kIoError, never a crash, and no
// count or length is trusted beyond the bytes actually present.
std::string encode_request(const CompileRequest& request);
Result<CompileRequest> decode_request(std::string_view payload);
std::string encode_link_request(const LinkRequest& request);
Result<LinkRequest> decode_link_request(std::string_view payload);
std::string encode_response(const CompileResponse& response);
Result<CompileResponse> decode_response(std::string_view payload);
std::string encode_hello(const WorkerHello& hello);
Result<WorkerHello> decode_hello(std::string_view payload);

}  // namespace kcache::compile
