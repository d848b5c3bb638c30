// SPDX-License-Identifier: Apache-2.0
// Moving whole sets of entries between the disk tier and the remote tier, pipelined and bounded
// in bytes: `kcache push` (a CPU build machine pre-warms a fleet after `kcache compile`) and
// `kcache pull` (a node fetches what it will need before it serves).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kcache/result.hpp"
#include "store/cache_directory.hpp"
#include "store/disk_store.hpp"
#include "store/remote/remote_tier.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store::remote {

// Told of each entry as it is handled (its fingerprint, its index among `total`).
using SyncObserver =
    std::function<void(const std::string& fingerprint, std::size_t index, std::size_t total)>;

struct PushReport {
    std::uint64_t entries = 0;    // local entries looked at
    std::uint64_t uploaded = 0;   // values stored on some backend
    std::uint64_t present = 0;    // every writable backend had it already
    std::uint64_t bad = 0;        // local entries that do not decode (not uploaded)
    std::uint64_t too_large = 0;  // over a backend's max-size (not uploaded there)
    std::uint64_t failed = 0;     // refused or not sent (server down, OOM, NOPERM)
    std::uint64_t bytes = 0;      // bytes uploaded
    std::vector<std::string> problems;
};

// Uploads every entry of `directory` that a writable backend lacks (EXISTS, then SET NX for the
// missing), in pipelined batches of at most `batch_bytes`. kInvalidArgument when no backend can
// be written; a server that fails mid-way is a problem, and the rest goes on.
Result<PushReport> push_entries(const CacheDirectory& directory, RemoteTier& remote,
                                std::uint64_t batch_bytes, const SyncObserver& observer = {});

struct PullReport {
    std::uint64_t asked = 0;    // fingerprints asked for (or found by scanning)
    std::uint64_t fetched = 0;  // written to the disk tier
    std::uint64_t present = 0;  // already on disk
    std::uint64_t missing = 0;  // no backend had a good value
    std::uint64_t skipped = 0;  // of another arch than asked
    std::uint64_t bytes = 0;    // bytes written to disk
    std::vector<std::string> problems;
};

// Fetches `fingerprints` into `disk`, or, with none given, every value of `arch` the backends
// hold (found with SCAN, never KEYS), pipelined in batches of at most `batch_bytes`. Every value
// is checked as a lookup would check it.
Result<PullReport> pull_entries(DiskStore& disk, RemoteTier& remote,
                                const std::vector<util::Fingerprint>& fingerprints,
                                const std::string& arch, std::uint64_t batch_bytes,
                                const SyncObserver& observer = {});

}  // namespace kcache::store::remote
