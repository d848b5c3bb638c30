// SPDX-License-Identifier: Apache-2.0
// One nvJitLink link, as src/compile asks for it: each step a typed result, no CUDA type in sight.
// An error names the step that failed and nvJitLink's code ("nvJitLinkComplete failed (nvJitLink
// error 4)") and carries nvJitLink's error log; the caller adds what was linked for which target.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::driver {

enum class LinkInput {
    kPtx,    // PTX text, its terminating NUL included
    kLtoIr,  // NVRTC's -dlto output
};

// The move-only owner of an nvJitLinkHandle: whichever way its holder leaves, the handle is
// destroyed once. One session takes one call at a time (nvJitLink's handles are not for
// concurrent use); its calls may run in a copy of nvJitLink, on the copy's own thread
// (driver/nvjitlink_copies.hpp).
class NvJitLinkSession {
public:
    // kUnsupported, saying why, when nvJitLink cannot be loaded; kCompileFailed when it refuses
    // the options.
    static Result<NvJitLinkSession> create(const std::vector<std::string>& options);

    NvJitLinkSession(NvJitLinkSession&&) noexcept;
    NvJitLinkSession& operator=(NvJitLinkSession&&) noexcept;
    NvJitLinkSession(const NvJitLinkSession&) = delete;
    NvJitLinkSession& operator=(const NvJitLinkSession&) = delete;
    ~NvJitLinkSession();

    // `name` is shown in nvJitLink's messages.
    Result<void> add(LinkInput type, std::string_view bytes, const std::string& name);
    Result<void> complete();
    Result<std::string> cubin() const;  // after complete()
    std::string info_log() const;       // warnings, if any

private:
    struct State;  // nvJitLink's table and the handle: CUDA types, kept in nvjitlink.cpp
    explicit NvJitLinkSession(std::unique_ptr<State> state);

    std::unique_ptr<State> state_;
};

}  // namespace kcache::driver
