// SPDX-License-Identifier: Apache-2.0
// The C API's status codes, the calling thread's last error, and the names and version it
// returns as static strings.
#include <string>

#include "capi/capi_internal.hpp"
#include "kcache/provenance.hpp"
#include "kcache/version.hpp"

namespace kcache::capi {
namespace {

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

// Switches without a default, here and in kcache_status_name: a new Errc or status is a
// compiler warning (an error under KCACHE_WERROR) until it is mapped both ways.
kcache_status status_of(Errc code) noexcept {
    switch (code) {
        case Errc::kNoDriver:
            return KCACHE_NO_DRIVER;
        case Errc::kNoContext:
            return KCACHE_NO_CONTEXT;
        case Errc::kCompileFailed:
            return KCACHE_COMPILE_FAILED;
        case Errc::kSourceFailed:
            return KCACHE_SOURCE_FAILED;
        case Errc::kKeyConflict:
            return KCACHE_KEY_CONFLICT;
        case Errc::kArgumentMismatch:
            return KCACHE_ARGUMENT_MISMATCH;
        case Errc::kKernelNotFound:
            return KCACHE_KERNEL_NOT_FOUND;
        case Errc::kInvalidArgument:
            return KCACHE_INVALID_ARGUMENT;
        case Errc::kDriverError:
            return KCACHE_DRIVER_ERROR;
        case Errc::kUnsupported:
            return KCACHE_UNSUPPORTED;
        case Errc::kCorruptEntry:
            return KCACHE_CORRUPT_ENTRY;
        case Errc::kIoError:
            return KCACHE_IO_ERROR;
        case Errc::kArtifactGone:
            return KCACHE_ARTIFACT_GONE;
    }
    return KCACHE_INTERNAL_ERROR;  // not an Errc at all
}

kcache_provenance provenance_of(Provenance provenance) noexcept {
    switch (provenance) {
        case Provenance::kCompiled:
            return KCACHE_PROVENANCE_COMPILED;
        case Provenance::kDriverJit:
            return KCACHE_PROVENANCE_DRIVER_JIT;
        case Provenance::kMemoryTier:
            return KCACHE_PROVENANCE_MEMORY_TIER;
        case Provenance::kDiskTier:
            return KCACHE_PROVENANCE_DISK_TIER;
        case Provenance::kBinary:
            return KCACHE_PROVENANCE_BINARY;
        case Provenance::kRemoteTier:
            return KCACHE_PROVENANCE_REMOTE_TIER;
    }
    return KCACHE_PROVENANCE_COMPILED;  // not a Provenance at all
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
    using kcache::Errc;
    using kcache::errc_name;
    switch (status) {
        case KCACHE_OK:
            return "ok";
        case KCACHE_NO_DRIVER:
            return errc_name(Errc::kNoDriver);
        case KCACHE_NO_CONTEXT:
            return errc_name(Errc::kNoContext);
        case KCACHE_COMPILE_FAILED:
            return errc_name(Errc::kCompileFailed);
        case KCACHE_SOURCE_FAILED:
            return errc_name(Errc::kSourceFailed);
        case KCACHE_KEY_CONFLICT:
            return errc_name(Errc::kKeyConflict);
        case KCACHE_ARGUMENT_MISMATCH:
            return errc_name(Errc::kArgumentMismatch);
        case KCACHE_KERNEL_NOT_FOUND:
            return errc_name(Errc::kKernelNotFound);
        case KCACHE_INVALID_ARGUMENT:
            return errc_name(Errc::kInvalidArgument);
        case KCACHE_DRIVER_ERROR:
            return errc_name(Errc::kDriverError);
        case KCACHE_UNSUPPORTED:
            return errc_name(Errc::kUnsupported);
        case KCACHE_CORRUPT_ENTRY:
            return errc_name(Errc::kCorruptEntry);
        case KCACHE_IO_ERROR:
            return errc_name(Errc::kIoError);
        case KCACHE_ARTIFACT_GONE:
            return errc_name(Errc::kArtifactGone);
        case KCACHE_OUT_OF_MEMORY:
            return "out-of-memory";
        case KCACHE_INTERNAL_ERROR:
            return "internal-error";
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
    using kcache::Provenance;
    switch (provenance) {
        case KCACHE_PROVENANCE_COMPILED:
            return kcache::provenance_name(Provenance::kCompiled);
        case KCACHE_PROVENANCE_DRIVER_JIT:
            return kcache::provenance_name(Provenance::kDriverJit);
        case KCACHE_PROVENANCE_MEMORY_TIER:
            return kcache::provenance_name(Provenance::kMemoryTier);
        case KCACHE_PROVENANCE_DISK_TIER:
            return kcache::provenance_name(Provenance::kDiskTier);
        case KCACHE_PROVENANCE_BINARY:
            return kcache::provenance_name(Provenance::kBinary);
        case KCACHE_PROVENANCE_REMOTE_TIER:
            return kcache::provenance_name(Provenance::kRemoteTier);
    }
    return "unknown";
}

}  // extern "C"
