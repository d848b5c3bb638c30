// SPDX-License-Identifier: Apache-2.0
// Comparing key material field by field, and fitting both sides of each difference into one
// log line without hiding the part that differs.
#include "store/key_difference.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string_view>

namespace kcache::store {
namespace {

constexpr std::string_view kEllipsis = "\u2026";  // three bytes of UTF-8
// The whole line aims at this many bytes; every value keeps at least kMinValueBytes, since a
// value cut shorter says nothing, so with all five fields long it may run somewhat over.
constexpr std::size_t kLineBudget = 300;
constexpr std::size_t kMinValueBytes = 24;
// Enough to tell two sources apart by eye; the full hash is in `kcache inspect`.
constexpr std::size_t kShortHashDigits = 12;

struct Field {
    const char* name;
    const char* verb;
    std::string KeyMaterial::*member;
};

// The order of the line and of differing_fields(): what a user most likely changed on purpose
// comes first.
constexpr Field kFields[] = {
    {"arch", "differs", &KeyMaterial::arch},
    {"source kind", "differs", &KeyMaterial::source_kind},
    {"source", "differs", &KeyMaterial::source_hash},
    {"options", "differ", &KeyMaterial::options},
    {"name expressions", "differ", &KeyMaterial::names},
    {"toolchain", "differs", &KeyMaterial::toolchain},
};

std::string escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (byte < 0x20 || byte == 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", byte);
            out += hex;
        } else {
            out += c;
        }
    }
    return out;
}

bool continuation_byte(std::string_view text, std::size_t at) {
    return at < text.size() && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80;
}

// Cut points are moved off UTF-8 continuation bytes so that a cut never splits a character; at
// most three steps, since a longer run is not UTF-8 anyway.
std::size_t back_to_character(std::string_view text, std::size_t at) {
    for (int step = 0; step < 3 && at > 0 && continuation_byte(text, at); ++step) --at;
    return at;
}
std::size_t forward_to_character(std::string_view text, std::size_t at) {
    for (int step = 0; step < 3 && continuation_byte(text, at); ++step) ++at;
    return at;
}

// At most `limit` bytes of `text`, starting near `start`, with an ellipsis wherever it was cut.
// `limit` must leave room for two ellipses and a character.
std::string window(std::string_view text, std::size_t start, std::size_t limit) {
    if (text.size() <= limit) return std::string(text);
    if (start <= kEllipsis.size()) start = 0;  // an ellipsis would hide no more than it takes
    std::string out;
    std::size_t room = limit;
    if (start > 0) {
        // A start near the end would leave room unused: show as much of the tail as fits.
        start =
            forward_to_character(text, std::min(start, text.size() - (limit - kEllipsis.size())));
        out += kEllipsis;
        room -= kEllipsis.size();
    }
    if (text.size() - start <= room) {
        out += text.substr(start);
        return out;
    }
    const std::size_t end = back_to_character(text, start + room - kEllipsis.size());
    out += text.substr(start, end - start);
    out += kEllipsis;
    return out;
}

// Splits `budget` bytes among values of the given sizes: short values are shown whole, the long
// ones share what is left equally (never under kMinValueBytes).
std::vector<std::size_t> fair_shares(const std::vector<std::size_t>& sizes, std::size_t budget) {
    std::vector<std::size_t> order(sizes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return sizes[a] < sizes[b]; });
    std::vector<std::size_t> shares(sizes.size());
    std::size_t left = budget;
    std::size_t count = sizes.size();
    for (const std::size_t index : order) {
        const std::size_t share = std::max(kMinValueBytes, left / count);
        shares[index] = std::min(sizes[index], share);
        left -= std::min(left, shares[index]);
        --count;
    }
    return shares;
}

struct Shown {
    const Field* field;
    std::string stored;
    std::string wanted;
};

// Two full hashes say no more than their first digits, unless those happen to agree.
void shorten_hashes(Shown& shown) {
    if (shown.stored.size() > kShortHashDigits && shown.wanted.size() > kShortHashDigits &&
        shown.stored.compare(0, kShortHashDigits, shown.wanted, 0, kShortHashDigits) != 0) {
        shown.stored.resize(kShortHashDigits);
        shown.wanted.resize(kShortHashDigits);
    }
}

// Cuts values that do not fit around the pair's first difference, so that the part that changed
// is what the reader sees (the options of two builds usually share a long prefix).
void cut_pair(Shown& shown, std::size_t stored_limit, std::size_t wanted_limit) {
    if (shown.stored.size() <= stored_limit && shown.wanted.size() <= wanted_limit) return;
    const auto mismatch = std::mismatch(shown.stored.begin(), shown.stored.end(),
                                        shown.wanted.begin(), shown.wanted.end());
    const auto common = static_cast<std::size_t>(mismatch.first - shown.stored.begin());
    // Keep a quarter of the room for the common text before the difference, as context.
    auto start = [common](std::size_t limit) {
        return common > limit / 4 ? common - limit / 4 : 0;
    };
    shown.stored = window(shown.stored, start(stored_limit), stored_limit);
    shown.wanted = window(shown.wanted, start(wanted_limit), wanted_limit);
}

}  // namespace

std::vector<std::string> differing_fields(const KeyMaterial& stored, const KeyMaterial& wanted) {
    std::vector<std::string> names;
    for (const Field& field : kFields) {
        if (stored.*field.member != wanted.*field.member) names.emplace_back(field.name);
    }
    return names;
}

std::string describe_difference(const KeyMaterial& stored, const KeyMaterial& wanted) {
    static constexpr std::string_view kStoredOpen = " (stored \"";
    static constexpr std::string_view kNowOpen = "\", now \"";
    static constexpr std::string_view kClose = "\")";
    static constexpr std::string_view kSeparator = "; ";

    std::vector<Shown> shown;
    std::size_t overhead = 0;  // the line's bytes other than the values
    for (const Field& field : kFields) {
        const std::string& before = stored.*field.member;
        const std::string& now = wanted.*field.member;
        if (before == now) continue;
        Shown item{&field, escape(before), escape(now)};
        if (field.member == &KeyMaterial::source_hash) shorten_hashes(item);
        overhead += std::strlen(field.name) + 1 + std::strlen(field.verb) + kStoredOpen.size() +
                    kNowOpen.size() + kClose.size() + (shown.empty() ? 0 : kSeparator.size());
        shown.push_back(std::move(item));
    }
    if (shown.empty()) return {};

    std::vector<std::size_t> sizes;
    for (const Shown& item : shown) {
        sizes.push_back(item.stored.size());
        sizes.push_back(item.wanted.size());
    }
    const std::vector<std::size_t> shares =
        fair_shares(sizes, kLineBudget > overhead ? kLineBudget - overhead : 0);

    std::string line;
    for (std::size_t i = 0; i < shown.size(); ++i) {
        Shown& item = shown[i];
        cut_pair(item, shares[2 * i], shares[2 * i + 1]);
        if (i > 0) line += kSeparator;
        line += item.field->name;
        line += ' ';
        line += item.field->verb;
        line += kStoredOpen;
        line += item.stored;
        line += kNowOpen;
        line += item.wanted;
        line += kClose;
    }
    return line;
}

std::string printable(std::string_view text, std::size_t limit) {
    // window() needs room for two ellipses and a character.
    return window(escape(text), 0, std::max(limit, 2 * kEllipsis.size() + 1));
}

}  // namespace kcache::store
