// SPDX-License-Identifier: Apache-2.0
// The compile worker protocol: payloads round-trip, anything malformed is an error value (never a
// crash, never a large allocation), frames survive pipes, and the worker loop answers bad requests.
#include "compile/worker_protocol.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <future>
#include <string>
#include <thread>

#include "compile/worker_main.hpp"

namespace kcache::compile {
namespace {

using namespace std::string_literals;

CompileRequest sample_request() {
    CompileRequest request;
    request.program.name = "sample.cu";
    request.program.code = "extern \"C\" __global__ void k() {}\n\0tail"s;
    request.program.headers = {{"a.h", "#define A 1\n"}, {"dir/b.h", ""}};
    request.program.options = {"-DX=1", "-std=c++17", ""};
    request.program.name_expressions = {"fill<float, 4>"};
    request.program.allow_disk_headers = true;
    request.target = Target{90, true};
    return request;
}

Compiled sample_compiled() {
    Compiled compiled;
    compiled.cubin = std::string(
        "\x7f"
        "ELF\0\x01\x02",
        7);
    compiled.log = "warning: something";
    compiled.lowered_names = {{"fill<float, 4>", "_Z4fillIfLi4EEvPT_"}, {"g<1>", "_Z1gILi1EEvv"}};
    compiled.disk_headers = {"/opt/include/a.h", "rel/b.h"};
    return compiled;
}

std::string little_endian(std::uint64_t value, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return out;
}

std::string frame_header(std::uint32_t version, std::uint64_t size) {
    return "KCWP" + little_endian(version, 4) + little_endian(size, 8);
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
        close_read();
        close_write();
    }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;
    void close_read() {
        if (read_end >= 0) ::close(read_end);
        read_end = -1;
    }
    void close_write() {
        if (write_end >= 0) ::close(write_end);
        write_end = -1;
    }
    void put(const std::string& bytes) const {
        ASSERT_EQ(::write(write_end, bytes.data(), bytes.size()),
                  static_cast<ssize_t>(bytes.size()));
    }
};

TEST(WorkerProtocol, RequestRoundTripsEveryField) {
    CompileRequest request = sample_request();
    auto decoded = decode_request(encode_request(request));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(decoded->program.name, request.program.name);
    EXPECT_EQ(decoded->program.code, request.program.code);  // the NUL inside survives
    EXPECT_EQ(decoded->program.headers, request.program.headers);
    EXPECT_EQ(decoded->program.options, request.program.options);
    EXPECT_EQ(decoded->program.name_expressions, request.program.name_expressions);
    EXPECT_EQ(decoded->target.arch, 90);
    EXPECT_TRUE(decoded->target.arch_specific);
    EXPECT_TRUE(decoded->program.allow_disk_headers);
}

TEST(WorkerProtocol, SuccessfulResponseRoundTrips) {
    Compiled compiled = sample_compiled();
    auto decoded = decode_response(encode_response(CompileResponse(compiled)));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    ASSERT_TRUE(decoded->ok());
    EXPECT_EQ(decoded->value().cubin, compiled.cubin);
    EXPECT_EQ(decoded->value().log, compiled.log);
    EXPECT_EQ(decoded->value().lowered_names, compiled.lowered_names);
    EXPECT_EQ(decoded->value().disk_headers, compiled.disk_headers);
}

TEST(WorkerProtocol, ErrorResponseKeepsCodeMessageAndLog) {
    for (Errc code : {Errc::kCompileFailed, Errc::kUnsupported, Errc::kIoError, Errc::kNoDriver}) {
        CompileResponse error(Error(code, "broken.cu for sm_90: failed", "line 1: error"));
        auto decoded = decode_response(encode_response(error));
        ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
        ASSERT_FALSE(decoded->ok());
        EXPECT_EQ(decoded->error().code(), code);
        EXPECT_EQ(decoded->error().message(), "broken.cu for sm_90: failed");
        EXPECT_EQ(decoded->error().log(), "line 1: error");
    }
}

TEST(WorkerProtocol, HelloRoundTrips) {
    auto decoded = decode_hello(
        encode_hello(WorkerHello{"NVRTC build-id 0123abcd", "nvJitLink build-id 4567"}));
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(decoded->compiler_identity, "NVRTC build-id 0123abcd");
    EXPECT_EQ(decoded->ptx_compiler_identity, "nvJitLink build-id 4567");
}

LinkRequest sample_link_request() {
    return LinkRequest{".version 8.0\n.target sm_90a\n\0after a NUL"s, Target{90, true}};
}

TEST(WorkerProtocol, LinkRequestRoundTripsEveryField) {
    const LinkRequest request = sample_link_request();
    const std::string bytes = encode_link_request(request);
    EXPECT_EQ(request_kind(bytes), RequestKind::kLinkPtx);
    auto decoded = decode_link_request(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(decoded->ptx, request.ptx);
    EXPECT_EQ(decoded->target.arch, 90);
    EXPECT_TRUE(decoded->target.arch_specific);
}

TEST(WorkerProtocol, EveryTruncationOfALinkRequestIsAnError) {
    const std::string bytes = encode_link_request(sample_link_request());
    for (std::size_t size = 0; size < bytes.size(); ++size) {
        auto decoded = decode_link_request(std::string_view(bytes).substr(0, size));
        ASSERT_FALSE(decoded.ok()) << "a prefix of " << size << " bytes decoded";
        EXPECT_EQ(decoded.error().code(), Errc::kIoError);
    }
    EXPECT_FALSE(decode_link_request(bytes + "x").ok());
    std::string bad_flag = bytes;
    bad_flag.back() = 2;
    EXPECT_FALSE(decode_link_request(bad_flag).ok());
}

TEST(WorkerProtocol, ARequestsFirstByteSaysWhichCompilerItAsksFor) {
    EXPECT_EQ(request_kind(encode_request(sample_request())), RequestKind::kCompileCuda);
    EXPECT_EQ(request_kind(encode_link_request(sample_link_request())), RequestKind::kLinkPtx);
    EXPECT_EQ(request_kind(encode_response(CompileResponse(sample_compiled()))),
              RequestKind::kUnknown);
    EXPECT_EQ(request_kind(""), RequestKind::kUnknown);
    EXPECT_FALSE(decode_request(encode_link_request(sample_link_request())).ok());
    EXPECT_FALSE(decode_link_request(encode_request(sample_request())).ok());
}

TEST(WorkerProtocol, EveryTruncationOfARequestIsAnError) {
    const std::string bytes = encode_request(sample_request());
    for (std::size_t size = 0; size < bytes.size(); ++size) {
        auto decoded = decode_request(std::string_view(bytes).substr(0, size));
        ASSERT_FALSE(decoded.ok()) << "a prefix of " << size << " bytes decoded";
        EXPECT_EQ(decoded.error().code(), Errc::kIoError);
    }
}

TEST(WorkerProtocol, EveryTruncationOfAResponseIsAnError) {
    const std::string good = encode_response(CompileResponse(sample_compiled()));
    const std::string bad =
        encode_response(CompileResponse(Error(Errc::kCompileFailed, "message", "log")));
    for (const std::string& bytes : {good, bad}) {
        for (std::size_t size = 0; size < bytes.size(); ++size) {
            EXPECT_FALSE(decode_response(std::string_view(bytes).substr(0, size)).ok())
                << "a prefix of " << size << " bytes decoded";
        }
    }
}

TEST(WorkerProtocol, EveryTruncationOfAHelloIsAnError) {
    const std::string bytes =
        encode_hello(WorkerHello{"NVRTC build-id 01", "nvJitLink build-id 02"});
    for (std::size_t size = 0; size < bytes.size(); ++size) {
        EXPECT_FALSE(decode_hello(std::string_view(bytes).substr(0, size)).ok()) << size;
    }
}

TEST(WorkerProtocol, TrailingBytesAreAnError) {
    EXPECT_FALSE(decode_request(encode_request(sample_request()) + "x").ok());
    EXPECT_FALSE(decode_response(encode_response(CompileResponse(sample_compiled())) + "x").ok());
}

TEST(WorkerProtocol, OneKindIsNeverReadAsAnother) {
    EXPECT_FALSE(decode_response(encode_request(sample_request())).ok());
    EXPECT_FALSE(decode_request(encode_response(CompileResponse(sample_compiled()))).ok());
    EXPECT_FALSE(decode_hello(encode_request(sample_request())).ok());
}

TEST(WorkerProtocol, UnknownErrorCodeOrStatusIsAnError) {
    std::string bytes = encode_response(CompileResponse(Error(Errc::kIoError, "m")));
    std::string renamed = bytes;
    renamed.replace(renamed.find("io-error"), 8, "io-errox");
    EXPECT_FALSE(decode_response(renamed).ok());
    std::string bad_status = bytes;
    bad_status[1] = 7;
    EXPECT_FALSE(decode_response(bad_status).ok());
}

TEST(WorkerProtocol, HugeDeclaredStringLengthIsRefused) {
    // kind 1, then a program name claiming 2^62 bytes.
    std::string bytes = std::string(1, '\x01') + little_endian(std::uint64_t{1} << 62, 8) + "abc";
    auto decoded = decode_request(bytes);
    ASSERT_FALSE(decoded.ok());
    EXPECT_NE(decoded.error().message().find("program name"), std::string::npos)
        << decoded.error().message();
}

TEST(WorkerProtocol, HugeDeclaredCountIsRefusedBeforeAnyItemIsRead) {
    // kind 1, empty name, empty code, then 4 billion headers in 3 bytes.
    std::string bytes = std::string(1, '\x01') + little_endian(0, 8) + little_endian(0, 8) +
                        little_endian(0xffffffffu, 4) + "abc";
    auto decoded = decode_request(bytes);
    ASSERT_FALSE(decoded.ok());
    EXPECT_NE(decoded.error().message().find("header count"), std::string::npos)
        << decoded.error().message();
}

TEST(WorkerFrame, PayloadRoundTripsThroughAPipe) {
    Pipe pipe;
    ASSERT_TRUE(write_frame(pipe.write_end, "hello").ok());
    auto frame = read_frame(pipe.read_end);
    ASSERT_TRUE(frame.ok()) << frame.error().describe();
    ASSERT_TRUE(frame->has_value());
    EXPECT_EQ(**frame, "hello");
}

TEST(WorkerFrame, LargePayloadCrossesAPipeInPieces) {
    // Larger than a pipe's buffer: the writer blocks on short writes while the reader drains.
    std::string payload(3 * 1024 * 1024 + 17, '\0');
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31);
    Pipe pipe;
    auto writer =
        std::async(std::launch::async, [&] { return write_frame(pipe.write_end, payload).ok(); });
    auto frame = read_frame(pipe.read_end);
    EXPECT_TRUE(writer.get());
    ASSERT_TRUE(frame.ok()) << frame.error().describe();
    ASSERT_TRUE(frame->has_value());
    EXPECT_TRUE(**frame == payload);
}

TEST(WorkerFrame, CleanEndOfFileIsNoFrame) {
    Pipe pipe;
    pipe.close_write();
    auto frame = read_frame(pipe.read_end);
    ASSERT_TRUE(frame.ok()) << frame.error().describe();
    EXPECT_FALSE(frame->has_value());
}

TEST(WorkerFrame, EveryTruncationOfAFrameIsAnError) {
    std::string whole;
    {
        Pipe pipe;
        ASSERT_TRUE(write_frame(pipe.write_end, "payload").ok());
        pipe.close_write();
        whole.resize(64);
        whole.resize(static_cast<std::size_t>(::read(pipe.read_end, whole.data(), whole.size())));
    }
    ASSERT_EQ(whole.size(), kFrameHeaderSize + 7);
    for (std::size_t size = 1; size < whole.size(); ++size) {
        Pipe pipe;
        pipe.put(whole.substr(0, size));
        pipe.close_write();
        EXPECT_FALSE(read_frame(pipe.read_end).ok()) << "a frame cut at " << size << " bytes";
    }
}

TEST(WorkerFrame, BadMagicIsAnError) {
    Pipe pipe;
    pipe.put("XXXX" + little_endian(kWorkerProtocolVersion, 4) + little_endian(0, 8));
    auto frame = read_frame(pipe.read_end);
    ASSERT_FALSE(frame.ok());
    EXPECT_NE(frame.error().message().find("magic"), std::string::npos);
}

TEST(WorkerFrame, OtherProtocolVersionIsAnError) {
    Pipe pipe;
    pipe.put(frame_header(kWorkerProtocolVersion + 1, 0));
    auto frame = read_frame(pipe.read_end);
    ASSERT_FALSE(frame.ok());
    EXPECT_NE(frame.error().message().find("version"), std::string::npos);
}

TEST(WorkerFrame, LengthOverTheLimitIsRefused) {
    Pipe pipe;
    pipe.put(frame_header(kWorkerProtocolVersion, std::uint64_t{1} << 60));
    auto frame = read_frame(pipe.read_end);
    ASSERT_FALSE(frame.ok());
    EXPECT_NE(frame.error().message().find("exceeds"), std::string::npos);
}

TEST(WorkerFrame, LyingLengthDoesNotAllocateWhatItDeclares) {
    // Within the limit, so the reader starts; 10 bytes then end of file. Allocating (and
    // zeroing) the declared GiB up front would show in the peak resident size.
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    Pipe pipe;
    pipe.put(frame_header(kWorkerProtocolVersion, kMaxFramePayload) + "0123456789");
    pipe.close_write();
    auto frame = read_frame(pipe.read_end);
    ASSERT_FALSE(frame.ok());
    EXPECT_NE(frame.error().message().find("end of file"), std::string::npos);
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024);  // KiB
}

TEST(WorkerFrame, ReadWithTimeoutGivesUpOnASilentWriter) {
    Pipe pipe;
    auto start = std::chrono::steady_clock::now();
    auto frame = read_frame(pipe.read_end, std::chrono::milliseconds(50));
    ASSERT_FALSE(frame.ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(WorkerFrame, WritingToAClosedPipeIsAnErrorNotASignal) {
    Pipe pipe;
    pipe.close_read();
    auto written = write_frame(pipe.write_end, "nobody reads this");
    ASSERT_FALSE(written.ok());  // reaching this line at all means SIGPIPE did not kill us
    EXPECT_EQ(written.error().code(), Errc::kIoError);
    sigset_t pending;
    sigemptyset(&pending);
    ASSERT_EQ(sigpending(&pending), 0);
    EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "the write's SIGPIPE was left pending";
}

// The worker loop in this process, over pipes. Only bad input is sent: nothing loads NVRTC.
class WorkerMainTest : public ::testing::Test {
protected:
    void SetUp() override {
        worker_ = std::async(std::launch::async, [this] {
            return run_compile_worker(requests_.read_end, answers_.write_end);
        });
        auto hello = read_frame(answers_.read_end);
        ASSERT_TRUE(hello.ok() && hello->has_value());
        ASSERT_TRUE(decode_hello(**hello).ok());
    }
    void TearDown() override {
        requests_.close_write();
        if (worker_.valid()) worker_.wait();
    }
    Result<CompileResponse> ask(const std::string& payload) {
        if (auto sent = write_frame(requests_.write_end, payload); !sent) return sent.error();
        auto frame = read_frame(answers_.read_end);
        if (!frame) return frame.error();
        if (!frame->has_value()) return Error(Errc::kIoError, "worker closed its output");
        return decode_response(**frame);
    }

    Pipe requests_;
    Pipe answers_;
    std::future<int> worker_;
};

TEST_F(WorkerMainTest, BadRequestIsAnsweredWithAnErrorAndTheWorkerGoesOn) {
    for (const std::string& garbage : {std::string("garbage"), std::string(),
                                       encode_response(CompileResponse(sample_compiled()))}) {
        auto answer = ask(garbage);
        ASSERT_TRUE(answer.ok()) << answer.error().describe();
        ASSERT_FALSE(answer->ok());
        EXPECT_NE(answer->error().message().find("bad request"), std::string::npos)
            << answer->error().describe();
    }
    requests_.close_write();
    EXPECT_EQ(worker_.get(), 0);  // end of input: a clean exit
}

TEST_F(WorkerMainTest, ABadLinkRequestIsAnsweredWithAnErrorAndTheWorkerGoesOn) {
    std::string cut = encode_link_request(sample_link_request());
    cut.pop_back();
    for (const std::string& bad : {cut, cut + "xy"}) {
        auto answer = ask(bad);
        ASSERT_TRUE(answer.ok()) << answer.error().describe();
        ASSERT_FALSE(answer->ok());
        EXPECT_NE(answer->error().message().find("bad link request"), std::string::npos)
            << answer->error().describe();
    }
    requests_.close_write();
    EXPECT_EQ(worker_.get(), 0);
}

TEST_F(WorkerMainTest, BrokenFramingIsAnsweredThenTheWorkerStops) {
    requests_.put("this is not a frame header");
    auto frame = read_frame(answers_.read_end);
    ASSERT_TRUE(frame.ok() && frame->has_value());
    auto answer = decode_response(**frame);
    ASSERT_TRUE(answer.ok());
    EXPECT_FALSE(answer->ok());
    EXPECT_EQ(worker_.get(), 1);
}

}  // namespace
}  // namespace kcache::compile
