// SPDX-License-Identifier: Apache-2.0
#include "util/log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "util/unique_fd.hpp"

namespace kcache::util {
namespace {

struct LogConfig {
    LogLevel level = LogLevel::kWarn;
    std::string path;  // empty: stderr
};

std::mutex g_write_mutex;
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<bool> g_applied{false};
LogConfig g_config;              // written under g_write_mutex
std::set<std::string> g_warned;  // topics warned of; guarded by g_write_mutex

// False: not a log setting.
bool parse(std::string_view text, LogConfig& out) {
    out = {};
    if (text.empty() || text == "warn" || text == "warning") {
        out.level = LogLevel::kWarn;
    } else if (text == "0" || text == "off") {
        out.level = LogLevel::kOff;
    } else if (text == "1" || text == "info") {
        out.level = LogLevel::kInfo;
    } else if (text == "2" || text == "debug") {
        out.level = LogLevel::kDebug;
    } else if (text.find('/') != std::string_view::npos) {
        out.level = LogLevel::kDebug;
        out.path = std::string(text);
    } else {
        return false;
    }
    return true;
}

void apply(std::string_view text) {
    LogConfig config;
    if (!parse(text, config)) config = {};  // a bad value keeps warnings on, never silences them
    std::lock_guard lock(g_write_mutex);
    g_config = std::move(config);
    g_level.store(static_cast<int>(g_config.level), std::memory_order_release);
}

// The log file, opened for each line: never a FIFO that would stall every caller (O_NONBLOCK,
// then only a regular file is kept), never inherited by a child (O_CLOEXEC). None: stderr.
UniqueFd open_log_file(const std::string& path) {
    UniqueFd fd(open(path.c_str(),
                     O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600));
    struct stat info {};
    if (fd && (fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode))) fd.reset();
    return fd;
}

void write(std::string_view line) {
    std::string text = "kcache: ";
    text.append(line).push_back('\n');
    // A bad log path must not silence errors entirely: stderr then.
    const UniqueFd file = g_config.path.empty() ? UniqueFd() : open_log_file(g_config.path);
    const int out = file ? file.get() : STDERR_FILENO;
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(out, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
    }
}

}  // namespace

LogLevel log_level() noexcept {
    return static_cast<LogLevel>(g_level.load(std::memory_order_acquire));
}

bool is_log_setting(std::string_view value) noexcept {
    LogConfig ignored;
    return parse(value, ignored);
}

void set_log_setting(std::string_view value) {
    apply(value);
    g_applied.store(true, std::memory_order_release);
}

bool log_setting_applied() noexcept {
    return g_applied.load(std::memory_order_acquire);
}

void reset_log() {
    apply("");
    g_applied.store(false, std::memory_order_release);
    std::lock_guard lock(g_write_mutex);
    g_warned.clear();
}

void log_line(LogLevel level, std::string_view line) {
    if (!log_enabled(level)) return;
    std::lock_guard lock(g_write_mutex);
    write(line);
}

void warn_once(std::string_view topic, std::string_view line) {
    if (!log_enabled(LogLevel::kWarn)) return;
    std::lock_guard lock(g_write_mutex);
    if (!g_warned.emplace(topic).second && g_config.level < LogLevel::kInfo) return;
    write(line);
}

}  // namespace kcache::util
