// SPDX-License-Identifier: Apache-2.0
// The headers NVRTC read, from its time trace: where the trace is written (TraceFolder) and how
// it is read (headers_in_trace, declared in compiler.hpp). NVRTC has no -M; the trace is the only
// account it gives of what it read from disk.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kcache::compile {

// The name NVRTC's trace gives the header it builds in, which every compile processes.
inline constexpr std::string_view kBuiltinHeader = "__nv_nvrtc_builtin_header.h";

// Where NVRTC writes its time trace: a fresh folder only this user may write in (mkdtemp makes
// it 0700, so nobody can plant a link or a FIFO there), removed with the trace.
class TraceFolder {
public:
    TraceFolder();
    ~TraceFolder();
    TraceFolder(const TraceFolder&) = delete;
    TraceFolder& operator=(const TraceFolder&) = delete;

    bool usable() const { return !folder_.empty(); }
    // NVRTC appends ".json" to the name it is given.
    std::string option() const { return "--fdevice-time-trace=" + folder_ + "/trace"; }
    std::string file() const { return folder_ + "/trace.json"; }
    // The trace NVRTC wrote, if it is a regular file of a bounded size.
    std::optional<std::string> read() const;

private:
    std::string folder_;
};

}  // namespace kcache::compile
