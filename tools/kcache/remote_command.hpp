// SPDX-License-Identifier: Apache-2.0
// The kcache command's remote tier: `remote ping` (reachability, round trip, whether writes are
// allowed, the configuration redacted), `push` (every local entry the remote lacks), `pull`
// (fingerprints, or every entry of an arch, into the disk tier), and `keygen` (signing keys).
// Each returns the process exit status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kcache/kernel_cache.hpp"
#include "store/cache_directory.hpp"

namespace kcache::tool {

int remote_ping(const CacheOptions& options, bool json);
int remote_push(const CacheOptions& options, const store::CacheDirectory& directory,
                std::uint64_t batch_bytes);
int remote_pull(const CacheOptions& options, std::shared_ptr<store::CacheDirectory> directory,
                const std::vector<std::string>& fingerprints, const std::string& arch,
                std::uint64_t batch_bytes);

struct KeygenOptions {
    std::string scheme = "ed25519";  // or "hmac"
    std::string private_path;        // the private key (ed25519) or the secret (hmac)
    std::string public_path;         // ed25519 only
};
int keygen(const KeygenOptions& options);

}  // namespace kcache::tool
