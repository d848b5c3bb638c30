# SPDX-License-Identifier: Apache-2.0
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

# TSan runs the suites where threads and processes meet (docs/testing.md), as one executable of
# those files: the TSan build then compiles no other test. Named "tsan:Suite.Test" in ctest.
if(KCACHE_SANITIZE STREQUAL "thread" AND KCACHE_BUILD_TESTS)
  set(kcache_tsan_test_files concurrency disk_store disk_cleanup persistent_stats stats_flusher files
    worker_pool worker_protocol epoch loaded_module_refs single_flight eviction tiers bundle
    kernel_cache spare_buffer breaker upload_queue redis_connection remote_tier)
  list(TRANSFORM kcache_tsan_test_files PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/tests/cpu/)
  list(TRANSFORM kcache_tsan_test_files APPEND _test.cpp)
  add_executable(kcache_tsan_tests EXCLUDE_FROM_ALL ${kcache_tsan_test_files})
  target_link_libraries(kcache_tsan_tests PRIVATE kcache_testing kcache_examples GTest::gtest_main)
  target_compile_definitions(kcache_tsan_tests PRIVATE
    KCACHE_TOOL_PATH="$<TARGET_FILE:kcache_tool>" KCACHE_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
  add_dependencies(kcache_tsan_tests kcache_tool)
  gtest_discover_tests(kcache_tsan_tests DISCOVERY_TIMEOUT 60 TEST_PREFIX "tsan:"
    PROPERTIES LABELS tsan)
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
