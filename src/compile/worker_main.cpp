// SPDX-License-Identifier: Apache-2.0
// The loop of a compile worker process: hello, then request in, compile_cuda or link_ptx, response
// out.
#include "compile/worker_main.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <exception>
#include <string>
#include <utility>

#include "compile/compiler.hpp"
#include "compile/worker_protocol.hpp"
#include "util/log.hpp"

namespace kcache::compile {

namespace {

// The request's compile, whichever compiler it names, and what to call it in a message.
std::pair<CompileResponse, std::string> run_request(const std::string& payload) {
    if (request_kind(payload) == RequestKind::kLinkPtx) {
        auto request = decode_link_request(payload);
        if (!request) return {CompileResponse(std::move(request).error()), "PTX"};
        return {link_ptx(request->ptx, request->target), "PTX for " + request->target.name()};
    }
    auto request = decode_request(payload);  // an unknown kind fails here, saying what it was
    if (!request) return {CompileResponse(std::move(request).error()), "request"};
    return {compile_cuda(request->program, request->target), request->program.name};
}

// The answer to one request payload. Whatever the payload holds, the worker answers: a bad
// request or a compiler that throws (out of memory) is an error for that request alone.
std::string answer(const std::string& payload) {
    try {
        auto [result, what] = run_request(payload);
        std::string response = encode_response(result);
        // A frame the pool would refuse must not cost the worker (and a retry): say so instead.
        if (response.size() > kMaxFramePayload) {
            return encode_response(CompileResponse(
                Error(Errc::kCompileFailed, what + ": the compiler's output (" +
                                                std::to_string(response.size()) +
                                                " bytes) is larger than a worker can send")));
        }
        return response;
    } catch (const std::exception& e) {
        return encode_response(CompileResponse(
            Error(Errc::kCompileFailed, std::string("compile worker: ") + e.what())));
    }
}

}  // namespace

int run_compile_worker(int in_fd, int out_fd) {
    if (out_fd == STDOUT_FILENO) {
        int protocol_fd = ::fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        if (protocol_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
            util::log_line(util::LogLevel::kInfo, "compile worker: cannot set aside stdout");
            return 1;
        }
        out_fd = protocol_fd;
    }
    // The identities only (file reads): loading a compiler waits for the first request.
    const auto& cuda = cuda_compiler_identity();
    const auto& ptx = ptx_compiler_identity();
    const WorkerHello hello{cuda ? *cuda : std::string(), ptx ? *ptx : std::string()};
    if (!write_frame(out_fd, encode_hello(hello))) return 1;
    for (;;) {
        auto frame = read_frame(in_fd);
        if (!frame) {
            // The stream is out of step: no later frame boundary can be trusted. Say why (the
            // parent may still be reading), then stop.
            util::log_line(util::LogLevel::kInfo, frame.error().describe());
            (void)write_frame(out_fd, encode_response(CompileResponse(frame.error())));
            return 1;
        }
        if (!frame->has_value()) return 0;  // the pool closed our input: shut down
        if (!write_frame(out_fd, answer(**frame))) return 1;  // the pool is gone
    }
}

}  // namespace kcache::compile
