// SPDX-License-Identifier: Apache-2.0
// The frames that carry the compile worker protocol's payloads (compile/worker_protocol.hpp) over
// pipes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kcache/result.hpp"

namespace kcache::compile {

// A frame is a 16-byte header, then the payload:
//   magic "KCWP" · version (u32 LE) · payload length (u64 LE)
// The version changes with any change to a payload's layout: the worker is a separate
// executable (found beside the program or named by KCACHE_COMPILE_WORKER) and may come from
// another kcache build.
inline constexpr std::uint32_t kWorkerProtocolVersion = 3;  // 2: disk headers; 3: PTX links
inline constexpr std::size_t kFrameHeaderSize = 16;
// Nothing legitimate comes near this (a cubin is a few MiB); a larger declared size is corruption
// and is refused before anything is allocated.
inline constexpr std::uint64_t kMaxFramePayload = std::uint64_t{1} << 30;

// Writes header and payload in full, retrying on EINTR and short writes. A closed reader is a
// kIoError (EPIPE), never a SIGPIPE that would kill the process.
Result<void> write_frame(int fd, std::string_view payload);

// Reads one frame's payload. nullopt on a clean end of file before the first byte; an end of file
// inside a frame, a bad magic or version, or a length over kMaxFramePayload is an error. Memory
// grows with the bytes received, not with the declared length.
Result<std::optional<std::string>> read_frame(int fd);
// The same, failing with kIoError when the whole frame has not arrived within `timeout`.
Result<std::optional<std::string>> read_frame(int fd, std::chrono::milliseconds timeout);

}  // namespace kcache::compile
