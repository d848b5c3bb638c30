// SPDX-License-Identifier: Apache-2.0
// Errors as values: every public kcache call returns Result<T>, a value or an Error with a
// code, a message and, for compile failures, the compiler's log. No exception crosses the API.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace kcache {

enum class Errc : std::uint8_t {
    kNoDriver,          // libcuda.so.1 could not be loaded or initialised
    kNoContext,         // the calling thread has no current CUDA context
    kCompileFailed,     // the JIT or compiler rejected the source; Error::log holds its log
    kSourceFailed,      // the caller's source generator returned an error
    kKeyConflict,       // verification: a key was reused for different source
    kArgumentMismatch,  // launch arguments do not match the kernel's parameters
    kKernelNotFound,    // the module has no kernel of that name
    kInvalidArgument,   // bad input from the caller (empty key, zero grid, ...)
    kDriverError,       // any other error reported by the CUDA driver
    kUnsupported,       // the driver lacks a capability (old driver version)
    kCorruptEntry,      // a stored entry failed its checksum or structure checks
    kIoError,           // a file or directory operation failed (errno in the message)
    // A kernel's code was loaded without keeping its bytes in memory, and another context asked
    // for it after they left the tiers (an entry removed from disk meanwhile). The cache drops the
    // module at the next lookup, which builds it again.
    kArtifactGone,
};

const char* errc_name(Errc code) noexcept;

class Error {
public:
    Error(Errc code, std::string message, std::string log = {})
        : code_(code), message_(std::move(message)), log_(std::move(log)) {}

    Errc code() const noexcept { return code_; }
    const std::string& message() const noexcept { return message_; }
    // The compiler's or JIT's own output, when there is one.
    const std::string& log() const noexcept { return log_; }
    // "compile-failed: <message>" plus the log on following lines, for printing.
    std::string describe() const;

private:
    Errc code_;
    std::string message_;
    std::string log_;
};

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value)
        : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit on purpose
    Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const& { return std::get<1>(v_); }
    Error&& error() && { return std::get<1>(std::move(v_)); }

private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT

    bool ok() const noexcept { return !failed_; }
    explicit operator bool() const noexcept { return ok(); }
    const Error& error() const& { return error_; }
    Error&& error() && { return std::move(error_); }

private:
    Error error_{Errc::kInvalidArgument, {}};
    bool failed_ = false;
};

inline Result<void> ok() {
    return {};
}

}  // namespace kcache
