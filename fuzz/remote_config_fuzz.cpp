// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the `remote` setting (store::remote::parse_remote_setting), which may come from
// kcache.conf, the environment or the command line, and its redaction. No text crashes either; a
// redacted text parses back to the same backends with "***" for each password; and a password
// planted in a URL around the input never shows in an error, a redacted backend or a redacted
// setting.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
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

// Neither `secret` nor any piece of it split at '|' shows in what may be printed of `text`.
void check_never_shown(const std::string& text, std::string_view input,
                       const std::vector<std::string_view>& pieces) {
    for (const std::string_view piece : pieces) {
        if (input.find(piece) != std::string_view::npos) return;  // the input itself shows it
    }
    const auto shows = [&](const std::string& printed) {
        for (const std::string_view piece : pieces) {
            if (printed.find(piece) != std::string::npos) return true;
        }
        return false;
    };
    KCACHE_FUZZ_CHECK(!shows(redact_remote_setting(text)));
    auto parsed = parse_remote_setting(text);
    if (!parsed) {
        KCACHE_FUZZ_CHECK(!shows(parsed.error().message()));
        return;
    }
    for (const RemoteBackendConfig& backend : *parsed) {
        KCACHE_FUZZ_CHECK(!shows(backend.redacted()));
        for (const Shard& shard : backend.shards) {
            KCACHE_FUZZ_CHECK(!shows(shard.endpoint.redacted()));
        }
    }
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
    // have been escaped.
    const std::string secret = "Pw7xQz";
    check_never_shown("redis://alice:" + secret + "@" + text, text, {secret});
    check_never_shown(text + " redis://:" + secret + "@cache", text, {secret});
    check_never_shown("redis://alice:" + secret + "@" + text + "|timeout=1s", text, {secret});
    check_never_shown("redis://alice:Pw7x|Qz9k@" + text, text, {"Pw7x", "Qz9k"});
    check_never_shown("redis://alice:1234|Qz9k@" + text, text, {"Qz9k"});
    // Within one word: a password cut by whitespace is past guessing.
    if (text.find_first_of(" \t\n\r\v\f") == std::string::npos) {
        check_never_shown("redis://alice:" + text + "|" + secret + "@cache", text, {secret});
    }
    return 0;
}
