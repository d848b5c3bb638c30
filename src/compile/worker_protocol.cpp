// SPDX-License-Identifier: Apache-2.0
// Encoding and strict decoding of the compile worker protocol's payloads
// (compile/worker_protocol.hpp).
#include "compile/worker_protocol.hpp"

#include "compile/worker_wire.hpp"

namespace kcache::compile {

namespace {

using wire::get_le;
using wire::protocol_error;
using wire::put_u32;
using wire::put_u64;
using wire::put_u8;

// The first payload byte says what the message is, so that a response is never read as a request.
enum class Kind : std::uint8_t { kRequest = 1, kResponse = 2, kHello = 3, kLinkRequest = 4 };
enum class Status : std::uint8_t { kOk = 0, kError = 1 };

void put_string(std::string& out, std::string_view text) {
    put_u64(out, text.size());
    out.append(text);
}

void put_count(std::string& out, std::size_t count) {
    put_u32(out, static_cast<std::uint32_t>(count));
}

// Reads fields from a payload; the first failure sticks, so a decoder can read every field and
// check once. Lengths and counts are checked against the bytes left before anything is built.
class Reader {
public:
    explicit Reader(std::string_view in) : in_(in) {}

    bool failed() const { return !error_.empty(); }
    const std::string& error() const { return error_; }

    std::uint8_t u8(const char* field) {
        if (!need(1, field)) return 0;
        auto value = static_cast<std::uint8_t>(in_[0]);
        in_.remove_prefix(1);
        return value;
    }
    std::uint32_t u32(const char* field) {
        if (!need(4, field)) return 0;
        auto value = static_cast<std::uint32_t>(get_le(in_.data(), 4));
        in_.remove_prefix(4);
        return value;
    }
    std::string string(const char* field) {
        if (!need(8, field)) return {};
        std::uint64_t size = get_le(in_.data(), 8);
        in_.remove_prefix(8);
        if (size > in_.size()) {
            fail(std::string(field) + ": declared " + std::to_string(size) + " bytes, " +
                 std::to_string(in_.size()) + " left");
            return {};
        }
        std::string text(in_.substr(0, size));
        in_.remove_prefix(size);
        return text;
    }
    // A count of items that take at least `min_item_bytes` each: a count the remaining bytes
    // cannot hold is refused here, so that no loop or reservation trusts it.
    std::uint32_t count(const char* field, std::size_t min_item_bytes) {
        std::uint32_t n = u32(field);
        if (!failed() && n > in_.size() / min_item_bytes) {
            fail(std::string(field) + ": " + std::to_string(n) + " items cannot fit in " +
                 std::to_string(in_.size()) + " bytes");
            return 0;
        }
        return n;
    }
    void expect_kind(Kind kind) {
        std::uint8_t got = u8("message kind");
        if (!failed() && got != static_cast<std::uint8_t>(kind)) {
            fail("message kind " + std::to_string(got) + ", expected " +
                 std::to_string(static_cast<int>(kind)));
        }
    }
    void expect_end() {
        if (!failed() && !in_.empty()) {
            fail(std::to_string(in_.size()) + " unexpected bytes after the message");
        }
    }
    void fail(std::string what) {
        if (!failed()) error_ = std::move(what);
    }

private:
    bool need(std::size_t bytes, const char* field) {
        if (failed()) return false;
        if (in_.size() < bytes) {
            fail(std::string("truncated at ") + field);
            return false;
        }
        return true;
    }

    std::string_view in_;
    std::string error_;
};

constexpr std::size_t kMinStringBytes = 8;  // the length field of an empty string

// Error codes travel by name (errc_name), not by number: a worker from another build with
// reordered codes then still reports the right one, or an error that it is unknown.
std::optional<Errc> errc_from_name(std::string_view name) {
    for (int i = 0; i <= 255; ++i) {
        auto code = static_cast<Errc>(i);
        std::string_view known = errc_name(code);
        if (known == "unknown") break;  // codes are dense from 0
        if (known == name) return code;
    }
    return std::nullopt;
}

void put_target(std::string& out, const Target& target) {
    put_u32(out, static_cast<std::uint32_t>(target.arch));
    put_u8(out, target.arch_specific ? 1 : 0);
}

Target get_target(Reader& in) {
    Target target;
    target.arch = static_cast<int>(in.u32("target arch"));
    std::uint8_t arch_specific = in.u8("target arch-specific flag");
    if (!in.failed() && arch_specific > 1) {
        in.fail("target arch-specific flag " + std::to_string(arch_specific));
    }
    target.arch_specific = arch_specific == 1;
    return target;
}

}  // namespace

std::string encode_request(const CompileRequest& request) {
    const CudaProgram& program = request.program;
    std::string out;
    out.reserve(64 + program.name.size() + program.code.size());
    put_u8(out, static_cast<std::uint8_t>(Kind::kRequest));
    put_string(out, program.name);
    put_string(out, program.code);
    put_count(out, program.headers.size());
    for (const auto& [name, text] : program.headers) {
        put_string(out, name);
        put_string(out, text);
    }
    put_count(out, program.options.size());
    for (const auto& option : program.options) put_string(out, option);
    put_count(out, program.name_expressions.size());
    for (const auto& expression : program.name_expressions) put_string(out, expression);
    put_target(out, request.target);
    put_u8(out, program.allow_disk_headers ? 1 : 0);
    return out;
}

Result<CompileRequest> decode_request(std::string_view payload) {
    Reader in(payload);
    CompileRequest request;
    CudaProgram& program = request.program;
    in.expect_kind(Kind::kRequest);
    program.name = in.string("program name");
    program.code = in.string("program code");
    std::uint32_t headers = in.count("header count", 2 * kMinStringBytes);
    for (std::uint32_t i = 0; i < headers && !in.failed(); ++i) {
        std::string name = in.string("header name");
        std::string text = in.string("header text");
        program.headers.emplace_back(std::move(name), std::move(text));
    }
    std::uint32_t options = in.count("option count", kMinStringBytes);
    for (std::uint32_t i = 0; i < options && !in.failed(); ++i) {
        program.options.push_back(in.string("option"));
    }
    std::uint32_t expressions = in.count("name expression count", kMinStringBytes);
    for (std::uint32_t i = 0; i < expressions && !in.failed(); ++i) {
        program.name_expressions.push_back(in.string("name expression"));
    }
    request.target = get_target(in);
    std::uint8_t allow_disk_headers = in.u8("disk headers flag");
    if (!in.failed() && allow_disk_headers > 1) {
        in.fail("disk headers flag " + std::to_string(allow_disk_headers));
    }
    program.allow_disk_headers = allow_disk_headers == 1;
    in.expect_end();
    if (in.failed()) return protocol_error("bad request: " + in.error());
    return request;
}

RequestKind request_kind(std::string_view payload) {
    if (payload.empty()) return RequestKind::kUnknown;
    switch (static_cast<Kind>(static_cast<std::uint8_t>(payload[0]))) {
        case Kind::kRequest:
            return RequestKind::kCompileCuda;
        case Kind::kLinkRequest:
            return RequestKind::kLinkPtx;
        default:
            return RequestKind::kUnknown;
    }
}

std::string encode_link_request(const LinkRequest& request) {
    std::string out;
    out.reserve(32 + request.ptx.size());
    put_u8(out, static_cast<std::uint8_t>(Kind::kLinkRequest));
    put_string(out, request.ptx);
    put_target(out, request.target);
    return out;
}

Result<LinkRequest> decode_link_request(std::string_view payload) {
    Reader in(payload);
    LinkRequest request;
    in.expect_kind(Kind::kLinkRequest);
    request.ptx = in.string("PTX");
    request.target = get_target(in);
    in.expect_end();
    if (in.failed()) return protocol_error("bad link request: " + in.error());
    return request;
}

std::string encode_response(const CompileResponse& response) {
    std::string out;
    put_u8(out, static_cast<std::uint8_t>(Kind::kResponse));
    if (response.ok()) {
        const Compiled& compiled = response.value();
        out.reserve(64 + compiled.cubin.size() + compiled.log.size());
        put_u8(out, static_cast<std::uint8_t>(Status::kOk));
        put_string(out, compiled.cubin);
        put_string(out, compiled.log);
        put_count(out, compiled.lowered_names.size());
        for (const auto& [expression, lowered] : compiled.lowered_names) {
            put_string(out, expression);
            put_string(out, lowered);
        }
        put_count(out, compiled.disk_headers.size());
        for (const auto& file : compiled.disk_headers) put_string(out, file);
    } else {
        const Error& error = response.error();
        put_u8(out, static_cast<std::uint8_t>(Status::kError));
        put_string(out, errc_name(error.code()));
        put_string(out, error.message());
        put_string(out, error.log());
    }
    return out;
}

Result<CompileResponse> decode_response(std::string_view payload) {
    Reader in(payload);
    in.expect_kind(Kind::kResponse);
    std::uint8_t status = in.u8("status");
    if (in.failed()) return protocol_error("bad response: " + in.error());
    if (status == static_cast<std::uint8_t>(Status::kOk)) {
        Compiled compiled;
        compiled.cubin = in.string("cubin");
        compiled.log = in.string("log");
        std::uint32_t names = in.count("lowered name count", 2 * kMinStringBytes);
        for (std::uint32_t i = 0; i < names && !in.failed(); ++i) {
            std::string expression = in.string("name expression");
            std::string lowered = in.string("lowered name");
            if (!in.failed() &&
                !compiled.lowered_names.emplace(std::move(expression), std::move(lowered)).second) {
                in.fail("name expression listed twice");
            }
        }
        std::uint32_t files = in.count("disk header count", kMinStringBytes);
        for (std::uint32_t i = 0; i < files && !in.failed(); ++i) {
            compiled.disk_headers.push_back(in.string("disk header"));
        }
        in.expect_end();
        if (in.failed()) return protocol_error("bad response: " + in.error());
        return CompileResponse(std::move(compiled));
    }
    if (status == static_cast<std::uint8_t>(Status::kError)) {
        std::string code_name = in.string("error code");
        std::string message = in.string("error message");
        std::string log = in.string("error log");
        in.expect_end();
        if (in.failed()) return protocol_error("bad response: " + in.error());
        auto code = errc_from_name(code_name);
        if (!code) return protocol_error("bad response: unknown error code '" + code_name + "'");
        return CompileResponse(Error(*code, std::move(message), std::move(log)));
    }
    return protocol_error("bad response: status " + std::to_string(status));
}

std::string encode_hello(const WorkerHello& hello) {
    std::string out;
    put_u8(out, static_cast<std::uint8_t>(Kind::kHello));
    put_string(out, hello.compiler_identity);
    put_string(out, hello.ptx_compiler_identity);
    return out;
}

Result<WorkerHello> decode_hello(std::string_view payload) {
    Reader in(payload);
    in.expect_kind(Kind::kHello);
    WorkerHello hello;
    hello.compiler_identity = in.string("compiler identity");
    hello.ptx_compiler_identity = in.string("PTX compiler identity");
    in.expect_end();
    if (in.failed()) return protocol_error("bad hello: " + in.error());
    return hello;
}

}  // namespace kcache::compile
