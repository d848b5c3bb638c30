// SPDX-License-Identifier: Apache-2.0
// A Redis reply as kcache holds it, and the reader that makes replies from a server's bytes
// (untrusted: hiredis's RESP parser underneath, a fuzz target over it, and a bound on what one
// reply may hold).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::store::remote {

struct RedisReply {
    enum class Type : std::uint8_t { kNil, kInteger, kString, kStatus, kError, kArray };
    Type type = Type::kNil;
    std::int64_t integer = 0;
    std::string text;  // kString (bulk), kStatus ("OK"), kError ("NOPERM this user has no ...")
    std::vector<RedisReply> elements;  // kArray

    bool is_error() const noexcept { return type == Type::kError; }
    bool is_nil() const noexcept { return type == Type::kNil; }
    // An error reply's first word ("NOPERM", "OOM", "WRONGPASS"); empty for any other reply.
    std::string_view error_code() const noexcept;
};

// Replies out of a byte stream, in order. Feed it what the socket gave; next() returns a reply once
// all of its bytes are in.
class ReplyReader {
public:
    // A reply (or the bytes buffered towards one) over `max_reply_bytes` is a protocol error: a
    // server cannot make kcache hold more than it would accept as a value.
    explicit ReplyReader(std::size_t max_reply_bytes);
    ~ReplyReader();
    ReplyReader(const ReplyReader&) = delete;
    ReplyReader& operator=(const ReplyReader&) = delete;

    // kCorruptEntry (protocol error) when the buffered bytes exceed the bound.
    Result<void> feed(std::string_view bytes);
    // The next complete reply, nullopt while one is incomplete, kCorruptEntry for bytes that are
    // not RESP (after which the reader is unusable).
    Result<std::optional<RedisReply>> next();
    // Whether the reader failed because a reply was over the bound (the value is at fault, not
    // the server).
    bool over_bound() const noexcept;

private:
    struct State;
    std::unique_ptr<State> state_;
};

// One command in RESP (an array of bulk strings), as the server reads it.
std::string format_command(const std::vector<std::string_view>& args);

}  // namespace kcache::store::remote
