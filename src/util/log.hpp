// kcache is silent unless KCACHE_LOG asks: "1"/"info" for one line per miss, compile and
// eviction on stderr, "debug" for more, or a path (containing '/') to append to a file.
#pragma once

#include <string_view>

namespace kcache::util {

enum class LogLevel { kOff = 0, kInfo = 1, kDebug = 2 };

// Read once from KCACHE_LOG on first use.
LogLevel log_level() noexcept;
inline bool log_enabled(LogLevel level) noexcept {
    return log_level() >= level;
}

// Writes "kcache: <line>\n" atomically with respect to other kcache log lines.
void log_line(LogLevel level, std::string_view line);

// For tests: re-read KCACHE_LOG.
void reload_log_config();

}  // namespace kcache::util
