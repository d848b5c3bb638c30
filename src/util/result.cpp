// SPDX-License-Identifier: Apache-2.0
// Names and printing for the public error type.
#include "kcache/result.hpp"

namespace kcache {

const char* errc_name(Errc code) noexcept {
    switch (code) {
        case Errc::kNoDriver:
            return "no-driver";
        case Errc::kNoContext:
            return "no-context";
        case Errc::kCompileFailed:
            return "compile-failed";
        case Errc::kSourceFailed:
            return "source-failed";
        case Errc::kKeyConflict:
            return "key-conflict";
        case Errc::kArgumentMismatch:
            return "argument-mismatch";
        case Errc::kKernelNotFound:
            return "kernel-not-found";
        case Errc::kInvalidArgument:
            return "invalid-argument";
        case Errc::kDriverError:
            return "driver-error";
        case Errc::kUnsupported:
            return "unsupported";
        case Errc::kCorruptEntry:
            return "corrupt-entry";
        case Errc::kIoError:
            return "io-error";
        case Errc::kArtifactGone:
            return "artifact-gone";
    }
    return "unknown";
}

std::string Error::describe() const {
    std::string out = std::string(errc_name(code_)) + ": " + message_;
    if (!log_.empty()) out += "\n" + log_;
    return out;
}

}  // namespace kcache
