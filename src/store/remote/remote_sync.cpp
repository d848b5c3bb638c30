// SPDX-License-Identifier: Apache-2.0
#include "store/remote/remote_sync.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "store/disk_catalog.hpp"
#include "store/key_index.hpp"
#include "util/try.hpp"

namespace kcache::store::remote {
namespace {

// Keys asked per SCAN step, the most steps one server may take (a server that never ends its
// scan must not hold `kcache pull` forever), and fingerprints asked per pipelined round of a pull.
constexpr std::string_view kScanCount = "1000";
constexpr int kMaxScanSteps = 100000;
constexpr std::size_t kPullRound = 256;

// A pipeline of n requests gets the backend's timeout once per this many of them, so that a
// large batch is not cut short by a deadline meant for one request.
constexpr std::size_t kRequestsPerTimeout = 16;

std::chrono::milliseconds pipeline_deadline(const RemoteBackend& backend, std::size_t requests,
                                            std::uint64_t bytes) {
    // And once more per 16 MiB moved, for the bytes themselves.
    const std::uint64_t units = 1 + requests / kRequestsPerTimeout + (bytes >> 24);
    return backend.config().timeout * static_cast<std::int64_t>(units);
}

// The indices of `keys` grouped by the server that holds each.
std::map<RedisServerClient*, std::vector<std::size_t>> by_server(
    RemoteBackend& backend, const std::vector<std::string>& keys) {
    std::map<RedisServerClient*, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        groups[&backend.server_for(keys[i])].push_back(i);
    }
    return groups;
}

struct Pending {
    util::Fingerprint fingerprint;
    std::string entry;
    bool stored = false;  // some backend stored it now
    bool present = true;  // every writable backend had it already
    bool failed = false;
};

void push_batch(std::vector<Pending>& batch, RemoteTier& remote, PushReport& report) {
    for (const auto& backend : remote.backends()) {
        if (!backend->writable()) continue;
        std::vector<std::string> keys;
        keys.reserve(batch.size());
        for (const Pending& item : batch) keys.push_back(backend->value_key(item.fingerprint));
        for (auto& [server, indices] : by_server(*backend, keys)) {
            std::vector<std::vector<std::string_view>> exists;
            for (std::size_t i : indices) exists.push_back({"EXISTS", keys[i]});
            auto there = server->pipeline(exists, pipeline_deadline(*backend, exists.size(), 0));
            if (!there) {
                report.problems.push_back(there.error().message());
                for (std::size_t i : indices) batch[i].failed = true;
                continue;
            }
            std::vector<std::size_t> missing;
            for (std::size_t n = 0; n < indices.size(); ++n) {
                const RedisReply& reply = (*there)[n];
                if (reply.type == RedisReply::Type::kInteger && reply.integer != 0) continue;
                // What a lookup would not read is not sent.
                if (batch[indices[n]].entry.size() + 4096 > backend->config().max_value_bytes) {
                    ++report.too_large;
                    continue;
                }
                missing.push_back(indices[n]);
            }
            if (missing.empty()) continue;
            std::vector<std::string> values;
            std::uint64_t bytes = 0;
            for (std::size_t i : missing) {
                values.push_back(
                    RemoteTier::value_for(*backend, batch[i].fingerprint, batch[i].entry));
                bytes += values.back().size();
            }
            std::vector<std::vector<std::string_view>> sets;
            for (std::size_t n = 0; n < missing.size(); ++n) {
                sets.push_back({"SET", keys[missing[n]], values[n], "NX"});
            }
            auto stored = server->pipeline(sets, pipeline_deadline(*backend, sets.size(), bytes));
            if (!stored) {
                report.problems.push_back(stored.error().message());
                for (std::size_t i : missing) batch[i].failed = true;
                continue;
            }
            for (std::size_t n = 0; n < missing.size(); ++n) {
                Pending& item = batch[missing[n]];
                const RedisReply& reply = (*stored)[n];
                if (!remote.count_write(*backend, reply)) {
                    item.failed = true;
                    report.problems.push_back(backend->name() + ": " + item.fingerprint.hex() +
                                              ": " + reply.text);
                } else if (!reply.is_nil()) {
                    item.stored = true;
                    item.present = false;
                    report.bytes += values[n].size();
                }
            }
        }
    }
    for (const Pending& item : batch) {
        if (item.failed && !item.stored) {
            ++report.failed;
        } else if (item.stored) {
            ++report.uploaded;
        } else {
            ++report.present;
        }
    }
    batch.clear();
}

}  // namespace

Result<PushReport> push_entries(const CacheDirectory& directory, RemoteTier& remote,
                                std::uint64_t batch_bytes, const SyncObserver& observer) {
    const bool any_writable = std::any_of(remote.backends().begin(), remote.backends().end(),
                                          [](const auto& backend) { return backend->writable(); });
    if (!any_writable) {
        return Error(Errc::kInvalidArgument,
                     "no remote backend may be written (none configured, or all read-only)");
    }
    TRY_ASSIGN(const std::vector<CatalogEntry> entries, list_entries(directory));
    PushReport report;
    report.entries = entries.size();
    std::vector<Pending> batch;
    std::uint64_t batch_size = 0;
    for (std::size_t index = 0; index < entries.size(); ++index) {
        const CatalogEntry& entry = entries[index];
        if (observer) observer(entry.fingerprint, index, entries.size());
        const auto fingerprint = parse_fingerprint(entry.fingerprint);
        if (!entry.problem.empty() || !fingerprint) {
            ++report.bad;
            report.problems.push_back(entry.path + ": " + entry.problem);
            continue;
        }
        auto bytes = directory.read(DiskStore::relative_path_of(*fingerprint), kMaxEntryBytes);
        // Decoded again from the bytes that are sent: the file may have changed since it was
        // listed, and a bad entry must never reach the fleet.
        if (!bytes || !*bytes || !VerifiedArtifact::decode(std::string(**bytes))) {
            ++report.bad;
            report.problems.push_back(entry.path + ": changed or unreadable since it was listed");
            continue;
        }
        batch_size += (*bytes)->size();
        batch.push_back(Pending{*fingerprint, std::move(**bytes)});
        if (batch_size >= batch_bytes) {
            push_batch(batch, remote, report);
            batch_size = 0;
        }
    }
    if (!batch.empty()) push_batch(batch, remote, report);
    return report;
}

namespace {

// Every fingerprint whose value a backend holds, by SCAN over each of its servers.
std::vector<util::Fingerprint> scan_fingerprints(RemoteTier& remote, PullReport& report) {
    std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
    std::vector<util::Fingerprint> found;
    for (const auto& backend : remote.backends()) {
        const std::string prefix = backend->config().prefix + ":";
        // The prefix as a glob matches itself only.
        std::string pattern;
        for (const char c : prefix) {
            if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern += '\\';
            pattern += c;
        }
        pattern += '*';
        for (const auto& server : backend->servers()) {
            std::string cursor = "0";
            int steps = 0;
            do {
                if (++steps > kMaxScanSteps) {
                    report.problems.push_back(server->name() + ": SCAN did not end; stopped");
                    break;
                }
                auto reply =
                    server->command({"SCAN", cursor, "MATCH", pattern, "COUNT", kScanCount});
                if (!reply || reply->type != RedisReply::Type::kArray ||
                    reply->elements.size() != 2) {
                    report.problems.push_back(server->name() + ": SCAN failed" +
                                              (reply ? "" : ": " + reply.error().message()));
                    break;
                }
                cursor = reply->elements[0].text;
                for (const RedisReply& key : reply->elements[1].elements) {
                    const auto fingerprint = parse_fingerprint(std::string_view(key.text).substr(
                        std::min(key.text.size(), prefix.size())));
                    if (!key.text.starts_with(prefix) || !fingerprint) continue;  // leases
                    if (seen.emplace(fingerprint->high, fingerprint->low).second) {
                        found.push_back(*fingerprint);
                    }
                }
            } while (cursor != "0");
        }
    }
    return found;
}

// Fetches `wanted` (indices into `fingerprints`) from one backend, in rounds bounded by bytes;
// the ones fetched are taken out of `wanted`.
void pull_from(RemoteBackend& backend, RemoteTier& remote, DiskStore& disk,
               const std::vector<util::Fingerprint>& fingerprints, std::vector<std::size_t>& wanted,
               const std::string& arch, std::uint64_t batch_bytes, PullReport& report) {
    std::vector<std::string> keys;
    keys.reserve(wanted.size());
    for (std::size_t i : wanted) keys.push_back(backend.value_key(fingerprints[i]));
    std::set<std::size_t> done;
    for (auto& [server, indices] : by_server(backend, keys)) {
        // Sizes first, so that no round holds more than batch_bytes of values.
        std::vector<std::vector<std::string_view>> lengths;
        for (std::size_t n : indices) lengths.push_back({"STRLEN", keys[n]});
        auto sizes = server->pipeline(lengths, pipeline_deadline(backend, lengths.size(), 0));
        if (!sizes) {
            report.problems.push_back(sizes.error().message());
            continue;
        }
        std::size_t n = 0;
        while (n < indices.size()) {
            std::vector<std::size_t> round;
            std::uint64_t bytes = 0;
            for (; n < indices.size(); ++n) {
                const RedisReply& size = (*sizes)[n];
                if (size.type != RedisReply::Type::kInteger || size.integer <= 0) continue;
                const auto length = static_cast<std::uint64_t>(size.integer);
                if (length > backend.config().max_value_bytes) continue;  // a lookup's rule
                if (!round.empty() && bytes + length > batch_bytes) break;
                round.push_back(indices[n]);
                bytes += length;
            }
            if (round.empty()) break;
            std::vector<std::vector<std::string_view>> gets;
            gets.reserve(round.size());
            for (std::size_t k : round) gets.push_back({"GET", keys[k]});
            auto values = server->pipeline(gets, pipeline_deadline(backend, gets.size(), bytes));
            if (!values) {
                report.problems.push_back(values.error().message());
                continue;
            }
            for (std::size_t r = 0; r < round.size(); ++r) {
                const util::Fingerprint& fingerprint = fingerprints[wanted[round[r]]];
                if ((*values)[r].is_nil()) continue;
                auto artifact = remote.check_value(backend, fingerprint, (*values)[r]);
                if (!artifact) continue;
                done.insert(round[r]);
                if (!arch.empty() && artifact->key().arch != arch) {
                    ++report.skipped;
                    continue;
                }
                if (auto written = disk.put_encoded(fingerprint, artifact->encoded()); !written) {
                    report.problems.push_back(fingerprint.hex() + ": " + written.error().message());
                    continue;
                }
                ++report.fetched;
                report.bytes += artifact->encoded().size();
            }
        }
    }
    std::vector<std::size_t> left;
    for (std::size_t n = 0; n < wanted.size(); ++n) {
        if (done.count(n) == 0) left.push_back(wanted[n]);
    }
    wanted.swap(left);
}

}  // namespace

Result<PullReport> pull_entries(DiskStore& disk, RemoteTier& remote,
                                const std::vector<util::Fingerprint>& fingerprints,
                                const std::string& arch, std::uint64_t batch_bytes,
                                const SyncObserver& observer) {
    if (disk.read_only()) return disk.cache_directory()->read_only_error();
    PullReport report;
    const std::vector<util::Fingerprint> asked =
        fingerprints.empty() ? scan_fingerprints(remote, report) : fingerprints;
    report.asked = asked.size();
    for (std::size_t start = 0; start < asked.size(); start += kPullRound) {
        const std::size_t end = std::min(asked.size(), start + kPullRound);
        std::vector<std::size_t> wanted;
        for (std::size_t i = start; i < end; ++i) {
            if (observer) observer(asked[i].hex(), i, asked.size());
            if (disk.get(asked[i], DiskStore::Reading::kUncounted)) {
                ++report.present;
            } else {
                wanted.push_back(i);
            }
        }
        for (const auto& backend : remote.backends()) {
            if (wanted.empty()) break;
            pull_from(*backend, remote, disk, asked, wanted, arch, batch_bytes, report);
        }
        report.missing += wanted.size();
    }
    return report;
}

}  // namespace kcache::store::remote
