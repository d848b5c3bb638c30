// SPDX-License-Identifier: Apache-2.0
// The compile worker protocol's byte-level pieces, shared by its payloads
// (compile/worker_protocol.cpp) and its frames (compile/worker_frame.cpp): little-endian integers
// and the error every malformed input becomes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kcache/result.hpp"

namespace kcache::compile::wire {

inline Error protocol_error(const std::string& what) {
    return Error(Errc::kIoError, "compile worker protocol: " + what);
}

inline void put_u8(std::string& out, std::uint8_t value) {
    out.push_back(static_cast<char>(value));
}

inline void put_u32(std::string& out, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

inline void put_u64(std::string& out, std::uint64_t value) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

inline std::uint64_t get_le(const char* bytes, int width) {
    std::uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) {
        value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    }
    return value;
}

}  // namespace kcache::compile::wire
