// SPDX-License-Identifier: Apache-2.0
// The multi-process storm of issue 15: writers prebuilding shared kernels, readers that compare
// every byte they load with their own fresh compile, `kcache -C`, `kcache -c` under a tiny budget,
// `kcache verify --repair` and `kill -9` of writers, all at once on one cache directory.
//
//   kcache_storm run KCACHE          the whole test (phase 1 with kills, phase 2 without)
//   kcache_storm writer DIR ID OUT   one writer until DIR/../stop exists (started by `run`)
//   kcache_storm reader DIR ID OUT   one reader, likewise
//   kcache_storm at-rest DIR OUT     one read-only pass over every kernel (after a phase)
//
// Each phase starts writers, readers and the kcache loops at once in one directory; its clock
// starts when every reader holds its reference cubins, and it runs KCACHE_STORM_SECONDS (phase 1,
// default 20, with a killer that kill -9s a random writer every 0.3-1.2 s and restarts it) or a
// third of that (phase 2, no kills), and on until each reader has made 5 passes, one with a disk
// hit. Then a stop file is the gate every child checks between operations. Asserted after each:
// - every process that was not killed exits 0, unsignalled, with no sanitizer report; every
//   kcache command exits 0, or 1 saying another process is cleaning;
// - 0 wrong loads: every binary a reader's cache loaded or read back equals the reader's own
//   compile; a read-only pass over every kernel compares what is left on disk the same way;
// - 0 failed lookups, 0 prebuild failures but I/O ones (-C takes a writer's temporary file),
//   0 corrupt entries met, 0 failed verifications, 0 bad entries found by verify (during, after);
// - after a final `kcache -c` with the tiny budget, the directory is within it;
// - each role's counts add up (see check_counts_add_up);
// - persistent statistics against what processes report of their CacheStats (one JSON line
//   each): phase 2, with no kills, every counter grew by exactly the sum reported. Phase 1: the
//   survivors' sum <= growth <= that plus each killed writer's counts (its snapshot after its last
//   prebuild, plus the one in flight: 1 in prebuilds, prebuild_compiles, compiles, disk.writes,
//   compile_failures; 0 in the lookup counters, which writers never touch; so those are exact
//   even with kills). Counters one prebuild can raise without bound (disk.evicted, disk.errors,
//   compile_ns) get the lower bound only.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "build/plan.hpp"
#include "build/unique_names.hpp"
#include "compile/compiler.hpp"
#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "store/cache_directory.hpp"
#include "store/persistent_stats.hpp"
#include "testing/fake_driver.hpp"

extern char** environ;

namespace kcache::storm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Counts = std::map<std::string, std::uint64_t>;

constexpr int kArch = 90;
// Softmax at many row lengths gives many distinct entries; two more kernels of other shapes.
constexpr int kSoftmaxShapes = 22;
constexpr int kKernels = kSoftmaxShapes + 2;
// Small enough that the writers' own cleaners evict while others read.
constexpr std::uint64_t kLibraryMaxFiles = 16;
// The tiny budget of the `kcache -c` loop and of the final cleanup.
constexpr std::uint64_t kTinyMaxFiles = 4;
constexpr const char* kTinyMaxSize = "40k";
constexpr std::uint64_t kTinyMaxBytes = 40'000;

struct Kernel {
    std::string key;
    std::string name;
    std::string ptx;
};

Kernel kernel_spec(int index) {
    if (index < kSoftmaxShapes) {
        const int cols = index + 1;
        return {"softmax:" + std::to_string(cols), "softmax_rows",
                examples::softmax_rows_ptx(cols)};
    }
    if (index == kSoftmaxShapes) return {"gelu", "gelu", examples::gelu_ptx()};
    return {"residual_add", "residual_add", examples::residual_add_ptx()};
}

// ---- Counts as one JSON line: flat objects of integers; "disk": {...} flattens to "disk.x". ----

std::string to_json(const Counts& counts) {
    std::string out = "{";
    for (const auto& [name, value] : counts) {
        if (out.size() > 1) out += ", ";
        out += "\"" + name + "\": " + std::to_string(value);
    }
    return out + "}";
}

// Reads every integer of a JSON object, nested objects as "outer.inner"; strings, booleans and
// fractions are skipped. Enough for this program's reports and `kcache -s --json`.
Counts parse_counts(const std::string& text) {
    Counts counts;
    std::vector<std::string> prefix;
    std::string last_name;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '{') {
            if (!last_name.empty()) prefix.push_back(last_name);
            last_name.clear();
        } else if (c == '}') {
            if (!prefix.empty()) prefix.pop_back();
        } else if (c == '"') {
            const std::size_t end = text.find('"', i + 1);
            if (end == std::string::npos) break;
            const std::string word = text.substr(i + 1, end - i - 1);
            i = end;
            std::size_t next = text.find_first_not_of(" \t\n", i + 1);
            if (next != std::string::npos && text[next] == ':') last_name = word;
        } else if ((c >= '0' && c <= '9') && !last_name.empty()) {
            std::size_t end = i;
            while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
            if (end >= text.size() || (text[end] != '.' && text[end] != 'e')) {
                std::string name;
                for (const auto& p : prefix) name += p + ".";
                counts[name + last_name] = std::strtoull(text.c_str() + i, nullptr, 10);
            }
            while (end < text.size() && text[end] != ',' && text[end] != '}') ++end;
            i = end - 1;
            last_name.clear();
        }
    }
    return counts;
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// Temp and rename, so that a reader of the file (or a kill) never sees half of it.
void write_text_atomically(const fs::path& path, const std::string& text) {
    const fs::path temp = path.string() + ".tmp";
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        out << text << "\n";
    }
    fs::rename(temp, path);
}

// The persistent counters (the one list, KCACHE_STATS_COUNTERS) by the names `kcache -s --json`
// gives them, "disk_x" as "disk.x"; compile_ns keeps its name (persisted() reads it from the
// stats files, the JSON has it in seconds).
std::string json_name(std::string_view name) {
    constexpr std::string_view kDisk = "disk_";
    if (name.starts_with(kDisk)) return "disk." + std::string(name.substr(kDisk.size()));
    return std::string(name);
}

void add_stats(Counts& counts, const CacheStats& stats) {
#define KCACHE_ADD_COUNTER(name, unit, group, label) counts[json_name(#name)] += stats.name;
    KCACHE_STATS_COUNTERS(KCACHE_ADD_COUNTER)
#undef KCACHE_ADD_COUNTER
}

// ---- The processes of the storm ----

bool stop_requested(const fs::path& stop_file) {
    struct stat st {};
    return ::stat(stop_file.c_str(), &st) == 0;
}

// A driver over the fake one that checks every binary it is given, loaded or read back, against
// the reference cubin of the kernel the reader asked for.
class CheckingDriver final : public driver::Driver {
public:
    CheckingDriver(const std::vector<std::string>& reference, Counts& counts)
        : reference_(reference), counts_(counts) {}

    void expect(int kernel) { expected_ = kernel; }

    std::string describe() const override { return "storm checking driver"; }
    Result<int> current_arch() override { return fake_.current_arch(); }
    int uniform_arch() const noexcept override { return fake_.uniform_arch(); }
    Result<driver::ModuleId> load_module(const Source& source) override {
        ++counts_["loads_not_binary"];  // PTX to the driver's JIT: no cubin was kept or read
        return fake_.load_module(source);
    }
    Result<driver::ModuleId> load_binary(driver::Image image, driver::ImageSource again) override {
        check("load", expected_, image.bytes);
        if (again) {
            again = [this, kernel = expected_,
                     inner = std::move(again)]() -> Result<driver::Image> {
                auto again_image = inner();
                if (again_image) {
                    check("read back", kernel, again_image->bytes);
                } else {
                    ++counts_["read_backs_gone"];  // removed from disk meanwhile: fine
                }
                return again_image;
            };
        }
        return fake_.load_binary(std::move(image), std::move(again));
    }
    void unload_module(driver::ModuleId library) noexcept override { fake_.unload_module(library); }
    Result<driver::KernelId> get_kernel(driver::ModuleId library,
                                        const std::string& name) override {
        return fake_.get_kernel(library, name);
    }
    Result<std::vector<driver::KernelParam>> kernel_params(driver::KernelId kernel) override {
        return fake_.kernel_params(kernel);
    }
    Result<void> launch(driver::KernelId kernel, const LaunchConfig& config, void** args) override {
        return fake_.launch(kernel, config, args);
    }

    // Asks every library loaded with a way back for its bytes again, as a second context would.
    void read_back_all() { (void)fake_.load_again(); }

private:
    void check(const char* what, int kernel, std::string_view bytes) {
        const std::string_view want = reference_[static_cast<std::size_t>(kernel)];
        ++counts_[std::string(what) == "load" ? "loads_checked" : "read_backs_checked"];
        if (bytes == want) return;
        ++counts_["wrong_loads"];
        std::size_t at = 0;
        while (at < bytes.size() && at < want.size() && bytes[at] == want[at]) ++at;
        std::fprintf(stderr, "WRONG %s of %s: %zu bytes, want %zu, first difference at %zu\n", what,
                     kernel_spec(kernel).key.c_str(), bytes.size(), want.size(), at);
    }

    const std::vector<std::string>& reference_;
    Counts& counts_;
    fakes::FakeDriver fake_{kArch};
    int expected_ = 0;
};

CacheOptions storm_options(const std::string& directory, std::shared_ptr<driver::Driver> driver) {
    CacheOptions options;
    options.driver = std::move(driver);
    options.disk_directory = directory;
    options.disk_max_files = kLibraryMaxFiles;
    return options;
}

void finish(const fs::path& out, Counts counts) {
    write_text_atomically(out, to_json(counts));
}

// Prebuilds its share of the kernels (each shared with another writer, for the compile lock),
// in a new cache every pass (as a new process would), until the stop file appears. After every
// prebuild it leaves a snapshot of its counts, so that a kill -9 costs the stats check at most
// the one prebuild in flight.
int writer_main(const std::string& directory, int id, const fs::path& out) {
    const fs::path stop_file = fs::path(directory).parent_path() / "stop";
    const fs::path snapshot = out.string() + ".snapshot";
    std::vector<int> mine;
    for (int k = 0; k < kKernels; ++k) {
        if (k % 3 != id % 3) mine.push_back(k);
    }
    std::mt19937 random(static_cast<unsigned>(::getpid()));
    Counts counts;
    auto driver = std::make_shared<fakes::FakeDriver>(kArch);
    while (!stop_requested(stop_file)) {
        std::shuffle(mine.begin(), mine.end(), random);
        KernelCache cache(storm_options(directory, driver));
        for (int k : mine) {
            if (stop_requested(stop_file)) break;
            const Kernel spec = kernel_spec(k);
            auto origin = cache.prebuild(
                spec.key, [&] { return Source::ptx(spec.ptx); }, kArch);
            if (origin) {
                ++counts[*origin == Provenance::kCompiled   ? "prebuilt_compiled"
                         : *origin == Provenance::kDiskTier ? "prebuilt_from_disk"
                                                            : "prebuilt_other"];
            } else if (origin.error().code() == Errc::kIoError) {
                ++counts["prebuild_io_errors"];  // -C took its temporary file, or the disk
            } else {
                ++counts["prebuild_errors"];
                std::fprintf(stderr, "prebuild %s: %s\n", spec.key.c_str(),
                             origin.error().describe().c_str());
            }
            Counts now = counts;
            add_stats(now, cache.stats());
            write_text_atomically(snapshot, to_json(now));
        }
        add_stats(counts, cache.stats());
        ++counts["passes"];
    }
    finish(out, counts);
    return 0;
}

// A reader's progress records on the pipe its driver gave it as this descriptor: two bytes each
// (reader id, what), so that no write is split.
constexpr int kProgressFd = 3;
constexpr char kReady = 'r';     // the reference cubins are compiled
constexpr char kPass = 'p';      // a pass ended
constexpr char kDiskPass = 'd';  // a pass ended that loaded something from the disk tier

void report_progress(int id, char what) {
    const char record[2] = {static_cast<char>('0' + id), what};
    std::ignore = ::write(kProgressFd, record, sizeof record);  // a driver gone is no matter
}

// Every kernel's cubin, compiled here with no cache in between, its names made unique as the
// plan says (build/unique_names.hpp); empty when a compile failed.
std::vector<std::string> reference_cubins() {
    std::vector<std::string> reference;
    for (int k = 0; k < kKernels; ++k) {
        const std::string& ptx = kernel_spec(k).ptx;
        auto plan = build::plan_build(kArch, Source::ptx(ptx), true);
        std::optional<std::string> renamed;
        if (plan && *plan && (*plan)->unique_names) {
            renamed = build::with_unique_names(ptx, *(*plan)->unique_names);
        }
        auto compiled = compile::link_ptx(renamed ? *renamed : ptx, compile::Target{kArch, false});
        if (!compiled) {
            std::fprintf(stderr, "reference compile of %s: %s\n", kernel_spec(k).key.c_str(),
                         compiled.error().describe().c_str());
            return {};
        }
        reference.push_back(std::move(compiled->cubin));
    }
    return reference;
}

// One pass as a new process makes it: a new cache over the shared directory, `kernels` looked
// up (each load compared byte for byte by the checking driver), looked up again (hits), and
// every library read back from the disk. Its stats.
CacheStats checked_pass(CacheOptions options, const std::vector<std::string>& reference,
                        const std::vector<int>& kernels, Counts& counts) {
    auto checking = std::make_shared<CheckingDriver>(reference, counts);
    options.driver = checking;
    KernelCache cache(std::move(options));
    for (int k : kernels) {
        const Kernel spec = kernel_spec(k);
        checking->expect(k);
        auto make = [&] { return Source::ptx(spec.ptx); };
        for (int again = 0; again < 2; ++again) {
            auto handle = cache.kernel(spec.key, make, spec.name);
            if (!handle) {
                ++counts["lookup_errors"];
                std::fprintf(stderr, "lookup %s: %s\n", spec.key.c_str(),
                             handle.error().describe().c_str());
            }
        }
    }
    checking->read_back_all();
    cache.wait_for_uploads();  // a lookup's compile is written behind it: counted once written
    const CacheStats stats = cache.stats();
    add_stats(counts, stats);
    ++counts["passes"];
    return stats;
}

// Compiles every kernel itself first, then makes checked passes over a random few kernels until
// the stop file appears. Reader 1 verifies every hit (CacheOptions::verify) as well.
int reader_main(const std::string& directory, int id, const fs::path& out) {
    const fs::path stop_file = fs::path(directory).parent_path() / "stop";
    const std::vector<std::string> reference = reference_cubins();
    if (reference.empty()) return 1;
    report_progress(id, kReady);
    std::mt19937 random(static_cast<unsigned>(::getpid()) * 31u + static_cast<unsigned>(id));
    std::vector<int> order(kKernels);
    for (int k = 0; k < kKernels; ++k) order[static_cast<std::size_t>(k)] = k;
    Counts counts;
    while (!stop_requested(stop_file)) {
        std::shuffle(order.begin(), order.end(), random);
        CacheOptions options = storm_options(directory, nullptr);
        options.verify = id == 1;
        const CacheStats stats = checked_pass(
            options, reference, std::vector<int>(order.begin(), order.begin() + 6), counts);
        report_progress(id, stats.disk_hits > 0 ? kDiskPass : kPass);
    }
    finish(out, counts);
    return 0;
}

// After a phase: every kernel looked up once, read-only (so that a miss stores nothing and the
// statistics are left alone), so that every entry left on disk is compared with a fresh compile.
int at_rest_main(const std::string& directory, const fs::path& out) {
    const std::vector<std::string> reference = reference_cubins();
    if (reference.empty()) return 1;
    std::vector<int> all(kKernels);
    for (int k = 0; k < kKernels; ++k) all[static_cast<std::size_t>(k)] = k;
    CacheOptions options = storm_options(directory, nullptr);
    options.read_only = true;
    Counts counts;
    checked_pass(options, reference, all, counts);
    finish(out, counts);
    return 0;
}

// ---- The driver ----

struct Spawned {
    pid_t pid = -1;
    fs::path log;  // stdout and stderr
};

// `progress`, when not -1, becomes the child's kProgressFd.
Spawned spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
              const fs::path& log, int progress = -1) {
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e) {
        // The storm sets every setting it means; the caller's own KCACHE_* would change it.
        if (std::strncmp(*e, "KCACHE_", 7) != 0) env_text.emplace_back(*e);
    }
    for (const auto& item : extra_env) env_text.push_back(item);
    std::vector<char*> env;
    for (auto& text : env_text) env.push_back(text.data());
    env.push_back(nullptr);
    std::vector<std::string> arg_text = args;
    std::vector<char*> argv;
    for (auto& text : arg_text) argv.push_back(text.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (progress >= 0) posix_spawn_file_actions_adddup2(&actions, progress, kProgressFd);
    Spawned spawned;
    spawned.log = log;
    if (posix_spawn(&spawned.pid, argv[0], &actions, nullptr, argv.data(), env.data()) != 0) {
        spawned.pid = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    return spawned;
}

int wait_for(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

bool has_sanitizer_report(const std::string& log) {
    return log.find("Sanitizer") != std::string::npos ||
           log.find("runtime error:") != std::string::npos;
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
    return "status " + std::to_string(status);
}

class Storm {
public:
    Storm(std::string self, std::string kcache, fs::path root)
        : self_(std::move(self)),
          kcache_(std::move(kcache)),
          root_(std::move(root)),
          dir_((root_ / "cache").string()) {
        fs::create_directories(root_ / "out");
        if (::pipe2(progress_, O_CLOEXEC) != 0) std::perror("pipe2");
    }
    ~Storm() {
        ::close(progress_[0]);
        ::close(progress_[1]);
    }
    Storm(const Storm&) = delete;
    Storm& operator=(const Storm&) = delete;

    // One phase of `seconds`: writers, readers, the kcache loops and, with `kills`, the killer.
    void phase(const std::string& name, std::chrono::seconds seconds, bool kills) {
        phase_ = name;
        fs::remove(root_ / "stop");
        survivors_.clear();
        by_role_.clear();
        killed_snapshots_.clear();
        kills_ = 0;
        std::vector<std::thread> loops;
        stopping_ = false;
        for (int w = 0; w < kWriters; ++w) start_child("writer", w);
        for (int r = 0; r < kReaders; ++r) start_child("reader", r);
        loops.emplace_back([&] { kcache_loop("clear", {"-C"}, {}, 700); });
        loops.emplace_back([&] {
            kcache_loop("cleanup", {"-c"},
                        {"KCACHE_MAX_FILES=" + std::to_string(kTinyMaxFiles),
                         std::string("KCACHE_MAX_SIZE=") + kTinyMaxSize},
                        150);
        });
        loops.emplace_back([&] { kcache_loop("verify", {"verify", "--repair"}, {}, 200); });
        // The clock starts once every reader can check what it loads; the phase then runs its
        // time and on until each reader has done kMinPasses passes, one of them a disk hit, so
        // that what is asserted happened whatever the machine's load (up to kMaxOvertime).
        std::vector<int> ready(kReaders), passes(kReaders), disk_passes(kReaders);
        auto all = [&](const std::vector<int>& per_reader, int at_least) {
            return std::all_of(per_reader.begin(), per_reader.end(),
                               [&](int n) { return n >= at_least; });
        };
        read_progress(
            ready, passes, disk_passes, [&] { return all(ready, 1); }, Clock::now() + kMaxOvertime);
        expect(all(ready, 1), "the readers did not compile their references in time");
        std::thread killer;
        if (kills) killer = std::thread([&] { kill_writers(); });
        const auto start = Clock::now();
        read_progress(
            ready, passes, disk_passes, [&] { return false; }, start + seconds);
        read_progress(
            ready, passes, disk_passes,
            [&] { return all(passes, kMinPasses) && all(disk_passes, 1); },
            start + seconds + kMaxOvertime);
        expect(all(passes, kMinPasses) && all(disk_passes, 1),
               "the readers did not do " + std::to_string(kMinPasses) +
                   " passes with a disk hit each in time");
        stopping_ = true;
        if (killer.joinable()) killer.join();
        write_text_atomically(root_ / "stop", "stop");  // the gate every child checks
        for (auto& loop : loops) loop.join();
        std::vector<Child> children;
        {
            std::lock_guard lock(mutex_);
            children.swap(children_);
        }
        for (auto& child : children) reap(child, wait_for(child.spawned.pid), false);
    }

    // The checks after a phase; the persisted counters before it, to compare growth.
    void check_phase(const Counts& persisted_before, bool exact) {
        // What the storm left on disk holds the bytes of a fresh compile, entry by entry.
        const fs::path at_rest_out = root_ / "out" / (phase_ + "-at-rest.json");
        const Spawned at_rest = spawn({self_, "at-rest", dir_, at_rest_out.string()}, {},
                                      root_ / "out" / (phase_ + "-at-rest.log"));
        const int at_rest_status = wait_for(at_rest.pid);
        const std::string at_rest_log = read_text(at_rest.log);
        expect(WIFEXITED(at_rest_status) && WEXITSTATUS(at_rest_status) == 0 &&
                   !has_sanitizer_report(at_rest_log),
               "at-rest check ended with " + describe_status(at_rest_status) + ":\n" + at_rest_log);
        Counts at_rest_counts = parse_counts(read_text(at_rest_out));
        expect(at_rest_counts["loads_checked"] == kKernels && at_rest_counts["wrong_loads"] == 0 &&
                   at_rest_counts["lookup_errors"] == 0,
               "at-rest check: " + to_json(at_rest_counts) + "\n" + at_rest_log);

        // Budgets held: a final cleanup under the tiny budget leaves it within.
        auto cleaned = run_kcache({"-c"}, {"KCACHE_MAX_FILES=" + std::to_string(kTinyMaxFiles),
                                           std::string("KCACHE_MAX_SIZE=") + kTinyMaxSize});
        expect(cleaned.first == 0,
               "final kcache -c: " + describe_status(cleaned.first) + ": " + cleaned.second);
        auto verified = run_kcache({"verify"}, {});
        expect(verified.first == 0 && verified.second.find(" 0 bad") != std::string::npos,
               "final kcache verify: " + verified.second);
        const Counts shown = persisted();
        expect(shown.at("entries") <= kTinyMaxFiles,
               "entries after kcache -c: " + std::to_string(shown.at("entries")));
        expect(shown.at("size_bytes") <= kTinyMaxBytes,
               "bytes after kcache -c: " + std::to_string(shown.at("size_bytes")));

        const Counts& s = survivors_;
        const auto get = [](const Counts& c, const std::string& name) {
            auto it = c.find(name);
            return it == c.end() ? std::uint64_t{0} : it->second;
        };
        expect(get(s, "wrong_loads") == 0, "wrong loads: " + std::to_string(get(s, "wrong_loads")));
        expect(get(s, "lookup_errors") == 0,
               "failed lookups: " + std::to_string(get(s, "lookup_errors")));
        expect(get(s, "prebuild_errors") == 0,
               "failed prebuilds (not I/O): " + std::to_string(get(s, "prebuild_errors")));
        // Writes are atomic and nothing here flips a byte: a torn entry would be found corrupt.
        expect(get(s, "disk.corrupt") == 0 && at_rest_counts["disk.corrupt"] == 0,
               "corrupt entries found: " + std::to_string(get(s, "disk.corrupt")));
        expect(get(s, "verify_failures") == 0,
               "verified hits that failed: " + std::to_string(get(s, "verify_failures")));
        expect(get(s, "loads_not_binary") == 0,
               "PTX handed to the driver: " + std::to_string(get(s, "loads_not_binary")));
        check_counts_add_up();
        expect(verify_bad_ == 0, "entries verify --repair found bad during the storm: " +
                                     std::to_string(verify_bad_));
        // The storm happened: something of each kind, counted, not timed.
        expect(get(s, "loads_checked") > 0, "no reader loaded anything");
        expect(get(s, "disk.hits") > 0, "no reader hit the disk tier");
        expect(get(s, "disk.writes") > 0, "nothing was written");
        expect(exact || kills_ > 0, "no writer was killed");
        expect(loop_runs_["clear"] > 0 && loop_runs_["cleanup"] > 0 && loop_runs_["verify"] > 0,
               "a kcache loop never ran");

        // Statistics: persisted growth against what the processes counted.
        // compile_ns: `-s --json` rounds it to compile_seconds, so it comes from the store.
        Counts grown;
        for (const store::StatsField& field : store::stats_fields()) {
            const std::string name = json_name(field.name);
            grown[name] = get(shown, name) - get(persisted_before, name);
        }
        for (const store::StatsField& field : store::stats_fields()) {
            const std::string name = json_name(field.name);
            const std::uint64_t lower = get(s, name);
            const std::uint64_t value = grown[name];
            if (exact) {
                expect(value == lower, "persisted " + name + " grew by " + std::to_string(value) +
                                           ", processes counted " + std::to_string(lower));
                continue;
            }
            expect(value >= lower, "persisted " + name + " grew by " + std::to_string(value) +
                                       ", survivors alone counted " + std::to_string(lower));
            // A killed writer flushed at most what it had counted: its snapshot after its last
            // prebuild, plus the one in flight (which counts 1 at most in these fields, and 0
            // in those only lookups count; the rest are not bounded by one prebuild).
            std::optional<std::uint64_t> in_flight;
            if (name == "prebuilds" || name == "prebuild_compiles" || name == "compiles" ||
                name == "disk.writes" || name == "compile_failures") {
                in_flight = 1;
            } else if (name == "hits" || name == "misses" || name == "waits" ||
                       name == "memory_hits" || name == "disk.hits" || name == "disk.misses" ||
                       name == "disk.rejected" || name == "evictions" ||
                       name == "verify_failures" || name == "config_errors") {
                in_flight = 0;
            }
            if (!in_flight) continue;
            const std::uint64_t upper = lower + get(killed_snapshots_, name) +
                                        *in_flight * static_cast<std::uint64_t>(kills_);
            if (name == "prebuilds") {
                bounds_ = "prebuilds " + std::to_string(lower) + " <= " + std::to_string(value) +
                          " <= " + std::to_string(upper) + ", ";
            }
            expect(value <= upper, "persisted " + name + " grew by " + std::to_string(value) +
                                       ", more than the " + std::to_string(upper) +
                                       " all processes could have counted");
        }
        summary_ += phase_ + ": " + std::to_string(kills_) + " kills, " + bounds_ + "at rest " +
                    std::to_string(at_rest_counts["disk.hits"]) + " entries of " +
                    std::to_string(at_rest_counts["loads_checked"]) + " kernels checked, " +
                    std::to_string(get(s, "loads_checked")) + " loads and " +
                    std::to_string(get(s, "read_backs_checked")) + " read-backs checked (" +
                    std::to_string(get(s, "wrong_loads")) + " wrong), reader disk hits " +
                    std::to_string(get(s, "disk.hits")) + ", disk writes " +
                    std::to_string(grown["disk.writes"]) + ", compiles " +
                    std::to_string(grown["compiles"]) + ", prebuild I/O errors " +
                    std::to_string(get(s, "prebuild_io_errors")) + ", evicted " +
                    std::to_string(grown["disk.evicted"]) + "; kcache -C " +
                    std::to_string(loop_runs_["clear"]) + " (" +
                    std::to_string(loop_busy_["clear"]) + " busy), -c " +
                    std::to_string(loop_runs_["cleanup"]) + " (" +
                    std::to_string(loop_busy_["cleanup"]) + " busy), verify --repair " +
                    std::to_string(loop_runs_["verify"]) + "\n";
        bounds_.clear();
        loop_runs_.clear();
        loop_busy_.clear();
        verify_bad_ = 0;
    }

    // What each process counted of its own work agrees with its caches' CacheStats.
    void check_counts_add_up() {
        auto agree = [&](const char* role, const std::string& what, std::uint64_t left,
                         std::uint64_t right) {
            expect(left == right, std::string(role) + "s: " + what + ": " + std::to_string(left) +
                                      " against " + std::to_string(right));
        };
        Counts& r = by_role_["reader"];
        // Each key of a pass is looked up twice: a miss that loads one binary, then a hit.
        agree("reader", "misses == hits", r["misses"], r["hits"]);
        agree("reader", "misses == binaries loaded", r["misses"], r["loads_checked"]);
        agree("reader", "misses == memory_hits + disk.hits + disk.misses", r["misses"],
              r["memory_hits"] + r["disk.hits"] + r["disk.misses"]);
        agree("reader", "disk.misses == compiles", r["disk.misses"], r["compiles"]);
        Counts& w = by_role_["writer"];
        agree("writer", "prebuilds == their outcomes", w["prebuilds"],
              w["prebuilt_compiled"] + w["prebuilt_from_disk"] + w["prebuilt_other"] +
                  w["prebuild_io_errors"] + w["prebuild_errors"]);
        agree("writer", "compiles == prebuild_compiles", w["compiles"], w["prebuild_compiles"]);
        agree("writer", "lookups", w["hits"] + w["misses"], 0);
        // A compile is written, or its write failed (counted as an error); nothing else writes.
        for (const char* role : {"reader", "writer"}) {
            Counts& c = by_role_[role];
            expect(c["disk.writes"] <= c["compiles"] &&
                       c["compiles"] <= c["disk.writes"] + c["disk.errors"],
                   std::string(role) + "s: " + std::to_string(c["compiles"]) + " compiles, " +
                       std::to_string(c["disk.writes"]) + " writes, " +
                       std::to_string(c["disk.errors"]) + " disk errors");
        }
    }

    // `kcache -s --json`, with compile_ns from the store itself.
    Counts persisted() {
        auto shown = run_kcache({"-s", "--json"}, {});
        Counts counts = parse_counts(shown.second);
        expect(shown.first == 0 && counts.contains("disk.writes"),
               "kcache -s --json: " + shown.second);
        auto directory = store::CacheDirectory::open(dir_, store::DirectoryPolicy{});
        if (directory) {
            auto stored = store::PersistentStats::at(*directory).read();
            if (stored) counts["compile_ns"] = stored->compile_ns;
        }
        return counts;
    }

    const std::vector<std::string>& failures() const { return failures_; }
    const std::string& summary() const { return summary_; }

private:
    static constexpr int kWriters = 3;
    static constexpr int kReaders = 2;
    static constexpr int kMinPasses = 5;
    static constexpr std::chrono::seconds kMaxOvertime{25};

    // Counts the readers' progress records until `done` holds or `deadline` passes.
    void read_progress(std::vector<int>& ready, std::vector<int>& passes,
                       std::vector<int>& disk_passes, const std::function<bool()>& done,
                       Clock::time_point deadline) {
        while (!done() && Clock::now() < deadline) {
            pollfd pending{progress_[0], POLLIN, 0};
            if (::poll(&pending, 1, 50) <= 0) continue;
            char record[2];
            if (::read(progress_[0], record, sizeof record) != sizeof record) continue;
            const int reader = record[0] - '0';
            if (reader < 0 || reader >= kReaders) continue;
            const auto at = static_cast<std::size_t>(reader);
            if (record[1] == kReady) ++ready[at];
            if (record[1] == kPass || record[1] == kDiskPass) ++passes[at];
            if (record[1] == kDiskPass) ++disk_passes[at];
        }
    }

    struct Child {
        std::string role;
        int id = 0;
        int generation = 0;
        fs::path out;
        Spawned spawned;
    };

    void expect(bool ok, const std::string& what) {
        if (ok) return;
        std::lock_guard lock(failures_mutex_);
        failures_.push_back(phase_ + ": " + what);
    }

    void start_child(const std::string& role, int id) {
        Child child;
        child.role = role;
        child.id = id;
        {
            std::lock_guard lock(mutex_);
            child.generation = generations_[role + std::to_string(id)]++;
        }
        const std::string base =
            phase_ + "-" + role + "-" + std::to_string(id) + "-" + std::to_string(child.generation);
        child.out = root_ / "out" / (base + ".json");
        child.spawned =
            spawn({self_, role, dir_, std::to_string(id), child.out.string()}, {},
                  root_ / "out" / (base + ".log"), role == "reader" ? progress_[1] : -1);
        expect(child.spawned.pid > 0, "could not start " + base);
        if (child.spawned.pid <= 0) return;
        std::lock_guard lock(mutex_);
        children_.push_back(std::move(child));
    }

    // Counts what a finished child reported; a killed one counts its snapshot (an upper bound).
    void reap(const Child& child, int status, bool killed) {
        const std::string log = read_text(child.spawned.log);
        const std::string who = child.role + " " + std::to_string(child.id) + " (generation " +
                                std::to_string(child.generation) + ")";
        expect(!has_sanitizer_report(log), who + " sanitizer report:\n" + log);
        if (killed) {
            expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                   who + " was killed but ended with " + describe_status(status));
            const fs::path snapshot = child.out.string() + ".snapshot";
            std::lock_guard lock(mutex_);
            if (fs::exists(snapshot)) {
                for (const auto& [name, value] : parse_counts(read_text(snapshot)))
                    killed_snapshots_[name] += value;
            }
            return;
        }
        expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               who + " ended with " + describe_status(status) + ":\n" + log);
        expect(log.find("WRONG") == std::string::npos, who + " loaded wrong bytes:\n" + log);
        if (!fs::exists(child.out)) {
            expect(false, who + " left no report");
            return;
        }
        std::lock_guard lock(mutex_);
        for (const auto& [name, value] : parse_counts(read_text(child.out)))
            survivors_[name] += value, by_role_[child.role][name] += value;
    }

    void kill_writers() {
        std::mt19937 random(12345);
        while (!stopping_) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300 + random() % 900));
            if (stopping_) break;
            Child victim;
            {
                std::lock_guard lock(mutex_);
                std::vector<std::size_t> writers;
                for (std::size_t i = 0; i < children_.size(); ++i) {
                    if (children_[i].role == "writer") writers.push_back(i);
                }
                if (writers.empty()) continue;
                const std::size_t at = writers[random() % writers.size()];
                victim = children_[at];
                children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(at));
            }
            ::kill(victim.spawned.pid, SIGKILL);
            reap(victim, wait_for(victim.spawned.pid), true);
            ++kills_;
            start_child("writer", victim.id);
        }
    }

    std::pair<int, std::string> run_kcache(std::vector<std::string> args,
                                           const std::vector<std::string>& env) {
        static std::atomic<int> serial{0};
        args.insert(args.begin(), {kcache_, "-d", dir_});
        const fs::path log = root_ / "out" / ("kcache-" + std::to_string(serial++) + ".log");
        Spawned spawned = spawn(args, env, log);
        if (spawned.pid <= 0) return {-1, "could not start kcache"};
        const int status = wait_for(spawned.pid);
        std::string text = read_text(log);
        fs::remove(log);
        return {status, text};
    }

    // Runs one kcache command over and over until the phase stops.
    void kcache_loop(const std::string& what, const std::vector<std::string>& args,
                     const std::vector<std::string>& env, int pause_ms) {
        std::mt19937 random(static_cast<unsigned>(std::hash<std::string>{}(what)));
        while (!stopping_) {
            auto [status, text] = run_kcache(args, env);
            const bool busy = WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
                              text.find("another process is cleaning") != std::string::npos;
            std::unique_lock lock(mutex_);
            ++loop_runs_[what];
            if (busy) ++loop_busy_[what];
            expect(!has_sanitizer_report(text), "kcache " + what + " sanitizer report:\n" + text);
            expect((WIFEXITED(status) && WEXITSTATUS(status) == 0) || busy,
                   "kcache " + what + " ended with " + describe_status(status) + ":\n" + text);
            if (what == "cleanup" && !busy) {
                // "...; N entries (SIZE) left": what the cleanup itself left within the budget.
                const std::size_t at = text.rfind(" entries (");
                const std::size_t start = at == std::string::npos ? at : text.rfind(' ', at - 1);
                const std::uint64_t left =
                    start == std::string::npos
                        ? ~0ull
                        : std::strtoull(text.c_str() + start + 1, nullptr, 10);
                expect(left <= kTinyMaxFiles, "kcache -c left more than the budget: " + text);
            }
            if (what == "verify") {
                // "N entries checked, B bad, R removed": a bad entry is a torn or wrong write.
                const std::size_t at = text.find(" bad, ");
                if (at != std::string::npos) {
                    std::size_t start = text.rfind(' ', at - 1);
                    verify_bad_ += std::strtoull(text.c_str() + start + 1, nullptr, 10);
                }
                expect(text.find("bad: ") == std::string::npos, "verify --repair: " + text);
            }
            lock.unlock();
            std::this_thread::sleep_for(
                std::chrono::milliseconds(pause_ms / 2 + random() % pause_ms));
        }
    }

    const std::string self_;
    const std::string kcache_;
    const fs::path root_;
    const std::string dir_;
    std::string phase_;
    int progress_[2] = {-1, -1};  // the readers' progress pipe: read end, write end
    std::atomic<bool> stopping_{false};
    std::atomic<int> kills_{0};
    std::mutex mutex_;             // guards the members below
    std::vector<Child> children_;  // running
    std::map<std::string, int> generations_;
    Counts survivors_;
    std::map<std::string, Counts> by_role_;  // survivors_, by "reader" and "writer"
    Counts killed_snapshots_;
    std::map<std::string, std::uint64_t> loop_runs_, loop_busy_;
    std::uint64_t verify_bad_ = 0;
    std::mutex failures_mutex_;  // guards failures_
    std::vector<std::string> failures_;
    std::string summary_;
    std::string bounds_;  // phase 1's bounds on persisted prebuilds, for the summary
};

int run_main(const std::string& kcache) {
    const char* seconds_text = std::getenv("KCACHE_STORM_SECONDS");
    const long seconds = seconds_text != nullptr ? std::strtol(seconds_text, nullptr, 10) : 20;
    if (seconds <= 0 || seconds > 600) {
        std::fprintf(stderr, "KCACHE_STORM_SECONDS: 1 to 600, got %s\n", seconds_text);
        return 2;
    }
    std::string pattern = (fs::temp_directory_path() / "kcache-storm-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
        std::perror("mkdtemp");
        return 1;
    }
    const fs::path root = pattern;
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    const auto start = Clock::now();
    Storm storm(self, kcache, root);
    Counts before = storm.persisted();
    storm.phase("phase 1 (kills)", std::chrono::seconds(seconds), /*kills=*/true);
    storm.check_phase(before, /*exact=*/false);
    before = storm.persisted();
    storm.phase("phase 2 (no kills)", std::chrono::seconds(std::max(4L, seconds / 3)),
                /*kills=*/false);
    storm.check_phase(before, /*exact=*/true);
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    if (!storm.failures().empty()) {
        for (const auto& failure : storm.failures())
            std::fprintf(stderr, "FAIL %s\n", failure.c_str());
        std::fprintf(stderr, "%s(kept %s)\n", storm.summary().c_str(), root.c_str());
        return 1;
    }
    if (std::getenv("KCACHE_STORM_VERBOSE") != nullptr) {
        std::printf("%sstorm passed in %.1f s\n", storm.summary().c_str(), took);
    }
    if (std::getenv("KCACHE_STORM_KEEP") != nullptr) {
        std::printf("kept %s\n", root.c_str());
        return 0;
    }
    std::error_code ignored;
    fs::remove_all(root, ignored);
    return 0;
}

}  // namespace
}  // namespace kcache::storm

int main(int argc, char** argv) {
    using namespace kcache::storm;
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 2 && args[0] == "run") return run_main(args[1]);
    if (args.size() == 4 && args[0] == "writer")
        return writer_main(args[1], std::stoi(args[2]), args[3]);
    if (args.size() == 4 && args[0] == "reader")
        return reader_main(args[1], std::stoi(args[2]), args[3]);
    if (args.size() == 3 && args[0] == "at-rest") return at_rest_main(args[1], args[2]);
    std::fprintf(stderr,
                 "usage: kcache_storm run PATH_TO_KCACHE\n"
                 "       kcache_storm writer|reader CACHE_DIR ID REPORT (started by run)\n");
    return 2;
}
