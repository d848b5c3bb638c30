// SPDX-License-Identifier: Apache-2.0
// What the C API's handles are, and the one guard every C entry point runs its body in. Internal:
// the C API's own files and kcache's tests include it, nothing installed does.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "kcache/kcache.h"
#include "kcache/kernel_cache.hpp"

// The opaque types of kcache.h. Global names, since the header declares them outside any namespace.
struct kcache_cache {
    kcache::KernelCache* cache = nullptr;
    std::unique_ptr<kcache::KernelCache> owned;  // null for the borrowed global cache
};

struct kcache_module {
    kcache::ModuleHandle handle;
    std::string fingerprint;  // made once, so that kcache_module_fingerprint can lend it
};

struct kcache_kernel {
    kcache::KernelHandle handle;
};

struct kcache_exclusive {
    kcache::ExclusiveGuard guard;
};

struct kcache_source_builder {
    kcache::Source source;
    bool has_source = false;
    std::string generator_error;  // kcache_source_set_error's text
    // A setter failed (the first one's message): the lookup fails whatever the generator returns.
    bool failed = false;
    std::string failure;
};

namespace kcache::capi {

// A cache over `options` as C++ gives them (a driver of the caller's choosing): for tests that
// run the C API over a fake driver. Owned by the caller: kcache_cache_destroy.
kcache_cache* wrap(CacheOptions options);

// The C value of an Errc and of a Provenance: one each, mapped by switches that the compiler
// holds to every enumerator.
kcache_status status_of(Errc code) noexcept;
kcache_provenance provenance_of(Provenance provenance) noexcept;

// Record the calling thread's last error, and return its status. Never throw: where even the
// message cannot be kept, a fixed text stands in for it.
kcache_status fail(const Error& error) noexcept;
kcache_status fail(kcache_status status, std::string_view message) noexcept;
// KCACHE_INVALID_ARGUMENT "<function>: <what>".
kcache_status invalid(const char* function, const char* what) noexcept;

// Runs a C entry point's body: an exception becomes a status and a last error, never crosses.
template <class Body>
kcache_status guarded(const char* function, Body&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail(KCACHE_OUT_OF_MEMORY, std::string_view(function));
    } catch (const std::exception& e) {
        try {
            return fail(KCACHE_INTERNAL_ERROR,
                        std::string(function) + ": unexpected exception: " + e.what());
        } catch (...) {
            return fail(KCACHE_INTERNAL_ERROR, std::string_view(function));
        }
    } catch (...) {
        return fail(KCACHE_INTERNAL_ERROR, std::string_view(function));
    }
}

// Runs a C generator with a fresh builder: the Source it set, or why not.
Result<Source> call_generator(kcache_make_source make, void* user_data);

}  // namespace kcache::capi
