# Sanitizer and libFuzzer flags for every target of the top-level directory (docs/testing.md).
# Applied to the targets once they exist, so that the target list need not mention them.
set_property(CACHE KCACHE_SANITIZE PROPERTY STRINGS "" address thread)

set(kcache_hardening_compile "")
set(kcache_hardening_link "")
if(KCACHE_SANITIZE STREQUAL "address")
  # UBSan findings abort like ASan's, so that a test fails instead of printing and passing.
  set(kcache_hardening_compile -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
  set(kcache_hardening_link -fsanitize=address,undefined)
elseif(KCACHE_SANITIZE STREQUAL "thread")
  set(kcache_hardening_compile -fsanitize=thread -fno-omit-frame-pointer)
  set(kcache_hardening_link -fsanitize=thread)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC warns that TSan does not model std::atomic_thread_fence (util/epoch.cpp uses three);
    # the warning is known and would stop a -Werror build.
    list(APPEND kcache_hardening_compile -Wno-tsan)
  endif()
elseif(NOT KCACHE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "KCACHE_SANITIZE must be address, thread or empty, not '${KCACHE_SANITIZE}'")
endif()

if(KCACHE_FUZZ)
  if(NOT KCACHE_SANITIZE STREQUAL "")
    message(FATAL_ERROR "KCACHE_FUZZ brings its own sanitizers; leave KCACHE_SANITIZE empty")
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KCACHE_FUZZ needs clang for libFuzzer: -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  # The library gets coverage hooks but no fuzzer main; the targets in fuzz/ link libFuzzer.
  set(kcache_hardening_compile -fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  set(kcache_hardening_link -fsanitize=address,undefined)
endif()

if(kcache_hardening_compile)
  get_property(kcache_targets DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS kcache_targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
      continue()
    endif()
    target_compile_options(${target} PRIVATE ${kcache_hardening_compile})
    target_link_options(${target} PRIVATE ${kcache_hardening_link})
  endforeach()
endif()

if(KCACHE_FUZZ)
  add_subdirectory(fuzz)
endif()
