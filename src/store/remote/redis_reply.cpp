// SPDX-License-Identifier: Apache-2.0
// hiredis reads RESP; kcache builds the replies itself through hiredis's object functions, so that
// what one reply may allocate is charged against the bound before it is allocated (an array
// header alone can ask for billions of elements).
#include "store/remote/redis_reply.hpp"

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cassert>
#include <deque>
#include <limits>
#include <new>

namespace kcache::store::remote {

std::string_view RedisReply::error_code() const noexcept {
    if (type != Type::kError) return {};
    const std::string_view all(text);
    return all.substr(0, all.find(' '));
}

namespace {

// What the object functions reach through hiredis's privdata (ReplyReader::State is private).
struct ReaderState {
    explicit ReaderState(std::size_t max) : max_reply_bytes(max) {}
    ~ReaderState() {
        if (reader != nullptr) redisReaderFree(reader);
    }

    std::size_t max_reply_bytes;
    redisReader* reader = nullptr;
    // What the reply being built has allocated, against max_reply_bytes.
    std::size_t charged = 0;
    bool over_bound = false;
    std::deque<RedisReply> ready;  // complete replies not yet taken by next()
    std::optional<Error> failed;   // sticky: the stream is unusable after it

    bool charge(std::size_t bytes) {
        if (bytes > max_reply_bytes - charged) {
            over_bound = true;
            return false;
        }
        charged += bytes;
        return true;
    }

    std::size_t buffered() const { return reader->len - reader->pos; }
};

using State = ReaderState;

State& state_of(const redisReadTask* task) {
    // hiredis copies the reader's privdata into every task it makes.
    return *static_cast<State*>(task->privdata);
}

// Where a new value goes: a new root, or the next element of its parent array, whose elements
// were reserved when it was made (so that pointers to them stay valid while it fills).
RedisReply* place(const redisReadTask* task, RedisReply::Type type) {
    State& state = state_of(task);
    RedisReply* reply = nullptr;
    if (task->parent == nullptr) {
        if (!state.charge(sizeof(RedisReply))) return nullptr;
        reply = new (std::nothrow) RedisReply();
    } else {
        auto* parent = static_cast<RedisReply*>(task->parent->obj);
        assert(parent->type == RedisReply::Type::kArray);
        assert(static_cast<std::size_t>(task->idx) == parent->elements.size());
        if (parent->elements.size() == parent->elements.capacity()) return nullptr;
        reply = &parent->elements.emplace_back();
    }
    if (reply != nullptr) reply->type = type;
    return reply;
}

void* create_string(const redisReadTask* task, char* bytes, std::size_t length) {
    if (!state_of(task).charge(length)) return nullptr;
    RedisReply::Type type = RedisReply::Type::kString;
    if (task->type == REDIS_REPLY_STATUS) type = RedisReply::Type::kStatus;
    if (task->type == REDIS_REPLY_ERROR) type = RedisReply::Type::kError;
    RedisReply* reply = place(task, type);
    if (reply != nullptr) reply->text.assign(bytes, length);
    return reply;
}

void* create_array(const redisReadTask* task, int elements) {
    State& state = state_of(task);
    if (elements < 0) return nullptr;  // hiredis makes -1 a nil; other negatives are not RESP
    const auto count = static_cast<std::size_t>(elements);
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(RedisReply) ||
        !state.charge(count * sizeof(RedisReply))) {
        return nullptr;
    }
    RedisReply* reply = place(task, RedisReply::Type::kArray);
    if (reply != nullptr) reply->elements.reserve(count);
    return reply;
}

void* create_integer(const redisReadTask* task, long long value) {
    RedisReply* reply = place(task, RedisReply::Type::kInteger);
    if (reply != nullptr) reply->integer = value;
    return reply;
}

void* create_nil(const redisReadTask* task) {
    return place(task, RedisReply::Type::kNil);
}

// Called by hiredis for a root only: the elements belong to it.
void free_object(void* reply) {
    delete static_cast<RedisReply*>(reply);
}

redisReplyObjectFunctions object_functions = {create_string, create_array, create_integer,
                                              create_nil, free_object};

Error protocol_error(std::string what) {
    return Error(Errc::kCorruptEntry, "redis protocol error: " + std::move(what));
}

}  // namespace

struct ReplyReader::State : ReaderState {
    using ReaderState::ReaderState;
};

ReplyReader::ReplyReader(std::size_t max_reply_bytes)
    : state_(std::make_unique<State>(max_reply_bytes)) {
    state_->reader = redisReaderCreateWithFunctions(&object_functions);
    if (state_->reader == nullptr) throw std::bad_alloc();
    // An emptied buffer larger than this is freed at the next feed: a pooled connection does not
    // keep a large value's buffer while idle.
    state_->reader->maxbuf = REDIS_READER_MAX_BUF;
    state_->reader->privdata = static_cast<ReaderState*>(state_.get());
}

ReplyReader::~ReplyReader() = default;

bool ReplyReader::over_bound() const noexcept {
    return state_->over_bound;
}

Result<void> ReplyReader::feed(std::string_view bytes) {
    ReaderState& state = *state_;
    if (state.failed) return *state.failed;
    if (bytes.empty()) return ok();
    if (redisReaderFeed(state.reader, bytes.data(), bytes.size()) != REDIS_OK) {
        state.failed =
            protocol_error("the reader refused bytes: " + std::string(state.reader->errstr));
        return *state.failed;
    }
    // Takes every complete reply now, so that what stays buffered is part of one reply only, and
    // the bound applies to it.
    for (;;) {
        void* object = nullptr;
        if (redisReaderGetReply(state.reader, &object) != REDIS_OK) {
            state.failed = state.over_bound
                               ? protocol_error("a reply exceeds " +
                                                std::to_string(state.max_reply_bytes) + " bytes")
                               : protocol_error(state.reader->errstr);
            break;
        }
        if (object == nullptr) break;  // incomplete: what it has allocated stays charged
        state.charged = 0;
        auto* reply = static_cast<RedisReply*>(object);
        state.ready.push_back(std::move(*reply));
        delete reply;
    }
    if (!state.failed && state.buffered() > state.max_reply_bytes) {
        state.over_bound = true;
        state.failed =
            protocol_error("a reply exceeds " + std::to_string(state.max_reply_bytes) + " bytes");
    }
    // Replies completed before bad bytes are still delivered; next() reports the error after them.
    if (state.failed && state.ready.empty()) return *state.failed;
    return ok();
}

Result<std::optional<RedisReply>> ReplyReader::next() {
    ReaderState& state = *state_;
    if (!state.ready.empty()) {
        RedisReply reply = std::move(state.ready.front());
        state.ready.pop_front();
        return std::optional<RedisReply>(std::move(reply));
    }
    if (state.failed) return *state.failed;
    return std::optional<RedisReply>();
}

std::string format_command(const std::vector<std::string_view>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& arg : args) {
        out += '$';
        out += std::to_string(arg.size());
        out += "\r\n";
        out += arg;
        out += "\r\n";
    }
    return out;
}

}  // namespace kcache::store::remote
