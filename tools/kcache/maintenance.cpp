// SPDX-License-Identifier: Apache-2.0
#include "tools/kcache/maintenance.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>

#include "store/disk_catalog.hpp"
#include "store/disk_cleaner.hpp"
#include "tools/kcache/output.hpp"
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
        std::fprintf(stderr, "kcache: %s failed: %s\n", what,
                     escape_text(report.error().message()).c_str());
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

int list_cache(const store::CacheDirectory& directory, bool json, std::size_t width) {
    auto entries = store::list_entries(directory);
    if (!entries) {
        std::fprintf(stderr, "kcache: %s\n", escape_text(entries.error().message()).c_str());
        return 1;
    }
    if (json) {
        Json document = json_document();
        put_bytes(document, "directory", directory.path());
        Json list = Json::array();
        for (const auto& e : *entries) {
            Json item = Json::object();
            item["fingerprint"] = e.fingerprint;
            put_bytes(item, "path", e.path);
            item["size_bytes"] = e.size;
            item["last_used"] = epoch_seconds(e.last_used);
            item["created"] = e.created ? Json(epoch_seconds(*e.created)) : Json(nullptr);
            put_bytes(item, "arch", e.key.arch);
            item["kind"] = kind_name(e.kind);
            put_bytes(item, "source_kind", e.key.source_kind);
            put_bytes(item, "key", e.key.caller_key);
            put_byte_list(item, "kernels", e.kernels);
            if (e.problem.empty()) {
                item["problem"] = nullptr;
            } else {
                put_bytes(item, "problem", e.problem);
            }
            list.push_back(std::move(item));
        }
        document["entries"] = std::move(list);
        print_json(document);
        return 0;
    }
    Table table({{"FINGERPRINT"},
                 {"SIZE", true},
                 {"AGE", true},
                 {"LAST USE", true},
                 {"ARCH"},
                 {"KIND"},
                 {"KEY", false, true},
                 {"KERNELS", false, true}});
    for (const auto& e : *entries) {
        // 16 digits name an entry for `kcache inspect` as well as 32 do.
        const std::string fingerprint = e.fingerprint.substr(0, 16);
        const std::string age = e.created ? ago(*e.created) : "-";
        if (!e.problem.empty()) {
            table.add_row({fingerprint, util::format_size(e.size), age, ago(e.last_used), "-", "-",
                           "BAD: " + e.problem, "-"});
            continue;
        }
        std::string names;
        for (const auto& name : e.kernels) names += (names.empty() ? "" : ", ") + name;
        table.add_row({fingerprint, util::format_size(e.size), age, ago(e.last_used), e.key.arch,
                       e.key.source_kind, e.key.caller_key, names.empty() ? "-" : names});
    }
    std::fputs(table.render(width).c_str(), stdout);
    const std::string count = std::to_string(entries->size()) + " entries in ";
    const std::string path = escape_text(directory.path());
    std::printf(
        "%s%s\n", count.c_str(),
        (width == 0 ? path : elide(path, width > count.size() ? width - count.size() : 0)).c_str());
    return 0;
}

int inspect_entry(const store::CacheDirectory& directory, const std::string& fingerprint,
                  bool json) {
    auto entry = store::find_entry(directory, fingerprint);
    if (!entry) {
        std::fprintf(stderr, "kcache: %s\n", escape_text(entry.error().message()).c_str());
        return entry.error().code() == Errc::kInvalidArgument ? 2 : 1;
    }
    const store::KeyMaterial& k = entry->key;
    if (json) {
        Json document = json_document();
        document["fingerprint"] = entry->fingerprint;
        put_bytes(document, "path", entry->path);
        document["size_bytes"] = entry->size;
        document["last_used"] = epoch_seconds(entry->last_used);
        put_bytes(document, "arch", k.arch);
        document["kind"] = kind_name(entry->kind);
        put_bytes(document, "source_kind", k.source_kind);
        put_bytes(document, "source_hash", k.source_hash);
        put_bytes(document, "options", k.options);
        put_bytes(document, "names", k.names);
        put_bytes(document, "toolchain", k.toolchain);
        put_bytes(document, "key", k.caller_key);
        put_byte_list(document, "kernels", entry->kernels);
        if (entry->problem.empty()) {
            document["problem"] = nullptr;
        } else {
            put_bytes(document, "problem", entry->problem);
        }
        print_json(document);
        return entry->problem.empty() ? 0 : 1;
    }
    Table fields({{""}, {""}}, /*show_header=*/false);
    fields.add_row({"fingerprint:", entry->fingerprint});
    fields.add_row({"path:", entry->path});
    fields.add_row({"size:", util::format_size(entry->size)});
    fields.add_row({"last use:", ago(entry->last_used) + " ago"});
    if (!entry->problem.empty()) {
        fields.add_row({"problem:", entry->problem});
        std::fputs(fields.render(0).c_str(), stdout);
        return 1;
    }
    if (k.kernel_names.empty() && !entry->kernels.empty()) {
        std::string names;
        for (const auto& name : entry->kernels) names += (names.empty() ? "" : ", ") + name;
        fields.add_row({"kernels:", names + " (from the cubin)"});
    }
    std::fputs(fields.render(0).c_str(), stdout);
    // The key material as stored, a line at a time, each escaped as the table's cells are.
    const std::string text = k.serialize();
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        std::printf("%s\n", escape_text(std::string_view(text).substr(at, end - at)).c_str());
        at = end + 1;
    }
    return 0;
}

int verify_cache(const store::CacheDirectory& directory, bool repair, bool json) {
    // A bar on a terminal naming the entry being read; nothing elsewhere (the report says all).
    std::unique_ptr<Progress> progress;
    std::string previous;
    auto report = store::verify_entries(
        directory, repair, [&](const std::string& path, std::size_t index, std::size_t total) {
            if (!progress) progress = std::make_unique<Progress>(total, stderr, false);
            if (index > 0) progress->done(previous, "checked");
            progress->started(path, "checking");
            previous = path;
        });
    if (progress) progress->done(previous, "checked");
    if (!report) {
        std::fprintf(stderr, "kcache: %s\n", escape_text(report.error().message()).c_str());
        return 1;
    }
    if (json) {
        Json document = json_document();
        document["checked"] = report->checked;
        document["bad"] = report->bad;
        document["removed"] = report->removed;
        put_byte_list(document, "problems", report->problems);
        print_json(document);
    } else {
        for (const auto& p : report->problems) std::printf("bad: %s\n", escape_text(p).c_str());
        std::printf("%" PRIu64 " entries checked, %" PRIu64 " bad, %" PRIu64 " removed\n",
                    report->checked, report->bad, report->removed);
    }
    // Bad entries left in place are a finding; repaired ones are not.
    return report->bad == report->removed ? 0 : 1;
}

}  // namespace kcache::tool
