#include "util/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace kcache::util {
namespace {

struct LogConfig {
    LogLevel level = LogLevel::kOff;
    std::string path;  // empty: stderr
};

std::mutex g_write_mutex;
std::atomic<int> g_level{-1};  // -1: not read yet
LogConfig g_config;            // written under g_write_mutex

void load_config() {
    std::lock_guard lock(g_write_mutex);
    const char* value = std::getenv("KCACHE_LOG");
    std::string text = value != nullptr ? value : "";
    g_config = {};
    if (text.empty() || text == "0" || text == "off") {
        g_config.level = LogLevel::kOff;
    } else if (text == "debug" || text == "2") {
        g_config.level = LogLevel::kDebug;
    } else if (text.find('/') != std::string::npos) {
        g_config.level = LogLevel::kDebug;
        g_config.path = text;
    } else {
        g_config.level = LogLevel::kInfo;
    }
    g_level.store(static_cast<int>(g_config.level), std::memory_order_release);
}

}  // namespace

LogLevel log_level() noexcept {
    int level = g_level.load(std::memory_order_acquire);
    if (level < 0) {
        load_config();
        level = g_level.load(std::memory_order_acquire);
    }
    return static_cast<LogLevel>(level);
}

void reload_log_config() {
    load_config();
}

void log_line(LogLevel level, std::string_view line) {
    if (!log_enabled(level)) return;
    std::lock_guard lock(g_write_mutex);
    FILE* out = stderr;
    if (!g_config.path.empty()) {
        out = std::fopen(g_config.path.c_str(), "a");
        if (out == nullptr) out = stderr;  // a bad log path must not silence errors entirely
    }
    std::fprintf(out, "kcache: %.*s\n", static_cast<int>(line.size()), line.data());
    if (out != stderr) std::fclose(out);
}

}  // namespace kcache::util
