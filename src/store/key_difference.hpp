// SPDX-License-Identifier: Apache-2.0
// Which part of the key material differs between a stored entry and the one wanted, as field
// names and as one readable line for a miss's log entry.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "store/artifact_format.hpp"

namespace kcache::store {

// The fields that differ, in this fixed order: "arch", "source kind", "source", "options",
// "toolchain". The caller's key and the kernel names are not compared: the nearest entry is found
// by the caller's key, and the kernel names follow from the source.
std::vector<std::string> differing_fields(const KeyMaterial& stored, const KeyMaterial& wanted);

// One line naming each differing field with both values, such as
//   options differ (stored "-O3 -DN=4", now "-O3 -DN=8"); toolchain differs (stored ..., now ...)
// Source hashes are shown by their first 12 hex digits; long values are cut around their first
// difference, with an ellipsis, so that the line stays near 300 bytes; control characters are
// escaped so that it stays one line. Empty when nothing differs.
std::string describe_difference(const KeyMaterial& stored, const KeyMaterial& wanted);

// `text` with control characters escaped (\n, \r, \t, \xNN) and, if longer than `limit` bytes,
// cut to at most `limit` bytes (7 at the least) with an ellipsis at the end. For other log lines
// that quote a caller's value: a key can hold anything, a log line must stay one line.
std::string printable(std::string_view text, std::size_t limit);

}  // namespace kcache::store
