// SPDX-License-Identifier: Apache-2.0
#include "tools/kcache/stats_command.hpp"

#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "store/disk_catalog.hpp"
#include "store/persistent_stats.hpp"
#include "tools/kcache/output.hpp"
#include "util/size.hpp"

namespace kcache::tool {
namespace {

double percent(std::uint64_t part, std::uint64_t whole) {
    return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

int show_stats(const std::shared_ptr<const store::CacheDirectory>& dir, std::uint64_t max_bytes,
               std::uint64_t max_files, bool json) {
    const std::string& directory = dir->path();
    auto counters = store::PersistentStats::at(dir).read();
    if (!counters) {
        std::fprintf(stderr, "kcache: %s\n", counters.error().message().c_str());
        return 1;
    }
    auto size = store::measure_directory(*dir);
    const store::DirectorySize measured = size ? *size : store::DirectorySize{};
    const store::StatsCounters& c = *counters;
    const std::uint64_t lookups = store::group_total(c, store::StatsGroup::kLookups);
    const std::uint64_t tier_lookups = store::group_total(c, store::StatsGroup::kTierLookups);
    const double compile_seconds = static_cast<double>(c.compile_ns) / 1e9;
    // Every lookup a tier served would otherwise have cost an average compile; a prebuild that
    // found its artifact stored saved nothing, and is not among them.
    const double saved_seconds =
        c.compiles == 0 ? 0.0
                        : compile_seconds / static_cast<double>(c.compiles) *
                              static_cast<double>(c.memory_hits + c.disk_hits + c.remote_hits);
    if (json) {
        Json document = json_document();
        put_bytes(document, "directory", directory);
        document["lookups"] = lookups;
        // Every counter of the list: "disk_x" as "disk": {"x"} (and "remote_x" under "remote"),
        // a time in seconds.
        for (const store::StatsField& field : store::stats_fields()) {
            const std::uint64_t value = c.*(field.member);
            std::string name(field.name);
            Json* parent = &document;
            for (const std::string_view group : {"disk", "remote"}) {
                if (name.starts_with(std::string(group) + "_")) {
                    parent = &document[std::string(group)];
                    name.erase(0, group.size() + 1);
                }
            }
            if (field.unit == store::StatsUnit::kNanoseconds && name.ends_with("_ns")) {
                name.replace(name.size() - 3, 3, "_seconds");
                (*parent)[name] = static_cast<double>(value) / 1e9;
            } else {
                (*parent)[name] = value;
            }
        }
        document["saved_seconds"] = saved_seconds;
        document["size_bytes"] = measured.bytes;
        document["max_size_bytes"] = max_bytes;
        document["entries"] = measured.entries;
        document["max_files"] = max_files;
        document["temporaries"] = measured.temporaries;
        document["temporary_bytes"] = measured.temporary_bytes;
        document["strays"] = measured.strays;
        document["read_only"] = dir->read_only();
        document["zeroed_at"] = c.zeroed_at;
        print_json(document);
        return 0;
    }
    // Label, figure (right-aligned), and a share or a note; text that is no figure goes in the
    // note column, so that every figure lines up.
    Table table({{""}, {"", true}, {""}}, /*show_header=*/false);
    const auto share = [](std::uint64_t part, std::uint64_t whole) {
        char text[16];
        std::snprintf(text, sizeof text, "%5.1f%%", percent(part, whole));
        return std::string(text);
    };
    const auto seconds = [](double value) {
        char text[32];
        std::snprintf(text, sizeof text, "%.3f s", value);
        return std::string(text);
    };
    const auto count = [](std::uint64_t n) { return std::to_string(n); };
    table.add_row({"Cache directory:", "",
                   directory + (dir->read_only() ? " (read-only: this command and the programs "
                                                   "using it in read-only mode write nothing to it)"
                                                 : "")});
    if (c.zeroed_at != 0) {
        const std::time_t when = static_cast<std::time_t>(c.zeroed_at);
        char text[64];
        struct tm local {};
        if (localtime_r(&when, &local) == nullptr ||
            std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local) == 0) {
            std::snprintf(text, sizeof text, "%llu s after 1970",
                          static_cast<unsigned long long>(c.zeroed_at));
        }
        table.add_row({"Statistics zeroed:", "", text});
    }
    // The remote tier's rows only where one was used: most caches have none.
    bool remote_used = false;
    for (const store::StatsField& field : store::stats_fields()) {
        if (field.name.starts_with("remote_") && c.*(field.member) != 0) remote_used = true;
    }
    // One row per counter of the list, in its order; a group's total heads its first member.
    store::StatsGroup headed = store::StatsGroup::kNone;
    for (const store::StatsField& field : store::stats_fields()) {
        const std::uint64_t value = c.*(field.member);
        if (field.name.starts_with("remote_") && !remote_used) continue;
        if (field.group != store::StatsGroup::kNone && field.group != headed) {
            headed = field.group;
            if (field.group == store::StatsGroup::kLookups) {
                table.add_row({"Lookups by key:", count(lookups)});
            } else {
                table.add_row({"Misses asked of the tiers:", count(tier_lookups)});
            }
        }
        if (field.label.empty()) continue;  // a note of another row
        std::string figure = field.unit == store::StatsUnit::kNanoseconds
                                 ? seconds(static_cast<double>(value) / 1e9)
                             : field.unit == store::StatsUnit::kBytes ? util::format_size(value)
                                                                      : count(value);
        std::string note;
        if (field.group != store::StatsGroup::kNone) {
            note = share(value, store::group_total(c, field.group));
        }
        // The notes that join counters in one row, and the estimate that follows the time spent.
        if (field.name == "compiles") {
            note = "(" + count(c.prebuild_compiles) + " for prebuilds)";
        } else if (field.name == "prebuilds") {
            note = "(" + count(c.prebuild_compiles) + " compiled)";
        } else if (field.name == "disk_evicted") {
            note = "(" + util::format_size(c.disk_evicted_bytes) + ")";
        } else if (field.name == "config_errors") {
            if (value == 0) continue;  // shown only when some setting could not be used
            note = "(bad values; see `kcache -p`)";
        }
        table.add_row({std::string(field.label), std::move(figure), std::move(note)});
        if (field.name == "compile_ns") {
            table.add_row({"Compile time saved (estimate):", seconds(saved_seconds)});
        }
    }
    // Another program may have filled the directory past a budget since its last cleanup: the
    // figure is shown as it is, and said to be over, rather than as a share above 100%.
    auto over = [](std::uint64_t value, std::uint64_t budget) {
        return budget != 0 && value > budget ? " (over budget)" : "";
    };
    table.add_row({"Cache size:", util::format_size(measured.bytes),
                   "of " + (max_bytes == 0 ? "no limit" : util::format_size(max_bytes)) +
                       over(measured.bytes, max_bytes)});
    table.add_row({"Entries:", count(measured.entries),
                   "of " + (max_files == 0 ? "no limit" : count(max_files)) +
                       over(measured.entries, max_files)});
    if (measured.temporaries != 0) {
        table.add_row({"Temporary files:", count(measured.temporaries),
                       "(" + util::format_size(measured.temporary_bytes) +
                           "; writers at work, or left by writers that died: `kcache -C` "
                           "removes them)"});
    }
    if (measured.strays != 0) {
        table.add_row({"Strays:", count(measured.strays),
                       "(not what kcache keeps under their names: `kcache -c` removes them)"});
    }
    std::fputs(table.render(0).c_str(), stdout);
    return 0;
}

int zero_stats(const std::shared_ptr<const store::CacheDirectory>& directory) {
    if (auto zeroed = store::PersistentStats::at(directory).zero(); !zeroed) {
        std::fprintf(stderr, "kcache: %s\n", zeroed.error().message().c_str());
        return 1;
    }
    std::printf("Statistics zeroed\n");
    return 0;
}

}  // namespace kcache::tool
