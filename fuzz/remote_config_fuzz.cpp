// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the `remote` setting (store::remote::parse_remote_setting), which may come from
// kcache.conf, the environment or the command line, and its redaction. No text crashes either; a
// redacted text parses back to the same backends with "***" for each password; and what is printed
// of a text (an error, a redacted backend or setting) is the same whichever password is planted in
// a URL around the input, so no password shows.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "store/remote/remote_config.hpp"

namespace {

using namespace kcache::store::remote;

RedisEndpoint with_masked_password(RedisEndpoint endpoint) {
    if (endpoint.transport == RedisEndpoint::Transport::kTcp && !endpoint.password.empty()) {
        endpoint.password = "***";
    }
    return endpoint;
}

// `again` is `backends` as parsed from a redacted text: equal but for the passwords.
void check_same_but_masked(const std::vector<RemoteBackendConfig>& backends,
                           const std::vector<RemoteBackendConfig>& again) {
    KCACHE_FUZZ_CHECK(again.size() == backends.size());
    for (std::size_t b = 0; b < backends.size(); ++b) {
        KCACHE_FUZZ_CHECK(again[b].shards.size() == backends[b].shards.size());
        for (std::size_t s = 0; s < backends[b].shards.size(); ++s) {
            const Shard& before = backends[b].shards[s];
            const Shard& after = again[b].shards[s];
            KCACHE_FUZZ_CHECK(after.endpoint == with_masked_password(before.endpoint));
            KCACHE_FUZZ_CHECK(after.name == before.name && after.weight == before.weight);
        }
        KCACHE_FUZZ_CHECK(again[b].redacted() == backends[b].redacted());
    }
}

// Everything of `text` that may be printed: the redacted setting, then the error or each backend
// and endpoint redacted.
std::string printed(const std::string& text) {
    std::string out = redact_remote_setting(text) + "\n";
    auto parsed = parse_remote_setting(text);
    if (!parsed) return out + parsed.error().message();
    for (const RemoteBackendConfig& backend : *parsed) {
        out += backend.redacted() + "\n";
        for (const Shard& shard : backend.shards) out += shard.endpoint.redacted() + "\n";
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A copy sized exactly, so that ASan catches a read one past the text.
    const std::string text(reinterpret_cast<const char*>(data), size);

    auto parsed = parse_remote_setting(text);
    const std::string redacted = redact_remote_setting(text);
    if (!parsed) {
        KCACHE_FUZZ_CHECK(parsed.error().code() == kcache::Errc::kInvalidArgument);
    } else {
        auto again = parse_remote_setting(redacted);
        KCACHE_FUZZ_CHECK(again.ok());
        check_same_but_masked(*parsed, *again);
        for (const RemoteBackendConfig& backend : *parsed) {
            KCACHE_FUZZ_CHECK(!backend.shards.empty());
            auto rebuilt = parse_remote_setting(backend.redacted());
            KCACHE_FUZZ_CHECK(rebuilt.ok());
            check_same_but_masked({backend}, *rebuilt);
        }
    }

    // A password planted before, after and around the input, whole and cut by a '|' that should
    // have been escaped: what is printed is the same whichever password it is, so no part of one
    // shows. (The two passwords have the same length and kinds of characters, no hex letters
    // among them, so that they parse alike wherever the input puts them.)
    const auto same_for_both = [&](auto&& planted, std::string_view one, std::string_view other) {
        KCACHE_FUZZ_CHECK(printed(planted(one)) == printed(planted(other)));
    };
    const auto in_userinfo = [&](std::string_view secret) {
        return "redis://alice:" + std::string(secret) + "@" + text;
    };
    const auto after_input = [&](std::string_view secret) {
        return text + " redis://:" + std::string(secret) + "@cache";
    };
    const auto with_attribute = [&](std::string_view secret) {
        return "redis://alice:" + std::string(secret) + "@" + text + "|timeout=1s";
    };
    const auto after_a_port = [&](std::string_view secret) {
        return "redis://alice:1234|" + std::string(secret) + "@" + text;
    };
    const auto around_input = [&](std::string_view secret) {
        return "redis://alice:" + text + "|" + std::string(secret) + "@cache";
    };
    for (const auto& [one, other] : {std::pair{"Pw7xQz", "Kq4mRy"}, {"Pw7x|Qz9k", "Kq4m|Ry8j"}}) {
        same_for_both(in_userinfo, one, other);
        same_for_both(after_input, one, other);
        same_for_both(with_attribute, one, other);
        same_for_both(after_a_port, one, other);
        // Within one word: a password cut by whitespace is past guessing.
        if (text.find_first_of(" \t\n\r\v\f") == std::string::npos) {
            same_for_both(around_input, one, other);
        }
    }
    return 0;
}
