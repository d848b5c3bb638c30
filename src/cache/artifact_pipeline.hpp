// What a cache miss does to get a loaded library: look the artifact up in the store tiers by
// fingerprint, else compile it on the host (PTX -> cubin through nvJitLink) and put it to every
// tier, then load the cubin. Sources the host cannot compile (PTX without nvJitLink) go to the
// driver's JIT, as do all sources when host compilation is off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "driver/driver.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"
#include "store/artifact_store.hpp"

namespace kcache::cache {

class ArtifactPipeline {
public:
    enum class Origin { kDriverJit, kHostCompile, kMemoryTier, kDiskTier, kBinary };

    struct Built {
        driver::LibraryId library = nullptr;
        Origin origin = Origin::kDriverJit;
        std::uint64_t compile_ns = 0;  // host compile or driver JIT; 0 for a tier hit
    };

    // `store` may be null (no tiers); `host_compile` off sends PTX to the driver's JIT.
    ArtifactPipeline(driver::Driver& driver, std::shared_ptr<store::ArtifactStore> store,
                     bool host_compile)
        : driver_(driver), store_(std::move(store)), host_compile_(host_compile) {}

    Result<Built> build(std::string_view key, int arch, const Source& source);

    // The loadable artifact without loading it (no GPU needed): what build() loads.
    struct Produced {
        Source loadable;
        Origin origin = Origin::kDriverJit;
        std::uint64_t compile_ns = 0;
    };
    Result<Produced> produce(std::string_view key, int arch, const Source& source);

    store::ArtifactStore* store() const noexcept { return store_.get(); }

private:
    driver::Driver& driver_;
    std::shared_ptr<store::ArtifactStore> store_;
    const bool host_compile_;
};

const char* origin_name(ArtifactPipeline::Origin origin) noexcept;

}  // namespace kcache::cache
