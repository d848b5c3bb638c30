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
    const std::uint64_t lookups = c.hits + c.misses;
    // Each lookup's miss that reached the tiers ended as exactly one of these three, so each
    // share of their sum is at most 100% (prebuilds are counted apart).
    const std::uint64_t tier_lookups = c.memory_hits + c.disk_hits + c.disk_misses;
    const double compile_seconds = static_cast<double>(c.compile_ns) / 1e9;
    // Every lookup a tier served would otherwise have cost an average compile; a prebuild that
    // found its artifact stored saved nothing, and is not among them.
    const double saved_seconds = c.compiles == 0
                                     ? 0.0
                                     : compile_seconds / static_cast<double>(c.compiles) *
                                           static_cast<double>(c.memory_hits + c.disk_hits);
    if (json) {
        Json document = json_document();
        put_bytes(document, "directory", directory);
        document["lookups"] = lookups;
        document["hits"] = c.hits;
        document["misses"] = c.misses;
        document["waits"] = c.waits;
        document["memory_hits"] = c.memory_hits;
        document["compiles"] = c.compiles;
        document["compile_failures"] = c.compile_failures;
        document["compile_seconds"] = compile_seconds;
        document["saved_seconds"] = saved_seconds;
        document["evictions"] = c.evictions;
        document["verify_failures"] = c.verify_failures;
        document["prebuilds"] = c.prebuilds;
        document["prebuild_compiles"] = c.prebuild_compiles;
        document["disk"] = {{"hits", c.disk_hits},         {"misses", c.disk_misses},
                            {"rejected", c.disk_rejected}, {"writes", c.disk_writes},
                            {"errors", c.disk_errors},     {"corrupt", c.disk_corrupt},
                            {"evicted", c.disk_evicted},   {"evicted_bytes", c.disk_evicted_bytes}};
        document["size_bytes"] = measured.bytes;
        document["max_size_bytes"] = max_bytes;
        document["entries"] = measured.entries;
        document["max_files"] = max_files;
        document["temporaries"] = measured.temporaries;
        document["temporary_bytes"] = measured.temporary_bytes;
        document["strays"] = measured.strays;
        document["config_errors"] = c.config_errors;
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
    table.add_row({"Lookups by key:", count(lookups)});
    table.add_row({"  Hits (loaded in the process):", count(c.hits), share(c.hits, lookups)});
    table.add_row({"  Misses:", count(c.misses), share(c.misses, lookups)});
    table.add_row({"    waited for another thread:", count(c.waits)});
    table.add_row({"Misses asked of the tiers:", count(tier_lookups)});
    table.add_row(
        {"  from the memory tier:", count(c.memory_hits), share(c.memory_hits, tier_lookups)});
    table.add_row({"  from the disk tier:", count(c.disk_hits), share(c.disk_hits, tier_lookups)});
    table.add_row({"  in neither tier:", count(c.disk_misses), share(c.disk_misses, tier_lookups)});
    table.add_row({"    entries of other key material replaced:", count(c.disk_rejected)});
    table.add_row(
        {"Compiles:", count(c.compiles), "(" + count(c.prebuild_compiles) + " for prebuilds)"});
    table.add_row({"  failed:", count(c.compile_failures)});
    table.add_row({"Prebuilds (kcache compile):", count(c.prebuilds),
                   "(" + count(c.prebuild_compiles) + " compiled)"});
    table.add_row({"Compile time spent:", seconds(compile_seconds)});
    table.add_row({"Compile time saved (estimate):", seconds(saved_seconds)});
    table.add_row({"Disk writes:", count(c.disk_writes)});
    table.add_row({"  errors:", count(c.disk_errors)});
    table.add_row({"  corrupt entries removed:", count(c.disk_corrupt)});
    table.add_row(
        {"  evicted:", count(c.disk_evicted), "(" + util::format_size(c.disk_evicted_bytes) + ")"});
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
    if (c.config_errors != 0) {
        table.add_row(
            {"Settings not used:", count(c.config_errors), "(bad values; see `kcache -p`)"});
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
