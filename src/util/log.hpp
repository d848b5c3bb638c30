// SPDX-License-Identifier: Apache-2.0
// A process-wide log that is quiet until something is wrong: warnings (each once per process) on
// stderr by default. A log setting asks for more or for nothing: "off"/"0", "warn", "info"/"1"
// (one line per miss, compile and eviction), "debug"/"2", or a path (containing '/') to append
// every line, debug included, to that file. Where the setting comes from is the product's
// business (kcache's settings apply it); this file reads no environment.
#pragma once

#include <string_view>

namespace kcache::util {

enum class LogLevel { kOff = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// kWarn until set_log_setting() says otherwise.
LogLevel log_level() noexcept;
inline bool log_enabled(LogLevel level) noexcept {
    return log_level() >= level;
}

// Whether `value` is a log setting that set_log_setting() understands.
bool is_log_setting(std::string_view value) noexcept;
// Applies a log setting from wherever the configuration found it; a value that is not one keeps
// warnings on (a typo never silences them).
void set_log_setting(std::string_view value);
// Whether set_log_setting() has been called in this process.
bool log_setting_applied() noexcept;

// Writes "kcache: <line>\n" atomically with respect to other kcache log lines.
void log_line(LogLevel level, std::string_view line);

// A warning, written the first time its `topic` is warned of in this process; later ones of the
// topic are info lines. A library says what is wrong once, not at every call that meets it.
void warn_once(std::string_view topic, std::string_view line);

// For tests: back to warnings on stderr, no setting applied, no topic warned of.
void reset_log();

}  // namespace kcache::util

// A log line whose text is built only when its level is on: KCACHE_LOG(kInfo, "miss " + key).
#define KCACHE_LOG(level, ...)                                                      \
    do {                                                                            \
        if (::kcache::util::log_enabled(::kcache::util::LogLevel::level)) {         \
            ::kcache::util::log_line(::kcache::util::LogLevel::level, __VA_ARGS__); \
        }                                                                           \
    } while (false)
