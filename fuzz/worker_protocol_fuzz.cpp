// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the compile worker protocol (compile::decode_request, decode_link_request,
// decode_response, decode_hello, and read_frame fed through a pipe), which a pool reads from a
// worker process and a worker from its pool.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "compile/worker_protocol.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace kcache::compile;

bool same_request(const CompileRequest& a, const CompileRequest& b) {
    return a.program.name == b.program.name && a.program.code == b.program.code &&
           a.program.headers == b.program.headers && a.program.options == b.program.options &&
           a.program.name_expressions == b.program.name_expressions &&
           a.target.arch == b.target.arch && a.target.arch_specific == b.target.arch_specific;
}

bool same_response(const CompileResponse& a, const CompileResponse& b) {
    if (a.ok() != b.ok()) return false;
    if (!a.ok()) {
        return a.error().code() == b.error().code() && a.error().message() == b.error().message() &&
               a.error().log() == b.error().log();
    }
    return a->cubin == b->cubin && a->log == b->log && a->lowered_names == b->lowered_names;
}

// The decoders on one payload: at most one accepts it (the first byte says which message it is),
// and what one accepts encodes to bytes that decode to the same message.
void check_payload(std::string_view payload) {
    auto request = decode_request(payload);
    auto link = decode_link_request(payload);
    auto response = decode_response(payload);
    auto hello = decode_hello(payload);
    KCACHE_FUZZ_CHECK(int{request.ok()} + int{link.ok()} + int{response.ok()} + int{hello.ok()} <=
                      1);
    // A decoder accepts only the kind the first byte names.
    if (request) KCACHE_FUZZ_CHECK(request_kind(payload) == RequestKind::kCompileCuda);
    if (link) {
        KCACHE_FUZZ_CHECK(request_kind(payload) == RequestKind::kLinkPtx);
        KCACHE_FUZZ_CHECK(encode_link_request(*link) == payload);
    } else {
        KCACHE_FUZZ_CHECK(link.error().code() == kcache::Errc::kIoError);
    }
    if (request) {
        // Every field of a request is kept as sent: its encoding is the payload itself.
        KCACHE_FUZZ_CHECK(encode_request(*request) == payload);
        auto again = decode_request(encode_request(*request));
        KCACHE_FUZZ_CHECK(again.ok() && same_request(*again, *request));
    } else {
        KCACHE_FUZZ_CHECK(request.error().code() == kcache::Errc::kIoError);
    }
    if (response) {
        // Lowered names are a map, so their order on the wire is not kept.
        auto again = decode_response(encode_response(*response));
        KCACHE_FUZZ_CHECK(again.ok() && same_response(*again, *response));
    }
    if (hello) KCACHE_FUZZ_CHECK(encode_hello(*hello) == payload);
}

// A pipe whose ends close themselves.
struct Pipe {
    int read_end = -1;
    int write_end = -1;
    Pipe() {
        int fds[2];
        if (::pipe(fds) == 0) {
            read_end = fds[0];
            write_end = fds[1];
        }
    }
    ~Pipe() {
        close_write();
        if (read_end >= 0) ::close(read_end);
    }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;
    void close_write() {
        if (write_end >= 0) ::close(write_end);
        write_end = -1;
    }
    bool put(std::string_view bytes) const {
        return ::write(write_end, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    }
};

// A pipe holds 64 KiB before a write blocks, and the input is written before anything reads.
constexpr std::size_t kPipeBytes = 65536;

// The bytes as a stream of frames, read until its end or the first bad frame.
void check_stream(std::string_view bytes) {
    if (bytes.size() > kPipeBytes) return;
    Pipe pipe;
    if (pipe.read_end < 0 || !pipe.put(bytes)) return;
    pipe.close_write();
    for (;;) {
        auto frame = read_frame(pipe.read_end);
        if (!frame) {
            KCACHE_FUZZ_CHECK(frame.error().code() == kcache::Errc::kIoError);
            return;
        }
        if (!*frame) return;  // a clean end of the stream
        const std::string& payload = **frame;
        check_payload(payload);
        // What was read, written again, is read back the same.
        Pipe echo;
        if (echo.read_end < 0) return;
        KCACHE_FUZZ_CHECK(write_frame(echo.write_end, payload).ok());
        echo.close_write();
        auto back = read_frame(echo.read_end);
        KCACHE_FUZZ_CHECK(back.ok() && back->has_value() && **back == payload);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    check_payload(bytes);
    check_stream(bytes);
    return 0;
}
