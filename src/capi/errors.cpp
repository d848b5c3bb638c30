// SPDX-License-Identifier: Apache-2.0
// The C API's status codes, the calling thread's last error, and the names and version it
// returns as static strings.
#include <string>

#include "capi/capi_internal.hpp"
#include "kcache/provenance.hpp"
#include "kcache/version.hpp"

namespace kcache::capi {
namespace {

// The C codes follow Errc one for one, shifted by KCACHE_OK: a new Errc needs a new status.
constexpr kcache_status shifted(Errc code) {
    return static_cast<kcache_status>(static_cast<int>(code) + 1);
}
static_assert(shifted(Errc::kNoDriver) == KCACHE_NO_DRIVER);
static_assert(shifted(Errc::kNoContext) == KCACHE_NO_CONTEXT);
static_assert(shifted(Errc::kCompileFailed) == KCACHE_COMPILE_FAILED);
static_assert(shifted(Errc::kSourceFailed) == KCACHE_SOURCE_FAILED);
static_assert(shifted(Errc::kKeyConflict) == KCACHE_KEY_CONFLICT);
static_assert(shifted(Errc::kArgumentMismatch) == KCACHE_ARGUMENT_MISMATCH);
static_assert(shifted(Errc::kKernelNotFound) == KCACHE_KERNEL_NOT_FOUND);
static_assert(shifted(Errc::kInvalidArgument) == KCACHE_INVALID_ARGUMENT);
static_assert(shifted(Errc::kDriverError) == KCACHE_DRIVER_ERROR);
static_assert(shifted(Errc::kUnsupported) == KCACHE_UNSUPPORTED);
static_assert(shifted(Errc::kCorruptEntry) == KCACHE_CORRUPT_ENTRY);
static_assert(shifted(Errc::kIoError) == KCACHE_IO_ERROR);
static_assert(shifted(Errc::kArtifactGone) == KCACHE_ARTIFACT_GONE);
constexpr Errc kLastErrc = Errc::kArtifactGone;  // the one above KCACHE_OUT_OF_MEMORY
static_assert(shifted(kLastErrc) + 1 == KCACHE_OUT_OF_MEMORY);

static_assert(static_cast<int>(Provenance::kCompiled) == KCACHE_PROVENANCE_COMPILED);
static_assert(static_cast<int>(Provenance::kDriverJit) == KCACHE_PROVENANCE_DRIVER_JIT);
static_assert(static_cast<int>(Provenance::kMemoryTier) == KCACHE_PROVENANCE_MEMORY_TIER);
static_assert(static_cast<int>(Provenance::kDiskTier) == KCACHE_PROVENANCE_DISK_TIER);
static_assert(static_cast<int>(Provenance::kBinary) == KCACHE_PROVENANCE_BINARY);
static_assert(static_cast<int>(Provenance::kRemoteTier) == KCACHE_PROVENANCE_REMOTE_TIER);

struct LastError {
    kcache_status status = KCACHE_OK;
    std::string message;
    std::string log;
    // Set when `message` could not be kept (no memory): what the getter lends instead.
    const char* fixed = nullptr;
};

LastError& last_error() noexcept {
    thread_local LastError error;
    return error;
}

kcache_status record(kcache_status status, std::string_view message,
                     std::string_view log) noexcept {
    LastError& error = last_error();
    error.status = status;
    try {
        error.message.assign(message);
        error.log.assign(log);
        error.fixed = nullptr;
    } catch (...) {
        error.message.clear();
        error.log.clear();
        error.fixed = "out-of-memory: the error's message could not be kept";
    }
    return status;
}

}  // namespace

kcache_status status_of(Errc code) noexcept {
    return shifted(code);
}

kcache_status fail(const Error& error) noexcept {
    try {
        return record(status_of(error.code()), error.describe(), error.log());
    } catch (...) {
        return record(status_of(error.code()), {}, {});  // describe() could not allocate
    }
}

kcache_status fail(kcache_status status, std::string_view message) noexcept {
    try {
        return record(status, std::string(kcache_status_name(status)) + ": " + std::string(message),
                      {});
    } catch (...) {
        return record(status, {}, {});
    }
}

kcache_status invalid(const char* function, const char* what) noexcept {
    try {
        return fail(KCACHE_INVALID_ARGUMENT, std::string(function) + ": " + what);
    } catch (...) {
        return fail(KCACHE_INVALID_ARGUMENT, std::string_view(function));
    }
}

}  // namespace kcache::capi

extern "C" {

const char* kcache_version(void) {
    return kcache::kVersion;
}

const char* kcache_status_name(kcache_status status) {
    switch (status) {
        case KCACHE_OK:
            return "ok";
        case KCACHE_OUT_OF_MEMORY:
            return "out-of-memory";
        case KCACHE_INTERNAL_ERROR:
            return "internal-error";
        default:
            break;
    }
    const int value = static_cast<int>(status);
    if (value > KCACHE_OK && value < KCACHE_OUT_OF_MEMORY) {
        return kcache::errc_name(static_cast<kcache::Errc>(value - 1));
    }
    return "unknown";
}

kcache_status kcache_last_error_status(void) {
    return kcache::capi::last_error().status;
}

const char* kcache_last_error_message(void) {
    const auto& error = kcache::capi::last_error();
    return error.fixed != nullptr ? error.fixed : error.message.c_str();
}

const char* kcache_last_error_log(void) {
    return kcache::capi::last_error().log.c_str();
}

const char* kcache_provenance_name(kcache_provenance provenance) {
    const int value = static_cast<int>(provenance);
    if (value < KCACHE_PROVENANCE_COMPILED || value > KCACHE_PROVENANCE_REMOTE_TIER) {
        return "unknown";
    }
    return kcache::provenance_name(static_cast<kcache::Provenance>(provenance));
}

}  // extern "C"
