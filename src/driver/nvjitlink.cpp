// SPDX-License-Identifier: Apache-2.0
#include "driver/nvjitlink.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

#include "driver/compiler_api.hpp"
#include "driver/nvjitlink_copies.hpp"

namespace kcache::driver {

struct NvJitLinkSession::State {
    explicit State(NvJitLinkLease lease_in) : lease(std::move(lease_in)) {}

    const NvJitLinkApi& api() const { return lease.api(); }

    // `call()` where the lease says its nvJitLink may be called: its result, or `not_run` where
    // it cannot be (a copy taken before fork(), in the child; failed() then says so).
    template <class Call>
    auto on_lease(Call call, decltype(call()) not_run) const {
        return lease.result_of(call, std::move(not_run), &forked_away);
    }

    // An nvJitLink call on the lease: NVJITLINK_ERROR_INTERNAL where it cannot run.
    template <class Call>
    nvJitLinkResult call_nvjitlink(Call call) const {
        return on_lease(call, NVJITLINK_ERROR_INTERNAL);
    }

    ~State() {
        if (handle == nullptr) return;
        try {
            call_nvjitlink([&] { return api().destroy(&handle); });
        } catch (...) {  // NOLINT(bugprone-empty-catch): a handle lost is no reason to end
        }
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;

    // "<step> failed (nvJitLink error N)", with the error log when there is a handle to ask.
    Error failed(const std::string& step, nvJitLinkResult rc) const {
        if (forked_away) {
            return Error(Errc::kCompileFailed,
                         step +
                             ": this link's copy of nvJitLink was taken before fork(); it "
                             "cannot run in the child");
        }
        return Error(
            Errc::kCompileFailed,
            step + " failed (nvJitLink error " + std::to_string(static_cast<int>(rc)) + ")",
            handle != nullptr ? log(true) : std::string());
    }

    std::string log(bool errors) const {
        return on_lease([&] { return read_log(errors); }, std::string());
    }

    std::string read_log(bool errors) const {
        std::size_t size = 0;
        auto size_fn = errors ? api().error_log_size : api().info_log_size;
        auto log_fn = errors ? api().error_log : api().info_log;
        if (size_fn(handle, &size) != NVJITLINK_SUCCESS || size <= 1) return {};
        std::string text(size, '\0');
        if (log_fn(handle, text.data()) != NVJITLINK_SUCCESS) return {};
        text.resize(size - 1);  // drop the terminating NUL
        return text;
    }

    NvJitLinkLease lease;              // destroyed after the handle, which its nvJitLink made
    mutable bool forked_away = false;  // a call could not run: see on_lease
    nvJitLinkHandle handle = nullptr;
};

NvJitLinkSession::NvJitLinkSession(std::unique_ptr<State> state) : state_(std::move(state)) {}
NvJitLinkSession::NvJitLinkSession(NvJitLinkSession&&) noexcept = default;
NvJitLinkSession& NvJitLinkSession::operator=(NvJitLinkSession&&) noexcept = default;
NvJitLinkSession::~NvJitLinkSession() = default;

Result<NvJitLinkSession> NvJitLinkSession::create(const std::vector<std::string>& options) {
    auto lease = lease_nvjitlink();
    if (!lease) return std::move(lease).error();
    auto state = std::make_unique<State>(std::move(*lease));
    std::vector<const char*> pointers;
    pointers.reserve(options.size());
    for (const auto& option : options) pointers.push_back(option.c_str());
    const nvJitLinkResult rc = state->call_nvjitlink([&] {
        return state->api().create(&state->handle, static_cast<std::uint32_t>(pointers.size()),
                                   pointers.data());
    });
    if (rc != NVJITLINK_SUCCESS) return state->failed("nvJitLinkCreate", rc);
    return NvJitLinkSession(std::move(state));
}

Result<void> NvJitLinkSession::add(LinkInput type, std::string_view bytes,
                                   const std::string& name) {
    const nvJitLinkInputType input =
        type == LinkInput::kPtx ? NVJITLINK_INPUT_PTX : NVJITLINK_INPUT_LTOIR;
    const nvJitLinkResult rc = state_->call_nvjitlink([&] {
        return state_->api().add_data(state_->handle, input, bytes.data(), bytes.size(),
                                      name.c_str());
    });
    if (rc != NVJITLINK_SUCCESS) return state_->failed("nvJitLinkAddData", rc);
    return ok();
}

Result<void> NvJitLinkSession::complete() {
    const nvJitLinkResult rc =
        state_->call_nvjitlink([&] { return state_->api().complete(state_->handle); });
    if (rc != NVJITLINK_SUCCESS) return state_->failed("nvJitLinkComplete", rc);
    return ok();
}

Result<std::string> NvJitLinkSession::cubin() const {
    std::size_t size = 0;
    nvJitLinkResult rc =
        state_->call_nvjitlink([&] { return state_->api().cubin_size(state_->handle, &size); });
    if (rc != NVJITLINK_SUCCESS || size == 0) {
        return state_->failed("nvJitLinkGetLinkedCubinSize", rc);
    }
    std::string out(size, '\0');
    rc = state_->call_nvjitlink([&] { return state_->api().cubin(state_->handle, out.data()); });
    if (rc != NVJITLINK_SUCCESS) return state_->failed("nvJitLinkGetLinkedCubin", rc);
    return out;
}

std::string NvJitLinkSession::info_log() const {
    return state_->log(false);
}

}  // namespace kcache::driver
