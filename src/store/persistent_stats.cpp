// SPDX-License-Identifier: Apache-2.0
// Shard files of the persistent statistics: parsing, formatting, and the locked
// read-modify-write that keeps their counts exact across processes.
#include "store/persistent_stats.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>
#include <vector>

#include "util/file_lock.hpp"
#include "util/log.hpp"

namespace kcache::store {
namespace {

constexpr std::string_view kHeader = "kcache-stats ";
constexpr std::string_view kZeroedAt = "zeroed_at";
constexpr char kHexDigits[] = "0123456789abcdef";
// 9999-12-31: later than any zero() kcache will do, early enough for every calendar conversion.
constexpr std::uint64_t kLatestZeroedAt = 253402300799;

#define KCACHE_STATS_FIELD(name, unit, group, label) \
    StatsField{#name, &StatsCounters::name, StatsUnit::unit, StatsGroup::group, label},
constexpr std::array kFields{KCACHE_STATS_COUNTERS(KCACHE_STATS_FIELD)};
#undef KCACHE_STATS_FIELD
// The struct and the table come from one list; zeroed_at is the one field that is no counter.
static_assert(sizeof(StatsCounters) == (kFields.size() + 1) * sizeof(std::uint64_t));

bool valid_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    });
}

std::optional<std::uint64_t> parse_number(std::string_view text) {
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
        return std::nullopt;
    }
    return value;
}

}  // namespace

std::optional<StatsShard> parse_stats_shard(std::string_view text) {
    // The final newline is required: a file cut short at a line boundary would otherwise pass.
    if (text.empty() || text.back() != '\n') return std::nullopt;
    StatsShard shard;
    bool first = true;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t end = text.find('\n', pos);
        const std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        const std::size_t space = line.find(' ');
        if (space == std::string_view::npos) return std::nullopt;
        const std::string_view name = line.substr(0, space);
        const auto value = parse_number(line.substr(space + 1));
        if (!value) return std::nullopt;
        if (first) {
            // Any version: a later one only adds names (see kFormatVersion).
            if (line.substr(0, space + 1) != kHeader || *value == 0) return std::nullopt;
            first = false;
            continue;
        }
        if (!valid_name(name)) return std::nullopt;
        if (name == kZeroedAt) {
            // A time (seconds since 1970); one far in the future is no stamp kcache wrote, and
            // would make `kcache -s` show a date the C library cannot convert.
            if (*value > kLatestZeroedAt) return std::nullopt;
            shard.counters.zeroed_at = *value;
            continue;
        }
        const auto* field = std::find_if(kFields.begin(), kFields.end(),
                                         [&](const StatsField& f) { return f.name == name; });
        if (field != kFields.end()) {
            shard.counters.*(field->member) = *value;
        } else {
            shard.unknown.emplace_back(name, *value);
        }
    }
    return shard;
}

std::string format_stats_shard(const StatsShard& shard) {
    std::string out;
    out.reserve(512);
    auto line = [&](std::string_view name, std::uint64_t value) {
        out.append(name);
        out.push_back(' ');
        out.append(std::to_string(value));
        out.push_back('\n');
    };
    line(kHeader.substr(0, kHeader.size() - 1), PersistentStats::kFormatVersion);
    line(kZeroedAt, shard.counters.zeroed_at);
    for (const StatsField& field : kFields) line(field.name, shard.counters.*(field.member));
    for (const auto& [name, value] : shard.unknown) line(name, value);
    return out;
}

namespace {

using Shard = StatsShard;

// A missing shard is an empty one; a corrupt one is logged and taken as empty.
Result<Shard> load(const CacheDirectory& directory, const std::string& relative) {
    const std::string path = directory.path_of(relative);
    auto text = directory.read(relative, kMaxSmallFileBytes);
    if (!text && text.error().code() == Errc::kCorruptEntry) {
        util::log_line(util::LogLevel::kInfo, text.error().message() + ": counted as zeros");
        return Shard{};
    }
    if (!text) return text.error();
    if (!*text) return Shard{};
    if (auto shard = parse_stats_shard(**text)) return std::move(*shard);
    util::log_line(util::LogLevel::kInfo, "statistics file " + path +
                                              " is corrupt: counted as zeros until the next "
                                              "update rewrites it");
    return Shard{};
}

std::uint64_t seconds_since_epoch() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

Error lock_error(const std::string& path, std::chrono::milliseconds patience) {
    return Error(Errc::kIoError, "could not lock statistics file " + path + " within " +
                                     std::to_string(patience.count()) +
                                     " ms (held by another process, or not writable)");
}

}  // namespace

StatsCounters& StatsCounters::operator+=(const StatsCounters& other) noexcept {
    for (const StatsField& field : kFields) this->*(field.member) += other.*(field.member);
    zeroed_at = std::max(zeroed_at, other.zeroed_at);
    return *this;
}

std::span<const StatsField> stats_fields() noexcept {
    return kFields;
}

std::uint64_t group_total(const StatsCounters& counters, StatsGroup group) noexcept {
    std::uint64_t total = 0;
    if (group == StatsGroup::kNone) return total;
    for (const StatsField& field : kFields) {
        if (field.group == group) total += counters.*(field.member);
    }
    return total;
}

PersistentStats PersistentStats::at(std::shared_ptr<const CacheDirectory> directory) {
    return PersistentStats(std::move(directory));
}

PersistentStats PersistentStats::on_shard(unsigned shard) const {
    PersistentStats copy = *this;
    copy.fixed_shard_ = shard % kShards;
    return copy;
}

std::string PersistentStats::shard_relative_path(unsigned shard) {
    return std::string("stats/") + kHexDigits[shard % kShards];
}

std::string PersistentStats::shard_path(unsigned shard) const {
    return directory_->path_of(shard_relative_path(shard));
}

unsigned PersistentStats::my_shard() const {
    // By pid at each call, not once: a forked child then spreads to its own shard.
    return fixed_shard_ ? *fixed_shard_ : static_cast<unsigned>(getpid()) % kShards;
}

Result<void> PersistentStats::add(const StatsCounters& delta,
                                  std::chrono::milliseconds patience) const {
    if (directory_->read_only()) return directory_->read_only_error();
    const std::string relative = shard_relative_path(my_shard());
    // The lock is a file of its own: the shard itself is replaced by rename, and a lock on the
    // replaced inode would exclude nobody.
    const auto lock = directory_->lock(relative + ".lock", patience);
    if (!lock) return lock_error(directory_->path_of(relative), patience);
    auto shard = load(*directory_, relative);
    if (!shard) return shard.error();
    StatsCounters addend = delta;
    addend.zeroed_at = 0;
    shard->counters += addend;
    return directory_->write_atomic(relative, format_stats_shard(*shard));
}

Result<StatsCounters> PersistentStats::read() const {
    StatsCounters sum;
    for (unsigned i = 0; i < kShards; ++i) {
        auto shard = load(*directory_, shard_relative_path(i));
        if (!shard) return shard.error();
        sum += shard->counters;
    }
    return sum;
}

Result<void> PersistentStats::zero(std::chrono::milliseconds patience) const {
    if (directory_->read_only()) return directory_->read_only_error();
    Shard zeroed;
    zeroed.counters.zeroed_at = seconds_since_epoch();
    // Counters of newer versions are dropped with the rest: an absent name reads as zero.
    const std::string text = format_stats_shard(zeroed);
    std::optional<Error> first_error;
    for (unsigned i = 0; i < kShards; ++i) {
        const std::string relative = shard_relative_path(i);
        Result<void> written = [&]() -> Result<void> {
            const auto lock = directory_->lock(relative + ".lock", patience);
            if (!lock) return lock_error(directory_->path_of(relative), patience);
            return directory_->write_atomic(relative, text);
        }();
        if (!written && !first_error) first_error = written.error();
    }
    if (first_error) return *first_error;
    return {};
}

}  // namespace kcache::store
