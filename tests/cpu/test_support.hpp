// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the CPU tests: a cache over a FakeDriver, realistic PTX sources from
// examples/, and launch arguments that match the example kernels' parameter lists.
#pragma once

#include <linux/magic.h>
#include <signal.h>
#include <spawn.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kcache/kcache.hpp"
#include "ptx_kernels.hpp"
#include "store/cache_directory.hpp"
#include "store/key_index.hpp"
#include "store/persistent_stats.hpp"
#include "testing/fake_driver.hpp"
#include "util/files.hpp"
#include "util/log.hpp"

namespace kcache::test {

// ThreadSanitizer cannot follow a fork of a process with threads (the child dies when it starts
// one): tests that fork such a process skip under it.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// GCC's AddressSanitizer does not hold its allocator's locks across a fork: a child forked while
// another thread allocates (one starting up, say) may inherit a held lock and hang at its first
// allocation. Tests that fork on purpose while a thread is busy skip under it; those that fork
// while the parent's threads are parked do not need to.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// Waits up to `limit` for a forked `child` to end, and kills it if it has not: its wait status, or
// nullopt if it hung.
inline std::optional<int> wait_for_child(
    pid_t child, std::chrono::milliseconds limit = std::chrono::seconds(15)) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    for (;;) {
        int status = 0;
        const pid_t ended = waitpid(child, &status, WNOHANG);
        if (ended == child) return status;
        if (ended < 0 || std::chrono::steady_clock::now() >= give_up) break;
        usleep(20000);
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return std::nullopt;
}

// Runs this test binary again on one test, with `extra` added to the environment: for behaviour
// that depends on what a fresh process has loaded or found once. Its exit status.
inline int run_self(const std::string& test, const std::vector<std::string>& extra) {
    // An `extra` variable replaces an inherited one of its name: getenv() finds the first.
    auto named_in_extra = [&](std::string_view item) {
        const std::string_view name = item.substr(0, item.find('='));
        for (const auto& added : extra) {
            if (std::string_view(added).substr(0, added.find('=')) == name) return true;
        }
        return false;
    };
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e) {
        if (!named_in_extra(*e)) env_text.emplace_back(*e);
    }
    for (const auto& item : extra) env_text.push_back(item);
    std::vector<char*> env;
    for (auto& text : env_text) env.push_back(text.data());
    env.push_back(nullptr);
    std::string filter = "--gtest_filter=" + test;
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    char* argv[] = {self.data(), filter.data(), nullptr};
    pid_t child = 0;
    if (posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, env.data()) != 0) return -1;
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

// A fresh directory under the system's temp folder, removed with everything in it.
class TempDir {
public:
    TempDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "kcache-test-XXXXXX").string();
        path_ = mkdtemp(pattern.data());
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// The entry files (*.kc) under a cache directory.
inline std::vector<std::filesystem::path> entry_files(const std::string& directory) {
    std::vector<std::filesystem::path> files;
    for (const auto& item : std::filesystem::recursive_directory_iterator(directory)) {
        if (item.is_regular_file() && item.path().extension() == ".kc") {
            files.push_back(item.path());
        }
    }
    return files;
}

inline void remove_entries(const std::string& directory) {
    for (const auto& file : entry_files(directory)) std::filesystem::remove(file);
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Whether `path` is on a file system whose large files kcache maps (util::Files::read_bytes);
// ext4 and tmpfs cover the test machines.
inline bool maps_files_on(const std::string& path) {
    struct statfs where {};
    return statfs(path.c_str(), &where) == 0 &&
           (where.f_type == EXT4_SUPER_MAGIC || where.f_type == TMPFS_MAGIC ||
            where.f_type == XFS_SUPER_MAGIC || where.f_type == BTRFS_SUPER_MAGIC);
}

// Replaces a file as kcache's writers do (a temporary renamed over it), making its folders.
inline bool replace_file(const std::string& path, const std::string& bytes) {
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
    const std::string temp = path + ".test-temporary";
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        out << bytes;
        if (!out) return false;
    }
    std::filesystem::rename(temp, path, error);
    return !error;
}

// The kcache command, for tests that start it (compile workers): the one beside this test binary
// when there is one (binaries copied to another machine together), else the one this build made.
inline std::string tool_path() {
    std::error_code error;
    const auto beside =
        std::filesystem::read_symlink("/proc/self/exe", error).parent_path() / "kcache";
    if (!error && std::filesystem::exists(beside)) return beside.string();
#ifdef KCACHE_TOOL_PATH
    return KCACHE_TOOL_PATH;
#else
    return "kcache";
#endif
}

// The real file system behind the Files seam, every call forwarded: tests derive from it and
// override only the calls they make fail or count.
class ForwardingFiles : public util::Files {
public:
    Result<util::OpenDirectory> open_directory(const std::string& path) override {
        return util::real_files().open_directory(path);
    }
    Result<std::optional<std::string>> read(const util::OpenDirectory& base,
                                            std::string_view relative, std::uint64_t max_bytes,
                                            std::chrono::seconds stamp_after,
                                            const util::Writers* writers) override {
        return util::real_files().read(base, relative, max_bytes, stamp_after, writers);
    }
    Result<void> write_atomic(const util::OpenDirectory& base, std::string_view relative,
                              std::string_view bytes, util::Durability durability) override {
        return util::real_files().write_atomic(base, relative, bytes, durability);
    }
    Result<void> remove(const util::OpenDirectory& base, std::string_view relative) override {
        return util::real_files().remove(base, relative);
    }
    Result<void> remove_tree(const util::OpenDirectory& base, std::string_view relative) override {
        return util::real_files().remove_tree(base, relative);
    }
    Result<void> make_directories(const util::OpenDirectory& base, std::string_view relative,
                                  mode_t mode) override {
        return util::real_files().make_directories(base, relative, mode);
    }
    Result<std::vector<std::string>> list_directory(const util::OpenDirectory& base,
                                                    std::string_view relative) override {
        return util::real_files().list_directory(base, relative);
    }
    Result<std::optional<util::FileStatus>> status(const util::OpenDirectory& base,
                                                   std::string_view relative) override {
        return util::real_files().status(base, relative);
    }
    Result<void> touch(const util::OpenDirectory& base, std::string_view relative) override {
        return util::real_files().touch(base, relative);
    }
    Result<util::OpenDirectory> open_below(const util::OpenDirectory& base,
                                           std::string_view relative) override {
        return util::real_files().open_below(base, relative);
    }
};

// The real file system, noting the durability each atomic write asked for, by whole path.
class DurabilityLog final : public ForwardingFiles {
public:
    std::map<std::string, util::Durability> writes;
    Result<void> write_atomic(const util::OpenDirectory& base, std::string_view relative,
                              std::string_view bytes, util::Durability durability) override {
        writes[base.path_of(relative)] = durability;
        return ForwardingFiles::write_atomic(base, relative, bytes, durability);
    }
};

// A directory accepted as the library accepts one (the test's own, mode 0700), for the stores
// that take one.
inline std::shared_ptr<store::CacheDirectory> cache_directory(
    const std::string& path, util::Files& files = util::real_files()) {
    auto opened = store::CacheDirectory::open(path, store::DirectoryPolicy{}, files);
    if (!opened) throw std::runtime_error(opened.error().message());
    return std::move(*opened);
}

// A small entry for the stores' tests: PTX-compiled for sm_90 under a caller's key.
inline store::Artifact sample(const std::string& payload = "cubin bytes") {
    store::Artifact entry;
    entry.key.arch = "sm_90";
    entry.key.source_kind = "ptx";
    entry.key.caller_key = "gelu:16";
    entry.payload = payload;
    return entry;
}

// The stores over a test's directory, as they were made from a path before they took one.
inline store::PersistentStats stats_at(const std::string& path,
                                       util::Files& files = util::real_files()) {
    return store::PersistentStats::at(cache_directory(path, files));
}
inline store::KeyIndex index_at(const std::string& path, util::Files& files = util::real_files()) {
    return store::KeyIndex::at(cache_directory(path, files));
}
// A file below a test's directory, read as the stores read it.
inline Result<std::optional<std::string>> read_below(const std::string& directory,
                                                     std::string_view relative,
                                                     util::Files& files = util::real_files()) {
    return cache_directory(directory, files)->read(relative, store::kMaxEntryBytes);
}

// Sends kcache's log to a file for one test, and back to what it was after.
class LogToFile {
public:
    explicit LogToFile(std::string path) : path_(std::move(path)) {
        util::reset_log();
        util::set_log_setting(path_);
    }
    ~LogToFile() { util::reset_log(); }
    LogToFile(const LogToFile&) = delete;
    LogToFile& operator=(const LogToFile&) = delete;
    std::string text() const {
        return util::read_named_file(path_, std::uint64_t{1} << 30)->value_or("");
    }

private:
    std::string path_;
};

inline CacheOptions fake_options(std::shared_ptr<fakes::FakeDriver> fake,
                                 std::size_t max_entries = 1024, bool verify = false) {
    CacheOptions options;
    options.max_entries = max_entries;
    options.verify = verify;
    options.driver = std::move(fake);
    // The fake stands in for the driver's JIT; host compilation and the artifact tiers have
    // tests of their own (tiers_test.cpp).
    options.host_compile = false;
    return options;
}

inline Source residual_add_source() {
    return Source::ptx(examples::residual_add_ptx());
}
inline Source scale_source() {
    return Source::ptx(examples::scale_ptx());
}

// A generator of residual_add's PTX that counts how often the cache called it.
inline auto counting_residual_add(int& calls) {
    return [&calls] {
        ++calls;
        return residual_add_source();
    };
}

// A distinct module per column count: the seed's "softmax:<cols>" keys.
inline std::string softmax_key(int cols) {
    return "softmax:" + std::to_string(cols);
}
inline Source softmax_source(int cols) {
    return Source::ptx(examples::softmax_rows_ptx(cols));
}
inline constexpr const char* kSoftmax = "softmax_rows";

// PTX the fake JIT rejects, with a real kernel in it so that only the injected error fails it.
inline Source broken_source() {
    return Source::ptx(examples::residual_add_ptx() + "\n// FAKE_JIT_ERROR\n");
}

inline LaunchConfig one_block() {
    LaunchConfig config;
    config.grid = {1, 1, 1};
    config.block = {128, 1, 1};
    return config;
}

// residual_add(out, a, b, n): three device pointers and a count. The fake never dereferences
// them; only the shape of the argument array matters.
struct ResidualAddArgs {
    std::uint64_t out = 0;
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    std::uint32_t n = 0;
    std::array<void*, 4> pointers() { return {&out, &a, &b, &n}; }
};

// softmax_rows(out, in, rows)
struct SoftmaxArgs {
    std::uint64_t out = 0;
    std::uint64_t in = 0;
    std::uint32_t rows = 0;
    std::array<void*, 3> pointers() { return {&out, &in, &rows}; }
};

// Launches a handle to softmax_rows with correctly shaped arguments.
inline Result<void> launch_softmax(const KernelHandle& handle) {
    SoftmaxArgs args;
    auto pointers = args.pointers();
    return handle.launch(one_block(), pointers);
}

inline Result<void> launch_residual_add(const KernelHandle& handle) {
    ResidualAddArgs args;
    auto pointers = args.pointers();
    return handle.launch(one_block(), pointers);
}

inline double elapsed_ms(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

}  // namespace kcache::test
