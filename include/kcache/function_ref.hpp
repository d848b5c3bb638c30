// SPDX-License-Identifier: Apache-2.0
// A non-owning reference to a callable: lets the cache take a caller's source generator without
// allocating, since the generator only has to live for the duration of one lookup.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace kcache {

template <class Signature>
class FunctionRef;

// A callable that is not a FunctionRef itself (so copies stay copies).
template <class F, class Self, class R, class... Args>
concept ReferenceableCallable =
    !std::is_same_v<std::remove_cvref_t<F>, Self> && std::is_invocable_r_v<R, F&, Args...>;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
public:
    // Implicit, like a plain function pointer; the concept keeps it from hiding the copy
    // constructor.
    template <ReferenceableCallable<FunctionRef, R, Args...> F>
    FunctionRef(F&& f) noexcept  // NOLINT(bugprone-forwarding-reference-overload)
        : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* object, Args... args) -> R {
              return (*static_cast<std::remove_reference_t<F>*>(object))(
                  std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
    void* object_;
    R (*call_)(void*, Args...);
};

}  // namespace kcache
