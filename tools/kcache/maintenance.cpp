#include "tools/kcache/maintenance.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <ctime>

#include "store/disk_catalog.hpp"
#include "store/disk_cleaner.hpp"
#include "tools/kcache/json.hpp"
#include "util/size.hpp"

namespace kcache::tool {
namespace {

std::string ago(std::chrono::system_clock::time_point when) {
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() - when)
            .count();
    if (seconds < 120) return std::to_string(std::max<long long>(seconds, 0)) + "s";
    if (seconds < 7200) return std::to_string(seconds / 60) + "m";
    if (seconds < 172800) return std::to_string(seconds / 3600) + "h";
    return std::to_string(seconds / 86400) + "d";
}

long long epoch_seconds(std::chrono::system_clock::time_point when) {
    return std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count();
}

const char* kind_name(store::PayloadKind kind) {
    switch (kind) {
        case store::PayloadKind::kCubin:
            return "cubin";
        case store::PayloadKind::kFatbin:
            return "fatbin";
        case store::PayloadKind::kPtx:
            return "ptx";
    }
    return "unknown";
}

int report_cleanup(const char* what, const Result<store::CleanupReport>& report) {
    if (!report) {
        std::fprintf(stderr, "kcache: %s failed: %s\n", what, report.error().message().c_str());
        return 1;
    }
    if (!report->ran) {
        std::fprintf(stderr, "kcache: another process is cleaning this directory; try again\n");
        return 1;
    }
    std::printf("%s%s: %" PRIu64 " entries (%s) removed, %" PRIu64
                " stale temporary files, %" PRIu64 " unused lock files, %" PRIu64
                " strays; %" PRIu64 " entries (%s) left\n",
                what, report->dry_run ? " (dry run: nothing removed)" : "", report->entries_removed,
                util::format_size(report->bytes_removed).c_str(), report->temps_swept,
                report->locks_removed, report->strays_removed, report->files_after,
                util::format_size(report->bytes_after).c_str());
    return report->errors == 0 ? 0 : 1;
}

}  // namespace

std::optional<std::chrono::seconds> parse_age(const std::string& text, std::string& error) {
    std::size_t end = 0;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    const std::string unit = text.substr(end);
    if (end == 0 || unit.size() > 1) {
        error = "bad age '" + text + "': a whole number with an optional unit s, m, h or d";
        return std::nullopt;
    }
    std::uint64_t scale = 86400;  // a bare number is days, as in ccache
    if (unit == "s") {
        scale = 1;
    } else if (unit == "m") {
        scale = 60;
    } else if (unit == "h") {
        scale = 3600;
    } else if (!unit.empty() && unit != "d") {
        error = "bad age '" + text + "': unknown unit '" + unit + "' (s, m, h or d)";
        return std::nullopt;
    }
    // Bounded before any arithmetic: the cleaner subtracts the age from now in nanoseconds, and
    // an age that wrapped there would make every entry old enough to go.
    const std::string digits = text.substr(0, end);
    const std::size_t first = std::min(digits.find_first_not_of('0'), digits.size());
    const std::uint64_t limit = kMaxAge.count() / scale;
    if (digits.size() - first > 12 || std::stoull(digits) > limit) {
        error = "bad age '" + text + "': at most " + std::to_string(limit) +
                (unit.empty() ? "d" : unit) + " (100 years); to remove every entry, use -C";
        return std::nullopt;
    }
    return std::chrono::seconds(static_cast<std::int64_t>(std::stoull(digits) * scale));
}

int clear_cache(const store::CacheDirectory& directory, bool dry_run) {
    // Everything goes: an age of zero removes every entry, whatever the budgets.
    store::CleanupRequest request;
    request.all_entries = true;  // stamps from the future too
    request.all_temporaries = true;
    request.dry_run = dry_run;
    return report_cleanup("clear", store::clean_directory(directory, request));
}

int cleanup_cache(const store::CacheDirectory& directory, const Budgets& budgets,
                  std::optional<std::chrono::seconds> older_than, bool dry_run) {
    store::CleanupRequest request;
    request.max_bytes = budgets.max_bytes;
    request.max_files = budgets.max_files;
    request.evict_older_than = older_than;
    request.dry_run = dry_run;
    return report_cleanup("cleanup", store::clean_directory(directory, request));
}

int list_cache(const store::CacheDirectory& directory, bool json) {
    auto entries = store::list_entries(directory);
    if (!entries) {
        std::fprintf(stderr, "kcache: %s\n", entries.error().message().c_str());
        return 1;
    }
    if (json) {
        std::printf("[");
        bool first = true;
        for (const auto& e : *entries) {
            std::string names;
            for (const auto& name : e.key.kernel_names) {
                names += (names.empty() ? "" : ", ") + json_string(name);
            }
            std::printf("%s\n  {\"fingerprint\": \"%s\", \"size_bytes\": %" PRIu64
                        ", \"last_used\": %lld, \"created\": %lld, \"arch\": %s, \"kind\": %s, "
                        "\"source_kind\": %s, \"key\": %s, \"kernels\": [%s], \"problem\": %s}",
                        first ? "" : ",", e.fingerprint.c_str(), e.size, epoch_seconds(e.last_used),
                        e.created ? epoch_seconds(*e.created) : -1LL,
                        json_string(e.key.arch).c_str(), json_string(kind_name(e.kind)).c_str(),
                        json_string(e.key.source_kind).c_str(),
                        json_string(e.key.caller_key).c_str(), names.c_str(),
                        json_string(e.problem).c_str());
            first = false;
        }
        std::printf("%s]\n", entries->empty() ? "" : "\n");
        return 0;
    }
    std::printf("%-16s %10s %6s %9s %-7s %-6s %-24s %s\n", "FINGERPRINT", "SIZE", "AGE", "LAST USE",
                "ARCH", "KIND", "KEY", "KERNELS");
    for (const auto& e : *entries) {
        if (!e.problem.empty()) {
            std::printf("%-16.16s %10s %6s %9s  BAD: %s\n", e.fingerprint.c_str(),
                        util::format_size(e.size).c_str(),
                        e.created ? ago(*e.created).c_str() : "-", ago(e.last_used).c_str(),
                        e.problem.c_str());
            continue;
        }
        std::string names;
        for (const auto& name : e.key.kernel_names) names += (names.empty() ? "" : ", ") + name;
        std::printf("%-16.16s %10s %6s %9s %-7s %-6s %-24s %s\n", e.fingerprint.c_str(),
                    util::format_size(e.size).c_str(), e.created ? ago(*e.created).c_str() : "-",
                    ago(e.last_used).c_str(), e.key.arch.c_str(), e.key.source_kind.c_str(),
                    e.key.caller_key.c_str(), names.empty() ? "-" : names.c_str());
    }
    std::printf("%zu entries in %s\n", entries->size(), directory.path().c_str());
    return 0;
}

int inspect_entry(const store::CacheDirectory& directory, const std::string& fingerprint,
                  bool json) {
    auto entry = store::find_entry(directory, fingerprint);
    if (!entry) {
        std::fprintf(stderr, "kcache: %s\n", entry.error().message().c_str());
        return entry.error().code() == Errc::kInvalidArgument ? 2 : 1;
    }
    const store::KeyMaterial& k = entry->key;
    if (json) {
        std::string names;
        for (const auto& name : k.kernel_names)
            names += (names.empty() ? "" : ", ") + json_string(name);
        std::printf("{\"fingerprint\": \"%s\", \"path\": %s, \"size_bytes\": %" PRIu64
                    ", \"arch\": %s, \"source_kind\": %s, \"source_hash\": %s, \"options\": %s, "
                    "\"names\": %s, \"toolchain\": %s, \"key\": %s, \"kernels\": [%s], "
                    "\"problem\": %s}\n",
                    entry->fingerprint.c_str(), json_string(entry->path).c_str(), entry->size,
                    json_string(k.arch).c_str(), json_string(k.source_kind).c_str(),
                    json_string(k.source_hash).c_str(), json_string(k.options).c_str(),
                    json_string(k.names).c_str(), json_string(k.toolchain).c_str(),
                    json_string(k.caller_key).c_str(), names.c_str(),
                    json_string(entry->problem).c_str());
        return entry->problem.empty() ? 0 : 1;
    }
    std::printf("fingerprint: %s\npath:        %s\nsize:        %s\nlast use:    %s ago\n",
                entry->fingerprint.c_str(), entry->path.c_str(),
                util::format_size(entry->size).c_str(), ago(entry->last_used).c_str());
    if (!entry->problem.empty()) {
        std::printf("problem:     %s\n", entry->problem.c_str());
        return 1;
    }
    std::printf("%s", k.serialize().c_str());  // the key material, exactly as stored
    return 0;
}

int verify_cache(const store::CacheDirectory& directory, bool repair, bool json) {
    auto report = store::verify_entries(directory, repair);
    if (!report) {
        std::fprintf(stderr, "kcache: %s\n", report.error().message().c_str());
        return 1;
    }
    if (json) {
        std::string problems;
        for (const auto& p : report->problems)
            problems += (problems.empty() ? "" : ", ") + json_string(p);
        std::printf("{\"checked\": %" PRIu64 ", \"bad\": %" PRIu64 ", \"removed\": %" PRIu64
                    ", \"problems\": [%s]}\n",
                    report->checked, report->bad, report->removed, problems.c_str());
    } else {
        for (const auto& p : report->problems) std::printf("bad: %s\n", p.c_str());
        std::printf("%" PRIu64 " entries checked, %" PRIu64 " bad, %" PRIu64 " removed\n",
                    report->checked, report->bad, report->removed);
    }
    // Bad entries left in place are a finding; repaired ones are not.
    return report->bad == report->removed ? 0 : 1;
}

}  // namespace kcache::tool
