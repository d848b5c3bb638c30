// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the RESP reader every byte from a Redis server goes through
// (store::remote::ReplyReader). The first byte picks the bound, the second the split of the rest
// into feeds; the replies must not depend on the split (up to an error), and none may exceed the
// bound.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "store/remote/redis_reply.hpp"

namespace {

using kcache::store::remote::RedisReply;
using kcache::store::remote::ReplyReader;

bool same(const RedisReply& a, const RedisReply& b) {
    if (a.type != b.type || a.integer != b.integer || a.text != b.text ||
        a.elements.size() != b.elements.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.elements.size(); ++i) {
        if (!same(a.elements[i], b.elements[i])) return false;
    }
    return true;
}

// What a reply's text and elements hold in memory, as the reader charges it (the root's own
// RedisReply is charged besides).
std::size_t held(const RedisReply& reply) {
    std::size_t total = reply.text.size() + reply.elements.size() * sizeof(RedisReply);
    for (const auto& element : reply.elements) total += held(element);
    return total;
}

struct Outcome {
    std::vector<RedisReply> replies;
    bool failed = false;
};

Outcome read(std::string_view bytes, std::size_t bound, std::uint32_t seed) {
    ReplyReader reader(bound);
    Outcome out;
    std::uint32_t state = seed | 1;
    while (!bytes.empty() && !out.failed) {
        std::size_t step = bytes.size();
        if (seed != 0) {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            step = 1 + state % 16;
            if (step > bytes.size()) step = bytes.size();
        }
        auto fed = reader.feed(bytes.substr(0, step));
        bytes.remove_prefix(step);
        for (;;) {
            auto next = reader.next();
            if (!next) {
                KCACHE_FUZZ_CHECK(next.error().code() == kcache::Errc::kCorruptEntry);
                out.failed = true;
                break;
            }
            if (!next->has_value()) break;
            KCACHE_FUZZ_CHECK(sizeof(RedisReply) + held(**next) <= bound);
            out.replies.push_back(std::move(**next));
        }
        if (!fed) {
            KCACHE_FUZZ_CHECK(fed.error().code() == kcache::Errc::kCorruptEntry);
            out.failed = true;
        }
    }
    if (out.failed) KCACHE_FUZZ_CHECK(!reader.feed("+OK\r\n").ok());  // unusable after an error
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    static constexpr std::size_t kBounds[] = {64, 512, 4096, std::size_t{1} << 20};
    const std::size_t bound = kBounds[data[0] % 4];
    const std::uint32_t seed = data[1];
    // A copy sized exactly, so that ASan catches a read one past the bytes.
    const std::vector<char> copy(data + 2, data + size);
    const std::string_view bytes(copy.data(), copy.size());

    const Outcome whole = read(bytes, bound, 0);
    const Outcome split = read(bytes, bound, seed);
    // The same replies however the bytes came, up to where one of the two stopped at the bound
    // (which a split meets earlier: it sees a long reply before it is complete).
    const std::size_t common = std::min(whole.replies.size(), split.replies.size());
    for (std::size_t i = 0; i < common; ++i) {
        KCACHE_FUZZ_CHECK(same(whole.replies[i], split.replies[i]));
    }
    if (!whole.failed && !split.failed) {
        KCACHE_FUZZ_CHECK(whole.replies.size() == split.replies.size());
    }
    return 0;
}
