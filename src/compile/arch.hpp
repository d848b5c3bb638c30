// SPDX-License-Identifier: Apache-2.0
// Which archs kcache hands its compilers, checked before any of them sees one: nvJitLink ends
// the process on a name it cannot parse ("-arch=sm_7": "fatal : Unknown arch name").
#pragma once

#include <string_view>

#include "compile/compiler.hpp"
#include "kcache/result.hpp"

namespace kcache::compile {

// sm_75 is the oldest arch CUDA 13's NVRTC and nvJitLink take (`nvcc --list-gpu-code`); up to
// sm_999, so that a newer toolkit's archs need no new kcache: one it does not know is a compile
// error naming it, which both libraries return cleanly for two- and three-digit archs.
inline constexpr int kMinArch = 75;
inline constexpr int kMaxArch = 999;
// Arch-specific targets (sm_90a, sm_100a, ...) begin with Hopper.
inline constexpr int kMinArchSpecific = 90;

// kInvalidArgument naming the arch and the accepted range.
Result<void> check_target(const Target& target);

// "sm_90", "sm_90a", "90" or "90a", checked as above.
Result<Target> parse_target(std::string_view text);

}  // namespace kcache::compile
