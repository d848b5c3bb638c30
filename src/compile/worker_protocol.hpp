// SPDX-License-Identifier: Apache-2.0
// The wire format between a WorkerPool and its compile worker processes: length-prefixed frames
// over pipes carrying a request (CUDA C++ to compile, or PTX to link), a response, or the worker's
// hello.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "compile/compiler.hpp"
#include "kcache/result.hpp"

namespace kcache::compile {

// A frame is a 16-byte header, then the payload:
//   magic "KCWP" · version (u32 LE) · payload length (u64 LE)
// The version changes with any change to a payload's layout: the worker is a separate
// executable (found beside the program or named by KCACHE_COMPILE_WORKER) and may come from
// another kcache build.
inline constexpr std::uint32_t kWorkerProtocolVersion = 3;  // 2: disk headers; 3: PTX links
inline constexpr std::size_t kFrameHeaderSize = 16;
// Nothing legitimate comes near this (a cubin is a few MiB); a larger declared size is corruption
// and is refused before anything is allocated.
inline constexpr std::uint64_t kMaxFramePayload = std::uint64_t{1} << 30;

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

// Writes header and payload in full, retrying on EINTR and short writes. A closed reader is a
// kIoError (EPIPE), never a SIGPIPE that would kill the process.
Result<void> write_frame(int fd, std::string_view payload);

// Reads one frame's payload. nullopt on a clean end of file before the first byte; an end of file
// inside a frame, a bad magic or version, or a length over kMaxFramePayload is an error. Memory
// grows with the bytes received, not with the declared length.
Result<std::optional<std::string>> read_frame(int fd);
// The same, failing with kIoError when the whole frame has not arrived within `timeout`.
Result<std::optional<std::string>> read_frame(int fd, std::chrono::milliseconds timeout);

}  // namespace kcache::compile
