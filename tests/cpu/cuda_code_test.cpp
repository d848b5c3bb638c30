// SPDX-License-Identifier: Apache-2.0
// CudaCode on the CPU, over a stub CudaApi that models contexts (told apart by ID, addresses
// reused), modules bound to the context current at their load, and libraries for every context:
// which copy of the code each context launches from, when the library is made, and when the
// bytes let go at the load are read back.
#include "driver/cuda_code.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "driver/cuda_api.hpp"
#include "driver/driver.hpp"
#include "kcache/result.hpp"
#include "testing/stub_cuda_api.hpp"

namespace kcache::driver {
namespace {

using fakes::current_context;
using fakes::fake_handle;
using fakes::layouts;
using fakes::stub;
using fakes::stub_api;
using fakes::StubState;

// "ok", or the error's code by name, for readable comparisons.
template <class T>
std::string outcome(const Result<T>& result) {
    return result ? "ok" : errc_name(result.error().code());
}

bool same_layout(const std::vector<KernelParam>& got, const std::vector<KernelParam>& want) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i].offset != want[i].offset || got[i].size != want[i].size) return false;
    }
    return true;
}

class CudaCodeTest : public ::testing::Test {
protected:
    void SetUp() override {
        std::lock_guard lock(stub.mutex);
        stub.state = StubState{};
        current_context = nullptr;
    }
    void TearDown() override { current_context = nullptr; }

    static CUcontext make_context() {
        std::lock_guard lock(stub.mutex);
        CUcontext context = fake_handle<CUcontext>(stub.state.next_context);
        stub.state.next_context += 0x1000;
        stub.state.contexts[context] = StubState::Context{stub.state.next_id++, true};
        return context;
    }
    static void destroy(CUcontext context) {
        std::lock_guard lock(stub.mutex);
        stub.state.contexts.at(context).alive = false;
    }
    // A new context, with a new ID, at the address of a destroyed one.
    static CUcontext reuse_address(CUcontext destroyed) {
        std::lock_guard lock(stub.mutex);
        StubState::Context& slot = stub.state.contexts.at(destroyed);
        EXPECT_FALSE(slot.alive);
        slot = StubState::Context{stub.state.next_id++, true};
        return destroyed;
    }
    static void make_current(CUcontext context) { current_context = context; }

    static StubState::Calls calls() {
        std::lock_guard lock(stub.mutex);
        return stub.state.calls;
    }
    static StubState::LibraryLoad library_load(std::size_t index = 0) {
        std::lock_guard lock(stub.mutex);
        return stub.state.library_loads.at(index);
    }
    static CUmodule only_module() {
        std::lock_guard lock(stub.mutex);
        EXPECT_EQ(stub.state.modules.size(), 1u);
        return stub.state.modules.empty() ? nullptr : stub.state.modules.begin()->first;
    }
    static CUlibrary only_library() {
        std::lock_guard lock(stub.mutex);
        EXPECT_EQ(stub.state.libraries.size(), 1u);
        return stub.state.libraries.empty() ? nullptr : stub.state.libraries.begin()->first;
    }
    // What the stub handed out for `name`; null if it was never asked.
    static CUfunction module_function(CUmodule module, const std::string& name) {
        std::lock_guard lock(stub.mutex);
        auto& functions = stub.state.modules.at(module).functions;
        auto found = functions.find(name);
        return found == functions.end() ? nullptr : found->second;
    }
    // The library's kernel for `name` as launchable() gives it, cast to a CUfunction.
    static CUfunction library_kernel(CUlibrary library, const std::string& name) {
        std::lock_guard lock(stub.mutex);
        auto& kernels = stub.state.libraries.at(library).kernels;
        auto found = kernels.find(name);
        return found == kernels.end() ? nullptr : reinterpret_cast<CUfunction>(found->second);
    }
    static std::vector<CUmodule> unloaded_modules() {
        std::lock_guard lock(stub.mutex);
        return stub.state.unloaded_modules;
    }

    // A cubin's bytes, kept by their owner.
    static Image image(const std::string& text = "a fake cubin, long enough to be on the heap") {
        auto owner = std::make_shared<const std::string>(text);
        return Image{*owner, owner};
    }
    // A way back to the bytes that counts its calls.
    ImageSource counted_again(const std::string& text = "the same cubin, read back from disk") {
        return [this, text]() -> Result<Image> {
            ++again_calls;
            return image(text);
        };
    }
    ImageSource failing_again() {
        return [this]() -> Result<Image> {
            ++again_calls;
            return Error(Errc::kArtifactGone, "entry no longer in the cache's tiers");
        };
    }
    std::unique_ptr<CudaCode> load(ImageSource again = {}, bool keep = true) {
        auto code = CudaCode::load_binary(api, image(), std::move(again), keep);
        EXPECT_TRUE(code.ok()) << (code ? "" : code.error().describe());
        return code ? std::move(code).value() : nullptr;
    }

    // Loaded code, and its kernel "scale" resolved in the current context (null if either failed).
    struct Loaded {
        std::unique_ptr<CudaCode> code;
        CudaKernel* scale = nullptr;
    };
    Loaded load_with_scale(ImageSource again = {}, bool keep = true) {
        Loaded loaded{load(std::move(again), keep)};
        if (loaded.code == nullptr) return loaded;
        auto kernel = loaded.code->kernel("scale");
        EXPECT_TRUE(kernel.ok()) << (kernel ? "" : kernel.error().describe());
        if (kernel) loaded.scale = *kernel;
        return loaded;
    }

    CudaApi api = stub_api();
    std::atomic<int> again_calls{0};
};

TEST_F(CudaCodeTest, BinaryLoadsAsAModuleIntoTheCurrentContext) {
    CUcontext a = make_context();
    make_current(a);
    auto code = load();
    ASSERT_NE(code, nullptr);
    EXPECT_EQ(calls().module_load_data, 1);
    EXPECT_EQ(calls().library_load_data, 0);
    std::lock_guard lock(stub.mutex);
    ASSERT_EQ(stub.state.modules.size(), 1u);
    EXPECT_EQ(stub.state.modules.begin()->second.context, a);
}

TEST_F(CudaCodeTest, HomeContextLaunchesTheModulesFunction) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    auto kernel = code->kernel("scale");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    auto launchable = code->launchable(**kernel);
    ASSERT_TRUE(launchable.ok()) << launchable.error().describe();
    CUfunction expected = module_function(only_module(), "scale");
    ASSERT_NE(expected, nullptr);
    EXPECT_EQ(*launchable, expected);
    EXPECT_EQ(calls().library_load_data, 0) << "one context needs no library";
    EXPECT_EQ(calls().library_get_kernel, 0);
}

TEST_F(CudaCodeTest, ALaunchAtHomeAsksTheDriverOnlyTheCurrentContextsId) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    auto kernel = code->kernel("scale");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const auto before = calls();
    ASSERT_TRUE(code->launchable(**kernel).ok());
    EXPECT_EQ(calls().ctx_get_id - before.ctx_get_id, 1);
    EXPECT_EQ(calls().ctx_get_current - before.ctx_get_current, 0)
        << "a launch pays one driver call to know where it is";
}

TEST_F(CudaCodeTest, AnotherContextLaunchesTheLibrarysKernelMadeOnce) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    make_current(make_context());
    auto scale = code->kernel("scale");
    ASSERT_TRUE(scale.ok()) << scale.error().describe();
    EXPECT_EQ(calls().library_load_data, 1);
    auto launchable = code->launchable(**scale);
    ASSERT_TRUE(launchable.ok()) << launchable.error().describe();
    EXPECT_EQ(*launchable, library_kernel(only_library(), "scale"));

    auto add = code->kernel("add");  // a second kernel, and a third context
    ASSERT_TRUE(add.ok());
    make_current(make_context());
    auto elsewhere = code->launchable(**add);
    ASSERT_TRUE(elsewhere.ok());
    EXPECT_EQ(*elsewhere, library_kernel(only_library(), "add"));
    EXPECT_EQ(calls().library_load_data, 1) << "one library serves every other context";
}

TEST_F(CudaCodeTest, KernelFirstResolvedElsewhereLaunchesFromTheModuleAtHome) {
    CUcontext home = make_context();
    make_current(home);
    auto code = load();
    ASSERT_NE(code, nullptr);
    make_current(make_context());
    auto kernel = code->kernel("scale");
    ASSERT_TRUE(kernel.ok());
    const int resolved_before = calls().module_get_function;

    make_current(home);
    auto first = code->launchable(**kernel);
    auto second = code->launchable(**kernel);
    ASSERT_TRUE(first.ok()) << first.error().describe();
    ASSERT_TRUE(second.ok());
    const CUfunction from_module = module_function(only_module(), "scale");
    ASSERT_NE(from_module, nullptr) << "the module's function is resolved at the first launch";
    EXPECT_EQ(*first, from_module);
    EXPECT_EQ(*second, from_module);
    EXPECT_NE(*first, library_kernel(only_library(), "scale"))
        << "two copies of one code in one context would split its __device__ variables";
    EXPECT_EQ(calls().module_get_function, resolved_before + 1) << "resolved once, then kept";
}

TEST_F(CudaCodeTest, NewContextAtTheHomesAddressLaunchesFromTheLibrary) {
    CUcontext home = make_context();
    make_current(home);
    auto [code, scale] = load_with_scale();
    ASSERT_NE(scale, nullptr);
    const CUfunction stale = module_function(only_module(), "scale");

    destroy(home);
    make_current(reuse_address(home));
    auto launchable = code->launchable(*scale);
    ASSERT_TRUE(launchable.ok()) << launchable.error().describe();
    EXPECT_NE(*launchable, stale) << "the module died with the context that had this address";
    EXPECT_EQ(*launchable, library_kernel(only_library(), "scale"));
    EXPECT_EQ(calls().library_load_data, 1);
}

TEST_F(CudaCodeTest, DestructorUnloadsTheModuleWhileTheHomeLives) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    const CUmodule module = only_module();
    make_current(nullptr);  // the home need not be current, only alive
    code.reset();
    EXPECT_EQ(unloaded_modules(), std::vector<CUmodule>{module});
    EXPECT_EQ(calls().library_unload, 0) << "no library was made";
}

TEST_F(CudaCodeTest, DestructorLeavesTheModuleOfADestroyedHome) {
    CUcontext home = make_context();
    make_current(home);
    auto code = load();
    ASSERT_NE(code, nullptr);
    destroy(home);
    make_current(nullptr);
    code.reset();
    EXPECT_EQ(calls().module_unload, 0) << "the module died with its context";
}

TEST_F(CudaCodeTest, DestructorLeavesTheModuleWhenTheHomesAddressHasANewContext) {
    CUcontext home = make_context();
    make_current(home);
    auto code = load();
    ASSERT_NE(code, nullptr);
    destroy(home);
    reuse_address(home);
    code.reset();
    EXPECT_EQ(calls().module_unload, 0) << "a stale handle must not reach the new context";
}

TEST_F(CudaCodeTest, DestructorUnloadsTheLibraryItMade) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    make_current(make_context());
    ASSERT_TRUE(code->kernel("scale").ok());
    const CUlibrary library = only_library();
    code.reset();
    EXPECT_EQ(calls().library_unload, 1);
    EXPECT_EQ(calls().module_unload, 1);
    std::lock_guard lock(stub.mutex);
    EXPECT_FALSE(stub.state.libraries.at(library).loaded);
}

TEST_F(CudaCodeTest, NoCurrentContextIsNoContextWithoutReadingBack) {
    make_current(make_context());
    auto [code, scale] = load_with_scale(counted_again(), /*keep=*/false);
    ASSERT_NE(scale, nullptr);

    make_current(nullptr);
    EXPECT_EQ(outcome(code->kernel("add")), errc_name(Errc::kNoContext));
    EXPECT_EQ(outcome(code->launchable(*scale)), errc_name(Errc::kNoContext));
    EXPECT_EQ(again_calls.load(), 0);
    EXPECT_EQ(calls().library_load_data, 0);
}

TEST_F(CudaCodeTest, DestroyedCurrentHomeIsNoContext) {
    CUcontext home = make_context();
    make_current(home);
    auto [code, scale] = load_with_scale(counted_again(), /*keep=*/false);
    ASSERT_NE(scale, nullptr);

    destroy(home);  // and still current, as a released primary context stays
    EXPECT_EQ(outcome(code->launchable(*scale)), errc_name(Errc::kNoContext));
    EXPECT_EQ(outcome(code->kernel("add")), errc_name(Errc::kNoContext));
    EXPECT_EQ(again_calls.load(), 0);
    EXPECT_EQ(calls().library_load_data, 0);
}

// A destroyed context that is not the home: no read-back, no library for it, and no failed JIT
// (which would break the entry for every context).
TEST_F(CudaCodeTest, DestroyedCurrentContextElsewhereIsNoContext) {
    make_current(make_context());
    auto [code, scale] = load_with_scale(counted_again(), /*keep=*/false);
    ASSERT_NE(scale, nullptr);
    CUcontext other = make_context();
    make_current(other);
    destroy(other);  // still current
    EXPECT_EQ(outcome(code->launchable(*scale)), errc_name(Errc::kNoContext));
    EXPECT_EQ(outcome(code->kernel("add")), errc_name(Errc::kNoContext));
    EXPECT_EQ(again_calls.load(), 0);
    EXPECT_EQ(calls().library_load_data, 0);
}

TEST_F(CudaCodeTest, UnidentifiableCurrentHomeIsADriverError) {
    make_current(make_context());
    auto [code, scale] = load_with_scale(counted_again(), /*keep=*/false);
    ASSERT_NE(scale, nullptr);
    {
        std::lock_guard lock(stub.mutex);
        stub.state.ctx_get_id_error = CUDA_ERROR_INVALID_CONTEXT;
    }
    EXPECT_EQ(outcome(code->launchable(*scale)), errc_name(Errc::kDriverError));
    EXPECT_EQ(again_calls.load(), 0);
    EXPECT_EQ(calls().library_load_data, 0);
}

TEST_F(CudaCodeTest, LetGoBytesAreReadBackOnceForAnotherContext) {
    make_current(make_context());
    auto [code, scale] = load_with_scale(counted_again("bytes from the way back"), /*keep=*/false);
    ASSERT_NE(scale, nullptr);
    EXPECT_EQ(again_calls.load(), 0) << "the home context needs no bytes";

    make_current(make_context());
    ASSERT_TRUE(code->launchable(*scale).ok());
    EXPECT_EQ(again_calls.load(), 1);
    EXPECT_EQ(library_load().bytes, "bytes from the way back");
    ASSERT_TRUE(code->kernel("add").ok());
    make_current(make_context());
    ASSERT_TRUE(code->launchable(*scale).ok());
    EXPECT_EQ(again_calls.load(), 1);
    EXPECT_EQ(calls().library_load_data, 1);
}

TEST_F(CudaCodeTest, EightContextsRacingReadBackOnce) {
    make_current(make_context());
    auto code = CudaCode::load_binary(
        api, image(),
        [this]() -> Result<Image> {
            ++again_calls;
            // A slow disk, so that the other threads arrive while the first reads.
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return image("bytes from the way back");
        },
        /*keep=*/false);
    ASSERT_TRUE(code.ok());
    auto kernel = (*code)->kernel("scale");
    ASSERT_TRUE(kernel.ok());

    constexpr int kThreads = 8;
    std::vector<CUcontext> contexts;
    contexts.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) contexts.push_back(make_context());
    std::vector<CUfunction> launched(kThreads, nullptr);
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            make_current(contexts[t]);
            start.arrive_and_wait();
            auto function = (*code)->launchable(**kernel);
            if (function) launched[t] = *function;
        });
    }
    for (auto& thread : threads) thread.join();

    EXPECT_EQ(again_calls.load(), 1);
    EXPECT_EQ(calls().library_load_data, 1);
    const CUfunction expected = library_kernel(only_library(), "scale");
    ASSERT_NE(expected, nullptr);
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(launched[t], expected) << "thread " << t;
}

TEST_F(CudaCodeTest, FailedReadBackIsArtifactGoneAndNotRetried) {
    CUcontext home = make_context();
    make_current(home);
    auto [code, scale] = load_with_scale(failing_again(), /*keep=*/false);
    ASSERT_NE(scale, nullptr);

    make_current(make_context());
    EXPECT_EQ(outcome(code->launchable(*scale)), errc_name(Errc::kArtifactGone));
    EXPECT_EQ(outcome(code->launchable(*scale)), errc_name(Errc::kArtifactGone));
    EXPECT_EQ(outcome(code->kernel("add")), errc_name(Errc::kArtifactGone));
    EXPECT_EQ(again_calls.load(), 1) << "a launch path must not read the disk again";
    EXPECT_EQ(calls().library_load_data, 0);

    make_current(home);
    EXPECT_TRUE(code->launchable(*scale).ok()) << "the home still has its module";
}

TEST_F(CudaCodeTest, KeptBytesAreNeverReadBack) {
    make_current(make_context());
    auto code = CudaCode::load_binary(api, image("the bytes given at the load"), counted_again(),
                                      /*keep=*/true);
    ASSERT_TRUE(code.ok());
    make_current(make_context());
    ASSERT_TRUE((*code)->kernel("scale").ok());
    EXPECT_EQ(again_calls.load(), 0);
    EXPECT_EQ(library_load().bytes, "the bytes given at the load");
}

TEST_F(CudaCodeTest, ParamsAtHomeAskTheModulesFunction) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    auto kernel = code->kernel("add");
    ASSERT_TRUE(kernel.ok());
    auto params = code->params(**kernel);
    ASSERT_TRUE(params.ok()) << params.error().describe();
    EXPECT_TRUE(same_layout(*params, layouts().at("add")));
    EXPECT_GT(calls().func_get_param_info, 0);
    EXPECT_EQ(calls().kernel_get_param_info, 0);
    EXPECT_EQ(calls().library_load_data, 0);
}

TEST_F(CudaCodeTest, ParamsElsewhereAskTheLibrarysKernel) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    auto kernel = code->kernel("add");  // resolved at home: a module function
    ASSERT_TRUE(kernel.ok());
    make_current(make_context());
    auto params = code->params(**kernel);
    ASSERT_TRUE(params.ok()) << params.error().describe();
    EXPECT_TRUE(same_layout(*params, layouts().at("add")));
    EXPECT_GT(calls().kernel_get_param_info, 0);
    EXPECT_EQ(calls().func_get_param_info, 0);
}

TEST_F(CudaCodeTest, ParamsAfterTheHomeIsDestroyedGoThroughTheLibrary) {
    CUcontext home = make_context();
    make_current(home);
    auto [code, scale] = load_with_scale();
    ASSERT_NE(scale, nullptr);
    destroy(home);

    make_current(make_context());
    auto params = code->params(*scale);
    ASSERT_TRUE(params.ok()) << params.error().describe();
    EXPECT_TRUE(same_layout(*params, layouts().at("scale")));
    EXPECT_EQ(calls().func_get_param_info, 0) << "the module's function died with its context";

    make_current(reuse_address(home));
    auto at_old_address = code->params(*scale);
    ASSERT_TRUE(at_old_address.ok()) << at_old_address.error().describe();
    EXPECT_TRUE(same_layout(*at_old_address, layouts().at("scale")));
    EXPECT_EQ(calls().func_get_param_info, 0);
}

TEST_F(CudaCodeTest, FailedParamQueryIsADriverError) {
    make_current(make_context());
    auto [code, scale] = load_with_scale();
    ASSERT_NE(scale, nullptr);
    {
        std::lock_guard lock(stub.mutex);
        stub.state.func_param_error = CUDA_ERROR_UNKNOWN;
        stub.state.kernel_param_error = CUDA_ERROR_UNKNOWN;
    }
    EXPECT_EQ(outcome(code->params(*scale)), errc_name(Errc::kDriverError));
    make_current(make_context());
    EXPECT_EQ(outcome(code->params(*scale)), errc_name(Errc::kDriverError));
}

TEST_F(CudaCodeTest, ParamsWithoutTheDriversQueryAreUnsupported) {
    CUcontext home = make_context();
    make_current(home);
    auto [code, scale] = load_with_scale();
    ASSERT_NE(scale, nullptr);
    api.cuFuncGetParamInfo = nullptr;  // a driver before 12.4; the code holds `api` by reference
    api.cuKernelGetParamInfo = nullptr;
    EXPECT_EQ(outcome(code->params(*scale)), errc_name(Errc::kUnsupported));
    make_current(make_context());
    EXPECT_EQ(outcome(code->params(*scale)), errc_name(Errc::kUnsupported));
}

TEST_F(CudaCodeTest, LoadWithoutAContextMakesOnlyTheLibrary) {
    auto code = load(counted_again(), /*keep=*/false);
    ASSERT_NE(code, nullptr);
    EXPECT_EQ(calls().library_load_data, 1);
    EXPECT_EQ(calls().module_load_data, 0);

    make_current(make_context());
    auto kernel = code->kernel("scale");
    ASSERT_TRUE(kernel.ok());
    auto launchable = code->launchable(**kernel);
    ASSERT_TRUE(launchable.ok());
    EXPECT_EQ(*launchable, library_kernel(only_library(), "scale"));
    EXPECT_EQ(calls().module_load_data, 0);
    EXPECT_EQ(again_calls.load(), 0) << "the library was made from the bytes given";
    code.reset();
    EXPECT_EQ(calls().library_unload, 1);
    EXPECT_EQ(calls().module_unload, 0);
}

TEST_F(CudaCodeTest, LoadWhereTheContextCannotBeIdentifiedMakesOnlyTheLibrary) {
    CUcontext destroyed = make_context();
    make_current(destroyed);
    destroy(destroyed);
    auto code = load(counted_again(), /*keep=*/false);
    ASSERT_NE(code, nullptr);
    EXPECT_EQ(calls().module_load_data, 0);
    EXPECT_EQ(calls().library_load_data, 1);

    make_current(make_context());
    auto kernel = code->kernel("scale");
    ASSERT_TRUE(kernel.ok());
    auto launchable = code->launchable(**kernel);
    ASSERT_TRUE(launchable.ok());
    EXPECT_EQ(*launchable, library_kernel(only_library(), "scale"));
    EXPECT_EQ(again_calls.load(), 0);
}

TEST_F(CudaCodeTest, LoadOnADriverWithoutContextIdsMakesOnlyTheLibrary) {
    api.cuCtxGetId = nullptr;  // before 12.0: contexts cannot be told apart
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    EXPECT_EQ(calls().module_load_data, 0);
    EXPECT_EQ(calls().library_load_data, 1);
    auto kernel = code->kernel("scale");
    ASSERT_TRUE(kernel.ok());
    auto launchable = code->launchable(**kernel);
    ASSERT_TRUE(launchable.ok());
    EXPECT_EQ(*launchable, library_kernel(only_library(), "scale"));
}

TEST_F(CudaCodeTest, PtxLoadsAsALibraryThroughTheJit) {
    make_current(make_context());
    std::unique_ptr<CudaCode> code;
    {
        std::string ptx = ".version 8.0\n.target sm_90\n// the caller's PTX";
        auto loaded = CudaCode::load_ptx(api, ptx);
        ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
        code = std::move(loaded).value();
    }  // the caller's PTX is gone: the library was made at the load
    EXPECT_EQ(calls().library_load_data, 1);
    EXPECT_EQ(calls().module_load_data, 0);
    const StubState::LibraryLoad load = library_load();
    EXPECT_EQ(load.bytes, ".version 8.0\n.target sm_90\n// the caller's PTX");
    EXPECT_EQ(load.jit_options, (std::vector<CUjit_option>{
                                    CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                                    CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES}));
    EXPECT_EQ(load.library_options, 0u) << "only binaries can be preserved";

    auto kernel = code->kernel("scale");
    ASSERT_TRUE(kernel.ok());
    auto here = code->launchable(**kernel);
    make_current(make_context());
    auto there = code->launchable(**kernel);
    ASSERT_TRUE(here.ok());
    ASSERT_TRUE(there.ok());
    EXPECT_EQ(*here, library_kernel(only_library(), "scale"));
    EXPECT_EQ(*there, *here);
    EXPECT_EQ(calls().library_load_data, 1);
    EXPECT_EQ(calls().module_load_data, 0);
}

// Bytes at a 16-byte boundary, or one past it, kept by their owner.
Image image_at(std::size_t offset) {
    struct alignas(16) Buffer {
        char bytes[64] = "";
    };
    auto buffer = std::make_shared<Buffer>();
    std::snprintf(buffer->bytes + offset, sizeof(buffer->bytes) - offset, "an aligned cubin");
    std::string_view bytes(buffer->bytes + offset);
    return Image{bytes, std::shared_ptr<const void>(buffer, buffer->bytes)};
}

TEST_F(CudaCodeTest, AlignedImageIsPreservedForTheLibrary) {
    Image aligned = image_at(0);
    const void* bytes = aligned.bytes.data();
    auto code = CudaCode::load_binary(api, std::move(aligned), {}, /*keep=*/true);
    ASSERT_TRUE(code.ok());
    EXPECT_TRUE(library_load().preserved);
    EXPECT_EQ(library_load().code, bytes) << "used in place, not copied";
}

TEST_F(CudaCodeTest, LibraryMadeLaterFromKeptBytesIsPreserved) {
    make_current(make_context());
    auto code = CudaCode::load_binary(api, image_at(0), {}, /*keep=*/true);
    ASSERT_TRUE(code.ok());
    make_current(make_context());
    ASSERT_TRUE((*code)->kernel("scale").ok());
    EXPECT_TRUE(library_load().preserved);
}

TEST_F(CudaCodeTest, UnalignedImageIsNotPreserved) {
    auto code = CudaCode::load_binary(api, image_at(1), {}, /*keep=*/true);
    ASSERT_TRUE(code.ok());
    EXPECT_FALSE(library_load().preserved);
    EXPECT_EQ(library_load().library_options, 0u);
}

TEST_F(CudaCodeTest, UnknownKernelIsKernelNotFound) {
    make_current(make_context());
    auto code = load();
    ASSERT_NE(code, nullptr);
    EXPECT_EQ(outcome(code->kernel("missing")), errc_name(Errc::kKernelNotFound));
    make_current(make_context());
    EXPECT_EQ(outcome(code->kernel("missing")), errc_name(Errc::kKernelNotFound));
}

}  // namespace
}  // namespace kcache::driver
