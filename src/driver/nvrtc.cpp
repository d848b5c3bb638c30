// SPDX-License-Identifier: Apache-2.0
#include "driver/nvrtc.hpp"

#include <cstddef>
#include <string>
#include <utility>

#include "driver/compiler_api.hpp"
#include "driver/nvjitlink_copies.hpp"

namespace kcache::driver {

// Every NVRTC call goes through the program's lease (driver/nvjitlink_copies.hpp): on the
// calling thread for the process's own NVRTC, on a copy's thread for a copy.
struct NvrtcProgram::State {
    explicit State(NvrtcLease lease_in) : lease(std::move(lease_in)) {}
    ~State() {
        if (program == nullptr) return;
        try {
            call_nvrtc([&] { return api().nvrtcDestroyProgram(&program); });
        } catch (...) {  // NOLINT(bugprone-empty-catch): a program lost is no reason to end
        }
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;

    const NvrtcApi& api() const { return lease.api(); }

    // `call()` where the lease says its NVRTC may be called: its result, or `not_run` where
    // it cannot be (a copy taken before fork(), in the child; failed() then says so).
    template <class Call>
    auto on_lease(Call call, decltype(call()) not_run) const {
        return lease.result_of(call, std::move(not_run), &forked_away);
    }

    // An NVRTC call on the lease: NVRTC_ERROR_INTERNAL_ERROR where it cannot run.
    template <class Call>
    nvrtcResult call_nvrtc(Call call) const {
        return on_lease(call, NVRTC_ERROR_INTERNAL_ERROR);
    }

    std::string error_string(nvrtcResult rc) const {
        if (forked_away) {
            return "this program's copy of NVRTC was taken before fork(); it cannot run in the "
                   "child";
        }
        return on_lease([&] { return std::string(api().nvrtcGetErrorString(rc)); },
                        std::string("NVRTC error ") + std::to_string(static_cast<int>(rc)));
    }

    // "<call>: NVRTC_ERROR_..."
    Error failed(const std::string& call, nvrtcResult rc) const {
        return Error(Errc::kCompileFailed, call + ": " + error_string(rc));
    }

    // A byte buffer NVRTC fills after telling its size: the cubin, the LTO IR.
    template <class SizeCall, class GetCall>
    Result<std::string> bytes(const char* size_name, SizeCall size_call, const char* get_name,
                              GetCall get_call) const {
        std::size_t size = 0;
        nvrtcResult rc = call_nvrtc([&] { return (api().*size_call)(program, &size); });
        if (rc != NVRTC_SUCCESS || size == 0) return failed(size_name, rc);
        std::string out(size, '\0');
        rc = call_nvrtc([&] { return (api().*get_call)(program, out.data()); });
        if (rc != NVRTC_SUCCESS) return failed(get_name, rc);
        return out;
    }

    std::string log() const {
        return on_lease(
            [&] {
                std::size_t size = 0;
                if (api().nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) {
                    return std::string();
                }
                std::string text(size, '\0');
                if (api().nvrtcGetProgramLog(program, text.data()) != NVRTC_SUCCESS)
                    return std::string();
                text.resize(size - 1);  // drop the terminating NUL
                return text;
            },
            std::string());
    }

    NvrtcLease lease;                  // destroyed after the program, which its NVRTC made
    mutable bool forked_away = false;  // a call could not run: see on_lease
    nvrtcProgram program = nullptr;
};

NvrtcProgram::NvrtcProgram(std::unique_ptr<State> state) : state_(std::move(state)) {}
NvrtcProgram::NvrtcProgram(NvrtcProgram&&) noexcept = default;
NvrtcProgram& NvrtcProgram::operator=(NvrtcProgram&&) noexcept = default;
NvrtcProgram::~NvrtcProgram() = default;

Result<NvrtcProgram> NvrtcProgram::create(
    const std::string& code, const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& headers) {
    auto lease = lease_nvrtc();
    if (!lease) return std::move(lease).error();
    auto state = std::make_unique<State>(std::move(*lease));
    std::vector<const char*> header_texts;
    std::vector<const char*> header_names;
    for (const auto& [header_name, text] : headers) {
        header_names.push_back(header_name.c_str());
        header_texts.push_back(text.c_str());
    }
    const nvrtcResult rc = state->call_nvrtc([&] {
        return state->api().nvrtcCreateProgram(&state->program, code.c_str(), name.c_str(),
                                               static_cast<int>(header_texts.size()),
                                               header_texts.data(), header_names.data());
    });
    if (rc != NVRTC_SUCCESS) return state->failed("nvrtcCreateProgram", rc);
    return NvrtcProgram(std::move(state));
}

Result<void> NvrtcProgram::add_name_expression(const std::string& expression) {
    const nvrtcResult rc = state_->call_nvrtc(
        [&] { return state_->api().nvrtcAddNameExpression(state_->program, expression.c_str()); });
    if (rc != NVRTC_SUCCESS)
        return state_->failed("nvrtcAddNameExpression(" + expression + ")", rc);
    return ok();
}

NvrtcCompile NvrtcProgram::compile(const std::vector<std::string>& options) {
    std::vector<const char*> pointers;
    pointers.reserve(options.size());
    for (const auto& option : options) pointers.push_back(option.c_str());
    const nvrtcResult rc = state_->call_nvrtc([&] {
        return state_->api().nvrtcCompileProgram(state_->program, static_cast<int>(pointers.size()),
                                                 pointers.data());
    });
    NvrtcCompile out;
    out.log = state_->log();
    if (rc == NVRTC_SUCCESS) {
        out.status = NvrtcCompile::Status::kSucceeded;
        return out;
    }
    out.status = rc == NVRTC_ERROR_INVALID_OPTION ? NvrtcCompile::Status::kInvalidOption
                                                  : NvrtcCompile::Status::kFailed;
    out.error = state_->error_string(rc);
    return out;
}

Result<std::string> NvrtcProgram::lowered_name(const std::string& expression) const {
    const char* lowered = nullptr;
    const nvrtcResult rc = state_->call_nvrtc([&] {
        return state_->api().nvrtcGetLoweredName(state_->program, expression.c_str(), &lowered);
    });
    if (rc != NVRTC_SUCCESS || lowered == nullptr) {
        return state_->failed("nvrtcGetLoweredName(" + expression + ")", rc);
    }
    return std::string(lowered);
}

Result<std::string> NvrtcProgram::cubin() const {
    return state_->bytes("nvrtcGetCUBINSize", &NvrtcApi::nvrtcGetCUBINSize, "nvrtcGetCUBIN",
                         &NvrtcApi::nvrtcGetCUBIN);
}

Result<std::string> NvrtcProgram::lto_ir() const {
    return state_->bytes("nvrtcGetLTOIRSize", &NvrtcApi::nvrtcGetLTOIRSize, "nvrtcGetLTOIR",
                         &NvrtcApi::nvrtcGetLTOIR);
}

}  // namespace kcache::driver
