// SPDX-License-Identifier: Apache-2.0
// Epoch-based reclamation: lets the cache's readers walk shared structures with no lock, while
// writers defer freeing what they unlinked until no reader can still be looking at it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace kcache::util {

// Scheme (the classic three-epoch EBR):
//  - A reader pins: it publishes the global epoch it saw in its own thread record, then issues a
//    seq_cst fence so that the publication is ordered before every load of shared data it makes.
//    Unpinning is a release store of 0. No reader ever writes a line another reader writes.
//  - A writer unlinks an object, then retires it tagged with the current global epoch.
//  - The epoch advances from E to E+1 only when every pinned reader has published E. An object
//    retired at E is freed once the epoch reaches E+2: every reader that could have seen it was
//    pinned at E-1 or E, and both have since unpinned.
class EpochDomain {
public:
    class Guard {
    public:
        explicit Guard(EpochDomain& domain) noexcept;
        ~Guard();
        Guard(const Guard&) = delete;
        Guard& operator=(const Guard&) = delete;

    private:
        struct ThreadRecord* record_;
    };

    // The process-wide domain. Never destroyed: readers may run during static destruction.
    static EpochDomain& global();

    Guard pin() noexcept { return Guard(*this); }

    // Runs `deleter` once no reader pinned now can still hold what it frees.
    void retire(std::function<void()> deleter);

    // Advances the epoch where readers allow and runs the deleters that became safe.
    void collect();

    // Collects until nothing retired before this call is pending, yielding while readers stay
    // pinned. For tests and shutdown; never call it while pinned (it would wait for itself).
    void synchronize();

    std::size_t pending() const;

    EpochDomain(const EpochDomain&) = delete;
    EpochDomain& operator=(const EpochDomain&) = delete;

private:
    EpochDomain() = default;
    friend class Guard;
    struct ThreadRecord* my_record();
    bool try_advance();  // requires mutex_

    struct Retired {
        std::uint64_t epoch;
        std::function<void()> deleter;
    };

    std::atomic<std::uint64_t> epoch_{1};
    std::atomic<struct ThreadRecord*> records_{nullptr};  // push-only list, records are reused
    mutable std::mutex mutex_;                            // guards retired_
    std::vector<Retired> retired_;
};

}  // namespace kcache::util
