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
    std::printf("Cache directory:                %s%s\n", escape_text(directory).c_str(),
                dir->read_only() ? " (read-only: this command and the programs using it in "
                                   "read-only mode write nothing to it)"
                                 : "");
    if (c.zeroed_at != 0) {
        const std::time_t when = static_cast<std::time_t>(c.zeroed_at);
        char text[64];
        struct tm local {};
        if (localtime_r(&when, &local) == nullptr ||
            std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local) == 0) {
            std::snprintf(text, sizeof text, "%llu s after 1970",
                          static_cast<unsigned long long>(c.zeroed_at));
        }
        std::printf("Statistics zeroed:              %s\n", text);
    }
    std::printf("Lookups by key:                 %10" PRIu64 "\n", lookups);
    std::printf("  Hits (loaded in the process): %10" PRIu64 "  %5.1f%%\n", c.hits,
                percent(c.hits, lookups));
    std::printf("  Misses:                       %10" PRIu64 "  %5.1f%%\n", c.misses,
                percent(c.misses, lookups));
    std::printf("    waited for another thread:  %10" PRIu64 "\n", c.waits);
    std::printf("Misses asked of the tiers:      %10" PRIu64 "\n", tier_lookups);
    std::printf("  from the memory tier:         %10" PRIu64 "  %5.1f%%\n", c.memory_hits,
                percent(c.memory_hits, tier_lookups));
    std::printf("  from the disk tier:           %10" PRIu64 "  %5.1f%%\n", c.disk_hits,
                percent(c.disk_hits, tier_lookups));
    std::printf("  in neither tier:              %10" PRIu64 "  %5.1f%%\n", c.disk_misses,
                percent(c.disk_misses, tier_lookups));
    std::printf("    entries of other key material replaced: %" PRIu64 "\n", c.disk_rejected);
    std::printf("Compiles:                       %10" PRIu64 "  (%" PRIu64 " for prebuilds)\n",
                c.compiles, c.prebuild_compiles);
    std::printf("  failed:                       %10" PRIu64 "\n", c.compile_failures);
    std::printf("Prebuilds (kcache compile):     %10" PRIu64 "  (%" PRIu64 " compiled)\n",
                c.prebuilds, c.prebuild_compiles);
    std::printf("Compile time spent:             %10.3f s\n", compile_seconds);
    std::printf("Compile time saved (estimate):  %10.3f s\n", saved_seconds);
    std::printf("Disk: writes %" PRIu64 ", errors %" PRIu64 ", corrupt entries removed %" PRIu64
                ", evicted %" PRIu64 " (%s)\n",
                c.disk_writes, c.disk_errors, c.disk_corrupt, c.disk_evicted,
                util::format_size(c.disk_evicted_bytes).c_str());
    // Another program may have filled the directory past a budget since its last cleanup: the
    // figure is shown as it is, and said to be over, rather than as a share above 100%.
    auto over = [](std::uint64_t value, std::uint64_t budget) {
        return budget != 0 && value > budget ? " (over budget)" : "";
    };
    std::printf("Cache size:                     %10s of %s%s\n",
                util::format_size(measured.bytes).c_str(),
                max_bytes == 0 ? "no limit" : util::format_size(max_bytes).c_str(),
                over(measured.bytes, max_bytes));
    std::printf("Entries:                        %10" PRIu64 " of %s%s\n", measured.entries,
                max_files == 0 ? "no limit" : std::to_string(max_files).c_str(),
                over(measured.entries, max_files));
    if (measured.temporaries != 0) {
        std::printf("Temporary files:                %10" PRIu64
                    " (%s; writers at work, or left by writers that died: `kcache -C` removes "
                    "them)\n",
                    measured.temporaries, util::format_size(measured.temporary_bytes).c_str());
    }
    if (measured.strays != 0) {
        std::printf("Strays:                         %10" PRIu64
                    " (not what kcache keeps under their names: `kcache -c` removes them)\n",
                    measured.strays);
    }
    if (c.config_errors != 0) {
        std::printf("Settings not used:              %10" PRIu64 " (bad values; see `kcache -p`)\n",
                    c.config_errors);
    }
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
