// SPDX-License-Identifier: Apache-2.0
// The source builder a C generator fills on a miss, and the one call of a C generator: the
// builder lives on kcache's stack for that call only, so no pointer of the caller's is kept.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "capi/capi_internal.hpp"

namespace kcache::capi {
namespace {

// Runs a setter's body; its failure is recorded in the builder too, since a generator may well
// ignore a setter's status and return KCACHE_OK with a source it did not get.
template <class Body>
kcache_status setter(kcache_source_builder* source, const char* function, Body&& body) noexcept {
    if (source == nullptr) return invalid(function, "source is NULL");
    const kcache_status status = guarded(function, [&] { return body(*source); });
    if (status != KCACHE_OK && !source->failed) {
        source->failed = true;
        try {
            source->failure = kcache_last_error_message();
        } catch (...) {
            source->failure.clear();  // the flag alone still fails the lookup
        }
    }
    return status;
}

kcache_status set_bytes(kcache_source_builder* source, const char* function, SourceKind kind,
                        const void* data, std::size_t size) noexcept {
    return setter(source, function, [&](kcache_source_builder& builder) {
        if (data == nullptr) return invalid(function, "bytes are NULL");
        if (size == KCACHE_NUL_TERMINATED) size = std::strlen(static_cast<const char*>(data));
        builder.source.kind = kind;
        builder.source.bytes.assign(static_cast<const char*>(data), size);
        builder.has_source = true;
        return KCACHE_OK;
    });
}

kcache_status add_string(kcache_source_builder* source, const char* function, const char* text,
                         std::vector<std::string> Source::*list) noexcept {
    return setter(source, function, [&](kcache_source_builder& builder) {
        if (text == nullptr) return invalid(function, "string is NULL");
        (builder.source.*list).emplace_back(text);
        return KCACHE_OK;
    });
}

}  // namespace

Result<Source> call_generator(kcache_make_source make, void* user_data) {
    kcache_source_builder builder;
    const kcache_status status = make(user_data, &builder);
    if (builder.failed) return Error(Errc::kSourceFailed, "a setter failed: " + builder.failure);
    if (status != KCACHE_OK) {
        std::string message = std::string("returned ") + kcache_status_name(status);
        if (!builder.generator_error.empty()) message += ": " + builder.generator_error;
        return Error(Errc::kSourceFailed, std::move(message));
    }
    if (!builder.has_source) return Error(Errc::kSourceFailed, "returned ok but set no source");
    return std::move(builder.source);
}

}  // namespace kcache::capi

using kcache::SourceKind;
using kcache::capi::invalid;
using kcache::capi::set_bytes;
using kcache::capi::setter;

extern "C" {

kcache_status kcache_source_set_ptx(kcache_source_builder* source, const char* text,
                                    size_t length) {
    return set_bytes(source, "kcache_source_set_ptx", SourceKind::kPtx, text, length);
}

kcache_status kcache_source_set_cuda(kcache_source_builder* source, const char* code,
                                     size_t length) {
    return set_bytes(source, "kcache_source_set_cuda", SourceKind::kCuda, code, length);
}

kcache_status kcache_source_set_cubin(kcache_source_builder* source, const void* data,
                                      size_t size) {
    if (size == KCACHE_NUL_TERMINATED) {
        return setter(source, "kcache_source_set_cubin",
                      [](auto&) { return invalid("kcache_source_set_cubin", "a cubin's size"); });
    }
    return set_bytes(source, "kcache_source_set_cubin", SourceKind::kCubin, data, size);
}

kcache_status kcache_source_set_fatbin(kcache_source_builder* source, const void* data,
                                       size_t size) {
    if (size == KCACHE_NUL_TERMINATED) {
        return setter(source, "kcache_source_set_fatbin",
                      [](auto&) { return invalid("kcache_source_set_fatbin", "a fatbin's size"); });
    }
    return set_bytes(source, "kcache_source_set_fatbin", SourceKind::kFatbin, data, size);
}

kcache_status kcache_source_add_option(kcache_source_builder* source, const char* option) {
    return kcache::capi::add_string(source, "kcache_source_add_option", option,
                                    &kcache::Source::options);
}

kcache_status kcache_source_add_name_expression(kcache_source_builder* source,
                                                const char* expression) {
    return kcache::capi::add_string(source, "kcache_source_add_name_expression", expression,
                                    &kcache::Source::name_expressions);
}

kcache_status kcache_source_add_header(kcache_source_builder* source, const char* name,
                                       const char* contents, size_t length) {
    const char* function = "kcache_source_add_header";
    return setter(source, function, [&](kcache_source_builder& builder) {
        if (name == nullptr || contents == nullptr)
            return invalid(function, "name or contents NULL");
        if (length == KCACHE_NUL_TERMINATED) length = std::strlen(contents);
        builder.source.headers.emplace_back(name, std::string(contents, length));
        return KCACHE_OK;
    });
}

kcache_status kcache_source_set_arch_specific(kcache_source_builder* source, int on) {
    return setter(source, "kcache_source_set_arch_specific", [&](kcache_source_builder& builder) {
        builder.source.arch_specific = on != 0;
        return KCACHE_OK;
    });
}

kcache_status kcache_source_set_allow_disk_headers(kcache_source_builder* source, int on) {
    return setter(source, "kcache_source_set_allow_disk_headers",
                  [&](kcache_source_builder& builder) {
                      builder.source.allow_disk_headers = on != 0;
                      return KCACHE_OK;
                  });
}

kcache_status kcache_source_set_error(kcache_source_builder* source, const char* message) {
    if (source == nullptr) return invalid("kcache_source_set_error", "source is NULL");
    // Not a setter: its own failure must not turn the generator's reason into another one.
    return kcache::capi::guarded("kcache_source_set_error", [&] {
        source->generator_error = message != nullptr ? message : "";
        return KCACHE_OK;
    });
}

}  // extern "C"
