// SPDX-License-Identifier: Apache-2.0
// Issue 19's memory and scale curve. Kernels: 10 to 10,000 distinct small PTX kernels cold (a
// fresh disk tier, warm_up on every core, with its bundles, and again with bundles off: a compile
// and a module a key) and warm (warm_up with bundles off
// and on, one by one, and on a device the floor: the stored cubins through the driver alone),
// each side a new process, with the host and device memory each loaded kernel costs and the disk
// tier's bytes. Directory: a cache directory of 1,000 to 100,000 entries, and the time the CLI
// takes to report on it (-s), list it (ls, ls --json), check it (verify) and clean it down to half
// (-c), each a new process. Per-kernel and per-entry costs are set against the smaller sizes' so
// that growth worse than linear shows. Without a GPU the kernels load into the fake driver
// (compiled for real by nvJitLink where it is installed).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "bench/bench.hpp"
#include "bench/child_process.hpp"
#include "compile/compiler.hpp"
#include "driver/compiler_api.hpp"
#include "driver/cuda_api.hpp"
#include "driver/device_memory.hpp"
#include "examples/ptx_kernels.hpp"
#include "kcache/kernel_cache.hpp"
#include "store/artifact_format.hpp"
#include "store/cache_directory.hpp"
#include "store/disk_store.hpp"
#include "testing/fake_driver.hpp"
#include "util/fingerprint.hpp"

namespace kcache::bench {
namespace {

// The curve's sizes; each run takes those up to its caps (and the cap itself when it is below
// the smallest, for a smoke run).
const std::vector<int> kKernelCounts = {10, 100, 1000, 10000};
const std::vector<int> kEntryCounts = {1000, 10000, 100000};
// softmax_rows with the row length baked in: one distinct module per length.
constexpr int kFirstRow = 1000;

std::vector<int> sizes_up_to(const std::vector<int>& sizes, int cap) {
    std::vector<int> out;
    for (int n : sizes) {
        if (n <= cap) out.push_back(n);
    }
    if (out.empty() && cap > 0) out.push_back(cap);
    return out;
}

std::string kernel_key(int i) {
    return "scale-softmax:" + std::to_string(kFirstRow + i);
}

// Resident set size of this process in KiB (/proc/self/statm's second field, in pages).
long resident_kib() {
    std::ifstream statm("/proc/self/statm");
    long size = 0, resident = 0;
    if (!(statm >> size >> resident)) return -1;
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// This process's user and system time so far, all threads, in ms.
double cpu_ms() {
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    const auto ms = [](const timeval& time) {
        return static_cast<double>(time.tv_sec) * 1e3 + static_cast<double>(time.tv_usec) / 1e3;
    };
    return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// Device memory in use on the current context's device, in bytes; -1 without a driver.
long long device_used_bytes() {
    const auto& api = driver::cuda_api();
    if (!api) return -1;
    std::size_t free = 0, total = 0;
    if ((*api)->cuMemGetInfo(&free, &total) != CUDA_SUCCESS) return -1;
    return static_cast<long long>(total - free);
}

// What a --scale-child printed.
struct KernelRun {
    double total_ms = 0;
    double cpu_ms = 0;      // the process's user and system time meanwhile, all threads
    double rss_kib = 0;     // growth while the kernels loaded
    double device_kib = 0;  // the same on the device; -1 without one
    int loaded = 0;
    int compiles = 0;
    int disk_hits = 0;
    double end_ms = 0;  // the cache's destruction, its kernels' handles dropped first
};

// `count` kernels from the `first` (of a row length each) in a --scale-child.
std::optional<KernelRun> kernel_child(const std::string& mode, const std::string& directory,
                                      int count, int first = 0) {
    auto out =
        run_self({"--scale-child", mode, directory, std::to_string(count), std::to_string(first)});
    KernelRun run;
    if (!out || std::sscanf(out->c_str(), "%lf %lf %lf %lf %d %d %d %lf", &run.total_ms,
                            &run.cpu_ms, &run.rss_kib, &run.device_kib, &run.loaded, &run.compiles,
                            &run.disk_hits, &run.end_ms) != 8) {
        return std::nullopt;
    }
    // As it goes, so that a run cut short by a time limit still shows what it measured.
    std::fprintf(stderr, "scale: %d kernels, %s: %.1f ms (%.4f ms a kernel), %d loaded\n", count,
                 mode.c_str(), run.total_ms, run.total_ms / std::max(count, 1), run.loaded);
    return run;
}

struct DiskUsage {
    std::uint64_t bytes = 0;  // allocated blocks, as du counts them
    std::uint64_t files = 0;  // regular files of every kind
    std::uint64_t entries = 0;
};

DiskUsage disk_usage(const std::string& directory) {
    DiskUsage usage;
    std::error_code error;
    for (auto it = std::filesystem::recursive_directory_iterator(directory, error);
         !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
        struct stat info {};
        if (lstat(it->path().c_str(), &info) != 0) continue;
        usage.bytes += static_cast<std::uint64_t>(info.st_blocks) * 512;
        if (!S_ISREG(info.st_mode)) continue;
        ++usage.files;
        if (it->path().extension() == ".kc") ++usage.entries;
    }
    return usage;
}

// `value` against `base` as "1.23x", or "-" where there is no base.
std::string ratio(double value, double base) {
    if (base <= 0 || value < 0) return "-";
    char text[32];
    std::snprintf(text, sizeof text, "%.2fx", value / base);
    return text;
}

std::string kernel_curve(const std::string& work, int max_kernels, int rounds, std::string& note) {
    const std::vector<int> counts = sizes_up_to(kKernelCounts, max_kernels);
    const bool stored = driver::nvjitlink_api().ok();
    const bool on_device = driver::device_count().ok();
    struct Row {
        int count = 0;
        KernelRun cold;
        KernelRun cold_keys;  // the same with bundles off: one compile and one module a key
        std::vector<double> warm_up_ms, one_ms, warm_up_cpu_ms, one_cpu_ms, end_ms;
        std::vector<double> bundled_ms, bundled_cpu_ms, floor_ms, floor_cpu_ms;
        KernelRun warm;  // the last one-by-one child: its memory
        DiskUsage disk;
    };
    std::vector<Row> rows;
    for (int count : counts) {
        Row row;
        row.count = count;
        const std::string directory = work + "/kernels-" + std::to_string(count);
        std::filesystem::remove_all(directory);
        auto cold = kernel_child("cold", directory, count);
        if (!cold) {
            note = "the cold child of " + std::to_string(count) + " kernels failed";
            return {};
        }
        row.cold = *cold;
        row.disk = disk_usage(directory);
        // Each size's folders stay until run_scale's end: ext4 allocates inodes slowly right after
        // many were freed (it skips those deleted moments ago), which would charge the next cold
        // child for this size's clean-up.
        auto keys = kernel_child("cold-keys", directory + "-keys", count);
        if (!keys) {
            note = "the key-by-key cold child of " + std::to_string(count) + " kernels failed";
            return {};
        }
        row.cold_keys = *keys;
        for (int round = 0; round < rounds; ++round) {
            auto all = kernel_child("warm-up", directory, count);
            auto one = kernel_child("one", directory, count);
            auto bundled = kernel_child("warm-up-bundles", directory, count);
            std::optional<KernelRun> floor;
            if (on_device) floor = kernel_child("floor", directory, count);
            if (!all || !one || !bundled || (on_device && !floor)) {
                note = "a warm child of " + std::to_string(count) + " kernels failed";
                return {};
            }
            if (floor) {
                row.floor_ms.push_back(floor->total_ms);
                row.floor_cpu_ms.push_back(floor->cpu_ms);
            }
            row.bundled_ms.push_back(bundled->total_ms);
            row.bundled_cpu_ms.push_back(bundled->cpu_ms);
            for (const KernelRun* run : {&*all, &*one, &*bundled}) {
                const bool from_disk = run->compiles == 0 && run->disk_hits == count;
                if (run->loaded != count || (stored && !from_disk)) {
                    note = "a warm child of " + std::to_string(count) + " kernels loaded " +
                           std::to_string(run->loaded) + ", " + std::to_string(run->disk_hits) +
                           " from disk, compiled " + std::to_string(run->compiles);
                }
            }
            row.warm_up_ms.push_back(all->total_ms);
            row.one_ms.push_back(one->total_ms);
            row.warm_up_cpu_ms.push_back(all->cpu_ms);
            row.one_cpu_ms.push_back(one->cpu_ms);
            row.end_ms.push_back(one->end_ms);
            row.warm = *one;
        }
        for (const KernelRun* run : {&row.cold, &row.cold_keys}) {
            if (run->loaded != count || (stored && run->compiles != count)) {
                note = "a cold child of " + std::to_string(count) + " kernels loaded " +
                       std::to_string(run->loaded) + " and compiled " +
                       std::to_string(run->compiles);
            }
        }
        rows.push_back(std::move(row));
    }

    // The base of the ratios: N = 100 where measured (N = 10 is mostly fixed costs), else the
    // smallest.
    std::size_t base = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].count == 100) base = i;
    }
    const auto per = [](double ms, int count) { return ms / count; };
    const Row& b = rows[base];
    const double b_cold = per(b.cold.total_ms, b.count);
    const double b_keys = per(b.cold_keys.total_ms, b.count);
    const double b_after = per(b.cold.end_ms, b.count);
    const double b_all = per(median(b.warm_up_ms), b.count);
    const double b_one = per(median(b.one_ms), b.count);
    const double b_bundled = per(median(b.bundled_ms), b.count);
    // The floor's cells where it ran (on a device), "-" elsewhere.
    const auto floor_cells = [&](const std::vector<double>& ms, const std::vector<double>& of_base,
                                 int count, int base_count) {
        if (ms.empty() || of_base.empty()) return std::string("- | -");
        const double here = per(median(ms), count), there = per(median(of_base), base_count);
        char cell[32];
        std::snprintf(cell, sizeof cell, "%.4f", here);
        return std::string(cell) + " | " + ratio(here, there);
    };
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::string text;
    append(text,
           "Distinct small PTX kernels (softmax_rows, a row length each), %s; %s. Each cell a new "
           "process; cold once, warm the median of %d. Ratios: per-kernel cost against N = %d's "
           "(1.00x: linear).\n\n",
           driver::device_count().ok() ? "loaded on the GPU" : "loaded into the fake driver",
           stored ? "compiled by nvJitLink and stored"
                  : "no nvJitLink: left to the driver's JIT, nothing stored",
           rounds, b.count);
    append(
        text,
        "| N | cold warm_up (%u thr; bundles on, linked first when many) ms/kernel | vs | its "
        "keys' own entries after it, to the cache's end: ms/kernel | vs | cold warm_up, bundles "
        "off (a compile and a module a key) ms/kernel | vs | warm warm_up ms/kernel | vs | warm "
        "one by one ms/kernel | vs | warm warm_up, bundles on ms/kernel | vs | floor: the stored "
        "cubins, cuModuleLoadData + cuModuleGetFunction each, ms/kernel | vs | host RSS "
        "KiB/kernel, cold | warm | device KiB/kernel | disk bytes/entry | files |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
        "|"
        "---:|---:|\n",
        threads);
    for (const Row& row : rows) {
        const double cold = per(row.cold.total_ms, row.count);
        const double after = per(row.cold.end_ms, row.count);
        const double keys = per(row.cold_keys.total_ms, row.count);
        const double all = per(median(row.warm_up_ms), row.count);
        const double one = per(median(row.one_ms), row.count);
        char device[32] = "-";
        if (row.warm.device_kib >= 0) {
            std::snprintf(device, sizeof device, "%.1f", row.warm.device_kib / row.count);
        }
        const double bundled = per(median(row.bundled_ms), row.count);
        append(
            text,
            "| %d | %.3f | %s | %.3f | %s | %.3f | %s | %.4f | %s | %.4f | %s | %.4f | %s | %s | "
            "%.1f | %.1f | %s | %.0f | %llu |\n",
            row.count, cold, ratio(cold, b_cold).c_str(), after, ratio(after, b_after).c_str(),
            keys, ratio(keys, b_keys).c_str(), all, ratio(all, b_all).c_str(), one,
            ratio(one, b_one).c_str(), bundled, ratio(bundled, b_bundled).c_str(),
            floor_cells(row.floor_ms, b.floor_ms, row.count, b.count).c_str(),
            row.cold.rss_kib / row.count, row.warm.rss_kib / row.count, device,
            row.disk.entries == 0
                ? 0.0
                : static_cast<double>(row.disk.bytes) / static_cast<double>(row.disk.entries),
            static_cast<unsigned long long>(row.disk.files));
    }
    // CPU time, which others' load on the machine moves less than wall time.
    const double c_cold = per(b.cold.cpu_ms, b.count);
    const double c_keys = per(b.cold_keys.cpu_ms, b.count);
    const double c_all = per(median(b.warm_up_cpu_ms), b.count);
    const double c_one = per(median(b.one_cpu_ms), b.count);
    const double c_end = per(median(b.end_ms), b.count);
    append(text,
           "\n| N | CPU ms/kernel (user + system, all threads): cold warm_up | vs | cold warm_up, "
           "bundles off | vs | warm warm_up | vs | warm one by one | vs | warm warm_up, bundles on "
           "| vs | floor | vs | the cache's end (warm one by one), wall ms/kernel | vs |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const double c_bundled = per(median(b.bundled_cpu_ms), b.count);
    for (const Row& row : rows) {
        const double cold = per(row.cold.cpu_ms, row.count);
        const double keys = per(row.cold_keys.cpu_ms, row.count);
        const double all = per(median(row.warm_up_cpu_ms), row.count);
        const double one = per(median(row.one_cpu_ms), row.count);
        const double end = per(median(row.end_ms), row.count);
        const double bundled = per(median(row.bundled_cpu_ms), row.count);
        append(text,
               "| %d | %.3f | %s | %.3f | %s | %.4f | %s | %.4f | %s | %.4f | %s | %s | %.4f | %s "
               "|\n",
               row.count, cold, ratio(cold, c_cold).c_str(), keys, ratio(keys, c_keys).c_str(), all,
               ratio(all, c_all).c_str(), one, ratio(one, c_one).c_str(), bundled,
               ratio(bundled, c_bundled).c_str(),
               floor_cells(row.floor_cpu_ms, b.floor_cpu_ms, row.count, b.count).c_str(), end,
               ratio(end, c_end).c_str());
    }
    return text + "\n";
}

// ---- the directory ----

// Writes entries [from, to) that are not there yet, through the library's own encoder and
// atomic write (unsynced: the bench's directory need not survive a crash), on every core. Each
// is a distinct artifact around the same payload: a real cubin where nvJitLink can make one.
Result<void> fill(const store::CacheDirectory& directory, const std::string& payload, int from,
                  int to) {
    std::atomic<int> next{from};
    std::atomic<bool> failed{false};
    std::string why;  // written by the first failure, read after the join
    std::atomic_flag first = ATOMIC_FLAG_INIT;
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t) {
        pool.emplace_back([&] {
            for (int i = next.fetch_add(1); i < to && !failed; i = next.fetch_add(1)) {
                store::Artifact artifact;
                artifact.kind = store::PayloadKind::kCubin;
                artifact.key.arch = "sm_90";
                artifact.key.source_kind = "ptx";
                artifact.key.source_hash = util::bytes_hash(std::to_string(i)).hex();
                artifact.key.toolchain = "kcache_bench --scale";
                artifact.key.caller_key = kernel_key(i);
                artifact.key.kernel_names = {"softmax_rows"};
                artifact.payload = payload;
                const util::Fingerprint fingerprint =
                    util::FingerprintBuilder().add("scale").add(std::uint64_t(i)).finish();
                const std::string relative = store::DiskStore::relative_path_of(fingerprint);
                if (auto there = directory.status(relative); there && *there) continue;
                auto written = directory.write_atomic(relative, store::encode(artifact),
                                                      util::Durability::kUnsynced);
                if (!written && !first.test_and_set()) {
                    why = written.error().message();
                    failed = true;
                }
            }
        });
    }
    for (auto& thread : pool) thread.join();
    if (failed) return Error(Errc::kIoError, why);
    return ok();
}

// A real cubin (softmax_rows for sm_90) where nvJitLink can make one, else bytes of a small
// cubin's size.
std::string entry_payload() {
    if (auto cubin =
            compile::link_ptx(examples::softmax_rows_ptx(kFirstRow), compile::Target{90, false})) {
        return std::move(cubin->cubin);
    }
    return std::string(8192, '\x5a');
}

struct Command {
    const char* label;
    std::vector<std::string> args;  // after `-d DIR`
    bool destructive = false;       // run once, last
};

std::string directory_curve(const std::string& work, int max_entries, int rounds,
                            const std::string& kcache, std::string& note) {
    const std::vector<int> counts = sizes_up_to(kEntryCounts, max_entries);
    const std::string path = work + "/entries";
    std::filesystem::remove_all(path);
    auto opened = store::CacheDirectory::open(path, store::DirectoryPolicy{});
    if (!opened) {
        note = opened.error().message();
        return {};
    }
    const std::string payload = entry_payload();
    const std::vector<Command> commands = {
        {"kcache -s", {"-s"}},
        {"kcache ls > /dev/null", {"ls"}},
        {"kcache ls --json > /dev/null", {"ls", "--json"}},
        {"kcache verify", {"verify"}},
        {"kcache -c (KCACHE_MAX_FILES = N/2)", {"-c"}, true},
    };
    // What starting the program costs, subtracted from each command's time.
    std::vector<double> start_ms, start_cpu_ms;
    for (int round = 0; round < std::max(rounds, 3); ++round) {
        const auto start = std::chrono::steady_clock::now();
        const std::optional<QuietRun> run = run_quiet(kcache, {"--version"});
        if (!run || run->status != 0) {
            note = "cannot run " + kcache + " --version (give the CLI with --scale-kcache)";
            return {};
        }
        start_ms.push_back(ms_since(start));
        start_cpu_ms.push_back(run->cpu_ms);
    }
    const double start = median(start_ms), start_cpu = median(start_cpu_ms);
    // One kernel compiled and stored by a new process, its first write the moment its disk tier
    // first looks at the directory (store/disk_store.hpp): the first child into a directory no
    // cleaner has visited scans it whole; the later ones, after that scan, may sample it.
    struct OneCompile {
        double first_ms = -1;
        double later_ms = -1;  // the median of the later children
    };
    const auto one_compile = [&](const std::string& directory, int first) -> OneCompile {
        std::vector<double> ms;
        for (int round = 0; round < std::max(rounds, 2); ++round) {
            auto run = kernel_child("cold", directory, 1, first + round);
            if (!run || run->loaded != 1) {
                note = "a child compiling one kernel into " + directory + " failed";
                return {};
            }
            ms.push_back(run->total_ms);
        }
        return {ms.front(), median(std::vector<double>(ms.begin() + 1, ms.end()))};
    };
    const std::string empty = work + "/empty";
    std::filesystem::remove_all(empty);
    const double empty_compile_ms = one_compile(empty, 2000000).later_ms;
    std::filesystem::remove_all(empty);

    struct Row {
        int count = 0;
        double fill_ms = 0;
        DiskUsage disk;
        std::vector<double> ms, cpu_ms;  // per command: wall, and the process's CPU time
        OneCompile compile;              // one kernel compiled by a new process
    };
    std::vector<Row> rows;
    for (int count : counts) {
        Row row;
        row.count = count;
        const auto filling = std::chrono::steady_clock::now();
        if (auto filled = fill(**opened, payload, 0, count); !filled) {
            note = "filling " + path + ": " + filled.error().message();
            return {};
        }
        // The written bytes to the disk before any clock starts: a scan that ran while they were
        // written back (a gigabyte at 100,000 entries) would time the disk's writeback, not kcache.
        const int synced = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (synced < 0 || syncfs(synced) != 0) {
            note = "syncfs " + path + " failed";
            if (synced >= 0) ::close(synced);
            return {};
        }
        ::close(synced);
        row.fill_ms = ms_since(filling);
        row.disk = disk_usage(path);
        // More than N: the kernels compiled by the children below at a smaller size.
        if (row.disk.entries < static_cast<std::uint64_t>(count)) {
            note = "filled " + std::to_string(row.disk.entries) + " entries, not " +
                   std::to_string(count);
            return {};
        }
        row.compile = one_compile(path, 1000000 + count);
        for (const Command& command : commands) {
            std::vector<std::string> args = {"-d", path};
            args.insert(args.end(), command.args.begin(), command.args.end());
            const std::vector<std::pair<std::string, std::string>> environment = {
                {"KCACHE_MAX_FILES", std::to_string(count / 2)}, {"KCACHE_MAX_SIZE", "0"}};
            std::vector<double> ms, cpu_ms;
            for (int round = 0; round < (command.destructive ? 1 : rounds); ++round) {
                const auto began = std::chrono::steady_clock::now();
                const std::optional<QuietRun> run = run_quiet(kcache, args, environment);
                ms.push_back(ms_since(began));
                cpu_ms.push_back(run ? run->cpu_ms : 0);
                if (!run || run->status != 0) {
                    note = std::string(command.label) + " at " + std::to_string(count) +
                           " entries exited " + (run ? std::to_string(run->status) : "by a signal");
                }
            }
            row.ms.push_back(median(ms));
            row.cpu_ms.push_back(median(cpu_ms));
        }
        const DiskUsage left = disk_usage(path);
        if (left.entries * 2 > static_cast<std::uint64_t>(count)) {
            note = "kcache -c left " + std::to_string(left.entries) + " of " +
                   std::to_string(count) + " entries";
        }
        rows.push_back(std::move(row));
    }
    std::filesystem::remove_all(path);

    std::string text;
    append(text,
           "A cache directory of N entries (%zu-byte payload%s; files hot in the page cache). Each "
           "command a new process, the median of %d (-c once: it removes half); the program's "
           "start (`kcache --version`: %.1f ms, %.1f ms of CPU) subtracted. Wall time, then the "
           "process's CPU time (user + system), which others' load on the machine moves less. "
           "Ratios: per-entry time against N = %d's (1.00x: linear).\n\n",
           payload.size(), payload.size() == 8192 ? ", synthetic" : ", a real cubin", rounds, start,
           start_cpu, rows.front().count);
    append(text, "| command |");
    for (const Row& row : rows)
        append(text, " N = %d: us/entry | vs | CPU us/entry | vs |", row.count);
    append(text, "\n|---|");
    for (std::size_t i = 0; i < rows.size(); ++i) append(text, "---:|---:|---:|---:|");
    append(text, "\n");
    const auto per_entry_us = [&](const Row& row, std::size_t c) {
        return std::max(0.0, row.ms[c] - start) * 1000.0 / row.count;
    };
    const auto cpu_per_entry_us = [&](const Row& row, std::size_t c) {
        return std::max(0.0, row.cpu_ms[c] - start_cpu) * 1000.0 / row.count;
    };
    for (std::size_t c = 0; c < commands.size(); ++c) {
        append(text, "| %s |", commands[c].label);
        for (const Row& row : rows) {
            const double us = per_entry_us(row, c), cpu = cpu_per_entry_us(row, c);
            append(text, " %.2f | %s | %.2f | %s |", us,
                   ratio(us, per_entry_us(rows.front(), c)).c_str(), cpu,
                   ratio(cpu, cpu_per_entry_us(rows.front(), c)).c_str());
        }
        append(text, "\n");
    }
    append(text, "| filling it, synced (the bench's writer, not timed for linearity) |");
    for (const Row& row : rows) append(text, " %.2f | | | |", row.fill_ms * 1000.0 / row.count);
    append(text,
           "\n\n| N | bytes on disk | per entry | files | entries | a new process compiling one "
           "kernel into it, the first since the fill (no cleaner yet: a full scan): ms | vs an "
           "empty directory's (%.1f ms) | the next ones (a cleaner just visited: a sample), "
           "median: ms | vs |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
           empty_compile_ms);
    for (const Row& row : rows) {
        append(text, "| %d | %llu | %.0f | %llu | %llu | %.1f | %s | %.1f | %s |\n", row.count,
               static_cast<unsigned long long>(row.disk.bytes),
               static_cast<double>(row.disk.bytes) / row.count,
               static_cast<unsigned long long>(row.disk.files),
               static_cast<unsigned long long>(row.disk.entries), row.compile.first_ms,
               ratio(row.compile.first_ms, empty_compile_ms).c_str(), row.compile.later_ms,
               ratio(row.compile.later_ms, empty_compile_ms).c_str());
    }
    return text + "\n";
}

}  // namespace

int run_scale_child(const std::string& mode, const std::string& directory, int count, int first) {
    // The device's context, or the fake driver where there is none; made, like the kernels'
    // sources and the compiler library, before the memory is first read.
    std::optional<driver::PrimaryContext> context;
    CacheOptions options;
    options.disk_directory = directory;
    // The cold fill links bundles too (stored before it ends), for the bundled warm children;
    // "cold-keys" is the same fill with bundles off.
    options.bundle_warm_ups = mode == "cold" || mode == "warm-up-bundles";
    // Every kernel stays loaded: the curve is of what each loaded kernel costs.
    options.max_entries =
        std::max<std::size_t>(options.max_entries, static_cast<std::size_t>(count));
    if (driver::device_count()) {
        auto opened = driver::PrimaryContext::open(0);
        if (!opened) {
            std::fprintf(stderr, "%s\n", opened.error().describe().c_str());
            return 3;
        }
        context.emplace(std::move(*opened));
    } else {
        options.driver = std::make_shared<fakes::FakeDriver>(90);
    }
    (void)driver::nvjitlink_api();
    std::vector<std::string> ptx;
    ptx.reserve(static_cast<std::size_t>(count));
    for (int i = first; i < first + count; ++i) {
        ptx.push_back(examples::softmax_rows_ptx(kFirstRow + i));
    }
    std::vector<WarmUpItem> items;
    items.reserve(ptx.size());
    for (int i = 0; i < count; ++i) {
        const std::string* text = &ptx[static_cast<std::size_t>(i)];
        items.push_back({kernel_key(first + i),
                         [text]() -> Result<Source> { return Source::ptx(*text); },
                         "softmax_rows"});
    }
    // The floor: the stored cubins, read and decoded before the clock, each loaded by the driver
    // alone (cuModuleLoadData + cuModuleGetFunction).
    std::vector<std::string> cubins;
    const driver::CudaApi* cu = nullptr;
    if (mode == "floor") {
        if (!context) return 2;
        cu = &**driver::cuda_api();
        for (const auto& item : std::filesystem::recursive_directory_iterator(directory)) {
            if (item.path().extension() != ".kc") continue;
            std::ifstream in(item.path(), std::ios::binary);
            const std::string bytes{std::istreambuf_iterator<char>(in),
                                    std::istreambuf_iterator<char>()};
            auto entry = store::decode(bytes);
            if (entry && entry->key.source_kind == "ptx") cubins.push_back(entry->payload);
        }
    }
    std::vector<CUmodule> floor_modules;
    floor_modules.reserve(cubins.size());
    std::optional<KernelCache> cache(std::in_place, options);
    std::vector<KernelHandle> kept;  // every kernel stays loaded until the memory is read
    kept.reserve(items.size());
    const long rss_before = resident_kib();
    const double cpu_before = cpu_ms();
    const long long device_before = context ? device_used_bytes() : -1;
    int loaded = 0;
    const auto start = std::chrono::steady_clock::now();
    std::vector<Result<KernelHandle>> results;
    if (mode == "floor") {
        for (const std::string& cubin : cubins) {
            CUmodule module = nullptr;
            CUfunction function = nullptr;
            if (cu->cuModuleLoadData(&module, cubin.data()) != CUDA_SUCCESS) continue;
            floor_modules.push_back(module);
            if (cu->cuModuleGetFunction(&function, module, "softmax_rows") == CUDA_SUCCESS) {
                ++loaded;
            }
        }
    } else if (mode == "cold" || mode == "cold-keys" || mode == "warm-up" ||
               mode == "warm-up-bundles") {
        results = cache->warm_up(items, std::max(1u, std::thread::hardware_concurrency()));
        for (const auto& result : results) {
            if (result) {
                ++loaded;
            } else {
                std::fprintf(stderr, "%s\n", result.error().describe().c_str());
            }
        }
    } else if (mode == "one") {
        for (const WarmUpItem& item : items) {
            auto kernel = cache->kernel(item.key, item.make_source, item.kernel_name);
            if (!kernel) {
                std::fprintf(stderr, "%s\n", kernel.error().describe().c_str());
                continue;
            }
            ++loaded;
            kept.push_back(std::move(*kernel));
        }
    } else {
        return 2;
    }
    const double total_ms = ms_since(start);
    const double cpu = cpu_ms() - cpu_before;
    const long rss_after = resident_kib();
    const long long device_after = context ? device_used_bytes() : -1;
    const double device_kib = device_before >= 0 && device_after >= 0
                                  ? static_cast<double>(device_after - device_before) / 1024.0
                                  : -1.0;
    CacheStats stats = cache->stats();
    if (mode == "floor") stats.disk_hits = static_cast<std::uint64_t>(loaded);  // read, like them
    // A cold fill's keys' own entries and bundles, made after its warm-up, stored before the
    // warm processes come: part of its end.
    const auto ending = std::chrono::steady_clock::now();
    if (mode == "cold") cache->wait_for_uploads();
    results.clear();
    kept.clear();
    cache.reset();  // unloads every kernel
    for (CUmodule module : floor_modules) (void)cu->cuModuleUnload(module);
    const double end_ms = ms_since(ending);
    std::printf("%.3f %.3f %.1f %.1f %d %d %d %.3f\n", total_ms, cpu,
                static_cast<double>(rss_after - rss_before), device_kib, loaded,
                static_cast<int>(stats.compiles), static_cast<int>(stats.disk_hits), end_ms);
    return 0;
}

int run_scale_fill(const std::string& directory, int count) {
    auto opened = store::CacheDirectory::open(directory, store::DirectoryPolicy{});
    if (!opened) {
        std::fprintf(stderr, "%s\n", opened.error().message().c_str());
        return 1;
    }
    if (auto filled = fill(**opened, entry_payload(), 0, count); !filled) {
        std::fprintf(stderr, "%s\n", filled.error().message().c_str());
        return 1;
    }
    return 0;
}

std::string run_scale(const std::string& directory, const ScaleOptions& options,
                      std::string& note) {
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);
    std::string text;
    if (options.max_kernels > 0) {
        std::string kernels = kernel_curve(directory, options.max_kernels, options.rounds, note);
        if (kernels.empty()) return {};
        text += "### Kernels: cold and warm, memory per loaded kernel\n\n" + kernels;
    }
    if (options.max_entries > 0) {
        std::string entries =
            directory_curve(directory, options.max_entries, options.rounds, options.kcache, note);
        // What the kernels' part measured is kept when this part fails (note says why).
        if (!entries.empty()) text += "### The cache directory: the CLI's scans\n\n" + entries;
    }
    std::filesystem::remove_all(directory);
    return text;
}

}  // namespace kcache::bench
