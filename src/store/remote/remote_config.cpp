// SPDX-License-Identifier: Apache-2.0
#include "store/remote/remote_config.hpp"

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <utility>

#include "util/config.hpp"
#include "util/size.hpp"
#include "util/try.hpp"

namespace kcache::store::remote {

namespace {

using std::chrono::milliseconds;

constexpr std::string_view kBlanks = " \t\n\r\v\f";
constexpr std::string_view kDigits = "0123456789";
constexpr std::string_view kHexDigits = "0123456789abcdefABCDEF";
constexpr std::string_view kNameCharacters =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._";
constexpr milliseconds kLongestDuration{3'600'000};
constexpr std::chrono::microseconds kLongestBusyPoll{10'000};
// sun_path holds 108 bytes with the terminating NUL.
constexpr std::size_t kLongestSocketPath = 107;
constexpr std::string_view kMasked = "***";

bool only(std::string_view text, std::string_view allowed) {
    return text.find_first_not_of(allowed) == std::string_view::npos;
}

// A run of decimal digits as a number no larger than `limit`; nullopt otherwise.
std::optional<std::uint64_t> decimal(std::string_view text, std::uint64_t limit) {
    if (text.empty() || !only(text, kDigits)) return std::nullopt;
    std::uint64_t value = 0;
    for (const char c : text) {
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (value > (limit - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    return value;
}

// A whole number with a unit, scaled: the units are tried in order (an empty suffix last, for a
// bare number).
struct Unit {
    std::string_view suffix;
    std::uint64_t scale;
};
struct Scaled {
    enum class Outcome { kOk, kNoUnit, kMalformed, kTooLarge } outcome;
    std::uint64_t value = 0;
};

Scaled scaled(std::string_view text, std::initializer_list<Unit> units, std::uint64_t limit) {
    for (const Unit& unit : units) {
        if (!text.ends_with(unit.suffix)) continue;
        const std::string_view number = text.substr(0, text.size() - unit.suffix.size());
        if (number.empty() || !only(number, kDigits)) return {Scaled::Outcome::kMalformed};
        const auto value = decimal(number, limit / unit.scale);
        if (!value) return {Scaled::Outcome::kTooLarge};
        return {Scaled::Outcome::kOk, *value * unit.scale};
    }
    return {Scaled::Outcome::kNoUnit};
}

// The duration, or an error whose message says what is wrong without quoting the text (the text
// may be part of a URL that is not shown unmasked).
Result<milliseconds> duration_of(std::string_view text) {
    const auto parsed = scaled(text, {{"ms", 1}, {"s", 1000}, {"", 1}},
                               static_cast<std::uint64_t>(kLongestDuration.count()));
    switch (parsed.outcome) {
        case Scaled::Outcome::kOk:
            if (parsed.value == 0) return Error(Errc::kInvalidArgument, "zero is no time to wait");
            return milliseconds(static_cast<milliseconds::rep>(parsed.value));
        case Scaled::Outcome::kTooLarge:
            return Error(Errc::kInvalidArgument, "more than an hour");
        case Scaled::Outcome::kNoUnit:
        case Scaled::Outcome::kMalformed:
            break;
    }
    return Error(Errc::kInvalidArgument,
                 "expected milliseconds or a number with ms or s (100ms, 2s)");
}

// `busy-poll`: microseconds (us), or milliseconds (ms); 0 is off. Longer than a few milliseconds
// would only burn a core.
Result<std::chrono::microseconds> busy_poll_of(std::string_view text) {
    const auto parsed = scaled(text, {{"us", 1}, {"ms", 1000}},
                               static_cast<std::uint64_t>(kLongestBusyPoll.count()));
    if (parsed.outcome == Scaled::Outcome::kOk) {
        return std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(parsed.value));
    }
    if (parsed.outcome == Scaled::Outcome::kNoUnit) {
        if (text == "0") return std::chrono::microseconds(0);
        return Error(Errc::kInvalidArgument, "expected a number with us or ms (50us), or 0");
    }
    return Error(Errc::kInvalidArgument, "expected 0 to 10ms, with us or ms (50us)");
}

// `max-size`: a bare number is bytes here (one value's size), unlike a cache budget's gigabytes;
// 0 for anything that is not a positive size.
std::uint64_t value_size(std::string_view text) {
    if (only(text, kDigits)) return decimal(text, UINT64_MAX).value_or(0);
    // parse_size would read "1.5" as gigabytes, next to "1" as one byte.
    if (only(text, ".0123456789")) return 0;
    auto size = util::parse_size(text);
    return size.ok() ? *size : 0;
}

std::string format_duration(milliseconds duration) {
    if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + "s";
    return std::to_string(duration.count()) + "ms";
}

std::string format_bytes(std::uint64_t bytes) {
    static constexpr std::pair<int, const char*> kUnits[] = {{30, "Gi"}, {20, "Mi"}, {10, "Ki"}};
    for (const auto& [shift, unit] : kUnits) {
        const std::uint64_t one = std::uint64_t{1} << shift;
        // Below 2^53, where parse_size's double reads the product back exactly.
        if (bytes >= one && bytes % one == 0 && bytes < (std::uint64_t{1} << 53)) {
            return std::to_string(bytes / one) + unit;
        }
    }
    return std::to_string(bytes);
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> percent_decoded(std::string_view text) {
    std::string decoded;
    decoded.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            decoded += text[i];
            continue;
        }
        if (i + 2 >= text.size()) return std::nullopt;
        const int high = hex_value(text[i + 1]);
        const int low = hex_value(text[i + 2]);
        if (high < 0 || low < 0) return std::nullopt;
        decoded += static_cast<char>(high * 16 + low);
        i += 2;
    }
    return decoded;
}

std::string percent_encoded(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string encoded;
    for (const char c : text) {
        if (kNameCharacters.find(c) != std::string_view::npos || c == '~') {
            encoded += c;
        } else {
            const auto byte = static_cast<unsigned char>(c);
            encoded += '%';
            encoded += kHex[byte >> 4];
            encoded += kHex[byte & 15];
        }
    }
    return encoded;
}

// Offsets [begin, end) of a password inside one word of the setting.
struct Span {
    std::size_t begin = 0;
    std::size_t end = 0;
    bool empty() const { return begin >= end; }
    bool overlaps(std::size_t from, std::size_t to) const {
        return !empty() && from < end && begin < to;
    }
};

// Where a word that may not parse seems to hold a password: from the first ':' of what looks like
// userinfo (after "://" when there is one) to the last '@'. Wider than the parser's userinfo, never
// narrower, so that masking it hides at least what parsing would have found.
Span guessed_password(std::string_view word) {
    const std::size_t at = word.rfind('@');
    if (at == std::string_view::npos) return {};
    std::size_t start = word.find("://");
    start = start != std::string_view::npos && start < at ? start + 3 : 0;
    const std::size_t colon = word.find(':', start);
    if (colon == std::string_view::npos || colon >= at) return {};
    return {colon + 1, at};
}

std::string masked(std::string_view word, Span password) {
    if (password.empty()) return std::string(word);
    std::string text(word.substr(0, password.begin));
    text += kMasked;
    text += word.substr(password.end);
    return text;
}

struct ParsedBackend {
    RemoteBackendConfig config;
    Span password;  // where the URL's password is in the word; empty when it has none
};

struct ShardSpec {
    std::string_view name;
    std::uint32_t weight = 1;
};

// One whitespace-free word of the setting: a URL, then attributes after `|`. Every message names
// the word with its password masked and quotes no part of the word that may hold one.
class BackendParser {
public:
    explicit BackendParser(std::string_view word) : word_(word), guess_(guessed_password(word)) {}

    Result<ParsedBackend> parse() {
        const std::size_t bar = word_.find('|');
        const std::string_view url = word_.substr(0, bar);
        const std::size_t colon = url.find(':');
        if (colon == std::string_view::npos || colon == 0) {
            return fail("no scheme (redis://HOST or redis+unix:/PATH)");
        }
        std::string scheme(url.substr(0, colon));
        std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](char c) {
            return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
        });
        const std::string_view rest = url.substr(colon + 1);
        if (scheme == "redis") {
            if (!rest.starts_with("//")) return fail("redis: needs // before the host");
            TRY(parse_tcp(rest.substr(2)));
        } else if (scheme == "redis+unix") {
            TRY(parse_unix(rest));
        } else if (scheme == "rediss") {
            return fail("TLS (rediss://) is not supported: use redis:// or redis+unix:");
        } else {
            return fail("unknown scheme " + quote(url.substr(0, colon)) +
                        " (redis://HOST or redis+unix:/PATH)");
        }
        if (bar != std::string_view::npos) {
            std::string_view attributes = word_.substr(bar + 1);
            while (true) {
                const std::size_t next = attributes.find('|');
                TRY(parse_attribute(attributes.substr(0, next)));
                if (next == std::string_view::npos) break;
                attributes.remove_prefix(next + 1);
            }
        }
        TRY(make_shards());
        return ParsedBackend{std::move(config_), password_};
    }

private:
    Error fail(const std::string& what) const {
        return Error(Errc::kInvalidArgument,
                     "remote backend '" + masked(word_, guess_) + "': " + what);
    }

    // `part` (a view into the word) in quotes, unless it may hold a password.
    std::string quote(std::string_view part) const {
        const auto from = static_cast<std::size_t>(part.data() - word_.data());
        if (guess_.overlaps(from, from + std::max<std::size_t>(part.size(), 1))) {
            return "'" + std::string(kMasked) + "'";
        }
        return "'" + std::string(part) + "'";
    }

    bool is_tcp() const { return endpoint_.transport == RedisEndpoint::Transport::kTcp; }
    const char* where() const { return is_tcp() ? "the host" : "the socket path"; }

    Result<void> parse_tcp(std::string_view rest) {
        const std::size_t at = rest.rfind('@');
        std::string_view host_part = rest;
        if (at != std::string_view::npos) {
            const std::string_view userinfo = rest.substr(0, at);
            host_part = rest.substr(at + 1);
            const std::size_t colon = userinfo.find(':');
            auto user = percent_decoded(userinfo.substr(0, colon));
            if (!user) return fail("a bad percent escape in the user");
            endpoint_.user = std::move(*user);
            if (colon != std::string_view::npos) {
                const std::string_view raw = userinfo.substr(colon + 1);
                auto password = percent_decoded(raw);
                if (!password) return fail("a bad percent escape in the password");
                endpoint_.password = std::move(*password);
                const auto begin = static_cast<std::size_t>(raw.data() - word_.data());
                password_ = {begin, begin + raw.size()};
            }
        }
        if (host_part.empty()) return fail("no host");
        std::string_view after;
        if (host_part.front() == '[') {
            const std::size_t close = host_part.find(']');
            if (close == std::string_view::npos) return fail("an IPv6 address without its ']'");
            host_ = host_part.substr(1, close - 1);
            after = host_part.substr(close + 1);
            if (host_.find(':') == std::string_view::npos ||
                !only(host_, std::string(kHexDigits) + ":.*")) {
                return fail("bad IPv6 address " + quote(host_));
            }
            ipv6_ = true;
        } else {
            const std::size_t end = host_part.find_first_of(":/");
            host_ = host_part.substr(0, end);
            after = end == std::string_view::npos ? std::string_view{} : host_part.substr(end);
            if (host_.empty()) return fail("no host");
            if (!only(host_, std::string(kNameCharacters) + "*")) {
                return fail("bad host " + quote(host_));
            }
        }
        if (after.starts_with(':')) {
            const std::size_t slash = after.find('/');
            const std::string_view port_text = after.substr(1, slash - 1);
            const auto port = decimal(port_text, 65535);
            if (!port || *port == 0) return fail("bad port " + quote(port_text) + " (1 to 65535)");
            endpoint_.port = static_cast<std::uint16_t>(*port);
            after = slash == std::string_view::npos ? std::string_view{} : after.substr(slash);
        }
        if (after.starts_with('/')) {
            TRY(parse_db(after.substr(1), true));
        } else if (!after.empty()) {
            return fail(quote(after) + " after the host (expected :PORT or /DB)");
        }
        endpoint_.host = std::string(host_);
        return ok();
    }

    Result<void> parse_db(std::string_view text, bool may_be_empty) {
        if (text.empty() && may_be_empty) return ok();
        const auto db = decimal(text, INT_MAX);
        if (!db) return fail("bad db " + quote(text) + " (a number from 0)");
        endpoint_.db = static_cast<int>(*db);
        return ok();
    }

    Result<void> parse_unix(std::string_view rest) {
        endpoint_.transport = RedisEndpoint::Transport::kUnix;
        if (rest.starts_with("//")) rest.remove_prefix(2);  // redis+unix:///path, a URL's form
        if (!rest.starts_with('/')) {
            return fail("no socket path (redis+unix:/path/to/socket, absolute)");
        }
        const std::size_t question = rest.find('?');
        host_ = rest.substr(0, question);
        if (question != std::string_view::npos) {
            const std::string_view query = rest.substr(question + 1);
            if (!query.starts_with("db=")) {
                return fail("unknown query " + quote(query) + " (only ?db=N)");
            }
            TRY(parse_db(query.substr(3), false));
        }
        if (host_.size() > kLongestSocketPath) {
            return fail("a socket path longer than " + std::to_string(kLongestSocketPath) +
                        " bytes");
        }
        endpoint_.socket_path = std::string(host_);
        return ok();
    }

    Result<void> parse_attribute(std::string_view attribute) {
        if (attribute.empty())
            return fail("an empty attribute (two '|' in a row, or one at the end)");
        const std::size_t equals = attribute.find('=');
        const std::string_view key = attribute.substr(0, equals);
        const bool has_value = equals != std::string_view::npos;
        const std::string_view value =
            has_value ? attribute.substr(equals + 1) : std::string_view{};
        if (key != "verify-key") {
            if (std::find(seen_.begin(), seen_.end(), key) != seen_.end()) {
                return fail("attribute " + quote(key) + " given twice");
            }
            seen_.push_back(key);
        }
        const auto needs_value = [&]() -> Result<void> {
            if (!has_value || value.empty()) {
                return fail(quote(key) + " needs a value (" + std::string(key) + "=…)");
            }
            return ok();
        };
        const auto duration = [&]() -> Result<milliseconds> {
            auto parsed = duration_of(value);
            if (!parsed) {
                return fail("bad " + quote(key) + " " + quote(value) + ": " +
                            parsed.error().message());
            }
            return *parsed;
        };
        const auto flag = [&]() -> Result<bool> {
            if (!has_value) return true;
            auto parsed = util::parse_bool(value);
            if (!parsed) return fail("bad " + quote(key) + " " + quote(value) + " (true or false)");
            return *parsed;
        };
        if (key == "connect-timeout") {
            TRY_ASSIGN(config_.connect_timeout, duration());
        } else if (key == "timeout") {
            TRY_ASSIGN(config_.timeout, duration());
        } else if (key == "first-byte-timeout") {
            TRY_ASSIGN(config_.first_byte_timeout, duration());
        } else if (key == "busy-poll") {
            TRY(needs_value());
            auto parsed = busy_poll_of(value);
            if (!parsed) {
                return fail("bad " + quote(key) + " " + quote(value) + ": " +
                            parsed.error().message());
            }
            config_.busy_poll = *parsed;
        } else if (key == "read-only") {
            TRY_ASSIGN(config_.read_only, flag());
        } else if (key == "reshare") {
            TRY_ASSIGN(config_.reshare, flag());
        } else if (key == "require-signature") {
            TRY_ASSIGN(config_.require_signature, flag());
        } else if (key == "prefix") {
            TRY(needs_value());
            config_.prefix = std::string(value);
        } else if (key == "password-file") {
            TRY(needs_value());
            config_.password_file = std::string(value);
        } else if (key == "user") {  // an ACL user where the URL has no place for one (a socket)
            TRY(needs_value());
            if (!endpoint_.user.empty()) return fail("a user in the URL and user= both");
            endpoint_.user = std::string(value);
        } else if (key == "sign-key") {
            TRY(needs_value());
            config_.sign_key_file = std::string(value);
        } else if (key == "verify-key") {
            TRY(needs_value());
            config_.verify_key_files.emplace_back(value);
        } else if (key == "max-size") {
            TRY(needs_value());
            const std::uint64_t bytes = value_size(value);
            if (bytes == 0) {
                return fail("bad max-size " + quote(value) +
                            " (bytes, or a number with k, M, G, Ki, Mi or Gi)");
            }
            config_.max_value_bytes = bytes;
        } else if (key == "shards") {
            TRY(needs_value());
            TRY(parse_shards(value));
        } else {
            return fail("unknown attribute " + quote(key));
        }
        return ok();
    }

    Result<void> parse_shards(std::string_view list) {
        while (true) {
            const std::size_t comma = list.find(',');
            const std::string_view item = list.substr(0, comma);
            ShardSpec spec;
            const std::size_t open = item.find('(');
            spec.name = item.substr(0, open);
            if (open != std::string_view::npos) {
                if (!item.ends_with(')'))
                    return fail("bad shard " + quote(item) + " (NAME(WEIGHT))");
                const std::string_view weight = item.substr(open + 1, item.size() - open - 2);
                const auto parsed = decimal(weight, UINT32_MAX);
                if (!parsed || *parsed == 0) {
                    return fail("bad weight " + quote(weight) + " of shard " + quote(spec.name) +
                                " (a whole number from 1)");
                }
                spec.weight = static_cast<std::uint32_t>(*parsed);
            }
            if (spec.name.empty()) return fail("a shard without a name");
            const std::string_view allowed = ipv6_ ? kHexDigits : kNameCharacters;
            if (!only(spec.name, allowed)) {
                return fail("bad shard name " + quote(spec.name) +
                            (ipv6_ ? " (hex digits, to fit an IPv6 address)"
                                   : " (letters, digits, '-', '.', '_')"));
            }
            const bool repeated =
                std::any_of(shard_specs_.begin(), shard_specs_.end(),
                            [&](const ShardSpec& s) { return s.name == spec.name; });
            if (repeated) return fail("shard " + quote(spec.name) + " named twice");
            shard_specs_.push_back(spec);
            if (comma == std::string_view::npos) break;
            list.remove_prefix(comma + 1);
        }
        return ok();
    }

    Result<void> make_shards() {
        const auto stars = static_cast<std::size_t>(std::count(host_.begin(), host_.end(), '*'));
        if (shard_specs_.empty()) {
            if (stars != 0) {
                return fail(std::string("a '*' in ") + where() + " needs shards=NAME,…");
            }
            config_.shards.push_back(Shard{endpoint_, {}, 1});
            return ok();
        }
        if (stars != 1) {
            return fail("shards= needs exactly one '*' in " + std::string(where()) + " (it has " +
                        std::to_string(stars) + ")");
        }
        const std::size_t star = host_.find('*');
        for (const ShardSpec& spec : shard_specs_) {
            std::string replaced(host_.substr(0, star));
            replaced += spec.name;
            replaced += host_.substr(star + 1);
            Shard shard{endpoint_, std::string(spec.name), spec.weight};
            if (is_tcp()) {
                shard.endpoint.host = std::move(replaced);
            } else {
                if (replaced.size() > kLongestSocketPath) {
                    return fail("the socket path of shard " + quote(spec.name) +
                                " is longer than " + std::to_string(kLongestSocketPath) + " bytes");
                }
                shard.endpoint.socket_path = std::move(replaced);
            }
            config_.shards.push_back(std::move(shard));
        }
        return ok();
    }

    std::string_view word_;
    Span guess_;
    Span password_;
    RemoteBackendConfig config_;
    RedisEndpoint endpoint_;
    std::string_view host_;  // the host, or the socket path, as written: a template with shards
    bool ipv6_ = false;
    std::vector<std::string_view> seen_;
    std::vector<ShardSpec> shard_specs_;
};

// Calls `on_word` for each whitespace-separated word and `on_blank` for each run between them.
template <class OnWord, class OnBlank>
void split_words(std::string_view text, OnWord&& on_word, OnBlank&& on_blank) {
    std::size_t position = 0;
    while (position < text.size()) {
        const std::size_t word = text.find_first_not_of(kBlanks, position);
        on_blank(text.substr(position, word - position));
        if (word == std::string_view::npos) return;
        const std::size_t end = text.find_first_of(kBlanks, word);
        on_word(text.substr(word, end - word));
        position = end;
    }
}

// The field of an endpoint that a shard's name went into.
std::string& templated_field(RedisEndpoint& endpoint) {
    return endpoint.transport == RedisEndpoint::Transport::kTcp ? endpoint.host
                                                                : endpoint.socket_path;
}

// The URL with `*` where the shards' names go, if every shard is that URL with its name there.
std::optional<RedisEndpoint> shard_template(const std::vector<Shard>& shards) {
    const std::string& name = shards.front().name;
    RedisEndpoint first = shards.front().endpoint;
    const std::string field = templated_field(first);
    if (name.empty()) return std::nullopt;
    // The field with `replacement` where the first shard's name is at `at`.
    const auto filled = [&](std::size_t at, std::string_view replacement) {
        std::string text = field;
        text.replace(at, name.size(), replacement);
        return text;
    };
    for (std::size_t at = field.find(name); at != std::string::npos;
         at = field.find(name, at + 1)) {
        const bool fits = std::all_of(shards.begin(), shards.end(), [&](const Shard& shard) {
            RedisEndpoint expected = first;
            templated_field(expected) = filled(at, shard.name);
            return !shard.name.empty() && expected == shard.endpoint;
        });
        if (fits) {
            templated_field(first) = filled(at, "*");
            return first;
        }
    }
    return std::nullopt;
}

}  // namespace

std::string RedisEndpoint::redacted() const {
    if (transport == Transport::kUnix) {
        // A socket's URL carries no user or password: those come from password-file or the
        // environment.
        // A path that starts with "//" needs the URL form, which the parser strips "//" from.
        std::string url =
            (socket_path.starts_with("//") ? "redis+unix://" : "redis+unix:") + socket_path;
        if (db != 0) url += "?db=" + std::to_string(db);
        return url;
    }
    std::string url = "redis://";
    if (!user.empty() || !password.empty()) {
        url += percent_encoded(user);
        if (!password.empty()) url += ":" + std::string(kMasked);
        url += '@';
    }
    url += host.find(':') != std::string::npos ? "[" + host + "]" : host;
    url += ":" + std::to_string(port);
    if (db != 0) url += "/" + std::to_string(db);
    return url;
}

std::string RemoteBackendConfig::redacted() const {
    const RemoteBackendConfig defaults;
    std::string text;
    const bool sharded = shards.size() > 1 || (shards.size() == 1 && !shards.front().name.empty());
    std::optional<RedisEndpoint> url;
    if (shards.empty()) {
        text = "(no server)";
    } else if (!sharded) {
        text = shards.front().endpoint.redacted();
    } else if ((url = shard_template(shards))) {
        text = url->redacted();
    } else {
        // Endpoints built by code rather than from one URL: list them as they are.
        text = "{";
        for (const Shard& shard : shards) {
            if (text.size() > 1) text += ',';
            text += shard.endpoint.redacted() + "(" + std::to_string(shard.weight) + ")";
        }
        text += "}";
    }
    if (connect_timeout != defaults.connect_timeout) {
        text += "|connect-timeout=" + format_duration(connect_timeout);
    }
    if (timeout != defaults.timeout) text += "|timeout=" + format_duration(timeout);
    if (first_byte_timeout) text += "|first-byte-timeout=" + format_duration(*first_byte_timeout);
    if (busy_poll != defaults.busy_poll) {
        text += "|busy-poll=" + std::to_string(busy_poll.count()) + "us";
    }
    if (read_only) text += "|read-only";
    if (reshare) text += "|reshare";
    if (prefix != defaults.prefix) text += "|prefix=" + prefix;
    if (!password_file.empty()) text += "|password-file=" + password_file;
    if (!shards.empty() && shards.front().endpoint.transport == RedisEndpoint::Transport::kUnix &&
        !shards.front().endpoint.user.empty()) {
        text += "|user=" + shards.front().endpoint.user;
    }
    if (max_value_bytes != defaults.max_value_bytes) {
        text += "|max-size=" + format_bytes(max_value_bytes);
    }
    if (!sign_key_file.empty()) text += "|sign-key=" + sign_key_file;
    for (const std::string& file : verify_key_files) text += "|verify-key=" + file;
    if (require_signature) text += "|require-signature";
    if (sharded && url) {
        text += "|shards=";
        for (std::size_t i = 0; i < shards.size(); ++i) {
            if (i != 0) text += ',';
            text += shards[i].name;
            if (shards[i].weight != 1) text += "(" + std::to_string(shards[i].weight) + ")";
        }
    }
    return text;
}

Result<std::vector<RemoteBackendConfig>> parse_remote_setting(std::string_view text) {
    std::vector<RemoteBackendConfig> backends;
    std::optional<Error> error;
    split_words(
        text,
        [&](std::string_view word) {
            if (error) return;
            auto parsed = BackendParser(word).parse();
            if (parsed) {
                backends.push_back(std::move(parsed->config));
            } else {
                error = std::move(parsed).error();
            }
        },
        [](std::string_view) {});
    if (error) return std::move(*error);
    return backends;
}

Result<milliseconds> parse_duration(std::string_view text) {
    auto duration = duration_of(text);
    if (!duration) {
        return Error(Errc::kInvalidArgument,
                     "bad duration '" + std::string(text) + "': " + duration.error().message());
    }
    return *duration;
}

std::string redact_remote_setting(std::string_view text) {
    std::string redacted;
    split_words(
        text,
        [&](std::string_view word) {
            // A word that parses has its password exactly where the parser found it; for one that
            // does not, the guess masks at least as much.
            auto parsed = BackendParser(word).parse();
            redacted += masked(word, parsed ? parsed->password : guessed_password(word));
        },
        [&](std::string_view blank) { redacted += blank; });
    return redacted;
}

}  // namespace kcache::store::remote
