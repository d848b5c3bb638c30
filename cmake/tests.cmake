# SPDX-License-Identifier: Apache-2.0
# The test suites (docs/testing.md); included when KCACHE_BUILD_TESTS is on.
enable_testing()
find_package(GTest REQUIRED)
include(GoogleTest)

file(GLOB KCACHE_CPU_TEST_SOURCES CONFIGURE_DEPENDS tests/cpu/*.cpp)
add_executable(kcache_cpu_tests ${KCACHE_CPU_TEST_SOURCES})
target_link_libraries(kcache_cpu_tests PRIVATE kcache_testing kcache_examples GTest::gtest_main)
# The command's output writer (tools/kcache/output.cpp) is tested here too.
target_sources(kcache_cpu_tests PRIVATE tools/kcache/output.cpp)
target_include_directories(kcache_cpu_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
  ${NLOHMANN_JSON_INCLUDE_DIR})
# The worker pool tests start the real `kcache compile-worker`.
target_compile_definitions(kcache_cpu_tests PRIVATE KCACHE_TOOL_PATH="$<TARGET_FILE:kcache_tool>")
# config_test.cpp holds README.md's settings table to the one the code makes.
target_compile_definitions(kcache_cpu_tests PRIVATE KCACHE_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
add_dependencies(kcache_cpu_tests kcache_tool)
gtest_discover_tests(kcache_cpu_tests DISCOVERY_TIMEOUT 60)

# The C API's suite (tests/c): strict C99 programs linking the shared library, as a C user's
# would; one ctest test (CApi.<name>) per `static int Name(void)` of each file. Not in fuzz builds:
# clang links the C++ sanitizer runtimes that libkcache.so then needs into C++ programs only.
enable_language(C)
set(KCACHE_C_TEST_SOURCES "")
if(NOT KCACHE_FUZZ)
  file(GLOB KCACHE_C_TEST_SOURCES CONFIGURE_DEPENDS tests/c/*_test.c)
endif()
foreach(source ${KCACHE_C_TEST_SOURCES})
  get_filename_component(suite ${source} NAME_WE)
  add_executable(kcache_c_${suite} ${source} tests/c/check.c)
  target_link_libraries(kcache_c_${suite} PRIVATE kcache Threads::Threads)
  set_target_properties(kcache_c_${suite} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(kcache_c_${suite} PRIVATE -Wall -Wextra -pedantic -Werror)
  target_compile_definitions(kcache_c_${suite} PRIVATE KCACHE_EXPECTED_VERSION="${PROJECT_VERSION}")
  file(STRINGS ${source} c_tests REGEX "^static int [A-Z][A-Za-z0-9]*\\(void\\)")
  foreach(c_test ${c_tests})
    string(REGEX REPLACE "^static int ([A-Za-z0-9]+).*" "\\1" c_test "${c_test}")
    add_test(NAME CApi.${c_test} COMMAND kcache_c_${suite} ${c_test})
    set_tests_properties(CApi.${c_test} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endforeach()

# The Rust crate's tests (bindings/rust, docs/rust.md) against the libkcache.so built here; its
# GPU tests skip without a driver. Not in sanitizer or fuzz builds, as for the C suite.
find_program(KCACHE_CARGO cargo HINTS $ENV{HOME}/.cargo/bin)
if(KCACHE_CARGO AND KCACHE_SANITIZE STREQUAL "" AND NOT KCACHE_FUZZ)
  add_test(NAME kcache_rust COMMAND ${CMAKE_COMMAND} -E env KCACHE_LIB_DIR=$<TARGET_FILE_DIR:kcache>
    CARGO_TARGET_DIR=${CMAKE_CURRENT_BINARY_DIR}/cargo ${KCACHE_CARGO} test --offline
    --manifest-path ${CMAKE_CURRENT_SOURCE_DIR}/bindings/rust/Cargo.toml)
  set_tests_properties(kcache_rust PROPERTIES TIMEOUT 600)
elseif(NOT KCACHE_CARGO)
  add_test(NAME kcache_rust COMMAND sh -c "echo 'skipped: no cargo (scripts/install-deps.sh installs it)'; exit 77")
  set_tests_properties(kcache_rust PROPERTIES SKIP_RETURN_CODE 77)
endif()

add_executable(kcache_gpu_tests tests/gpu/gpu_test.cpp)
target_link_libraries(kcache_gpu_tests PRIVATE kcache_testing kcache_examples GTest::gtest_main)
gtest_discover_tests(kcache_gpu_tests DISCOVERY_TIMEOUT 60)

# The demo's own cache directory, so that tests never touch the user's.
set(KCACHE_TEST_DEMO_DIR ${CMAKE_CURRENT_BINARY_DIR}/demo-cache)
add_test(NAME kcache_tool_demo COMMAND kcache_tool demo)
set_tests_properties(kcache_tool_demo PROPERTIES
  PASS_REGULAR_EXPRESSION "no GPU here|results match"
  ENVIRONMENT KCACHE_DIR=${KCACHE_TEST_DEMO_DIR}/plain)
add_test(NAME kcache_tool_demo_json COMMAND kcache_tool demo --json)
set_tests_properties(kcache_tool_demo_json PROPERTIES
  PASS_REGULAR_EXPRESSION "\"launched\": [0-9]+"
  ENVIRONMENT KCACHE_DIR=${KCACHE_TEST_DEMO_DIR}/json)
# Run twice on a fresh directory: the second run compiles nothing and reads the disk.
add_test(NAME kcache_tool_demo_second_run_compiles_nothing
  COMMAND sh -c "rm -rf '${KCACHE_TEST_DEMO_DIR}/twice' && $<TARGET_FILE:kcache_tool> demo --json >/dev/null && $<TARGET_FILE:kcache_tool> demo --json")
set_tests_properties(kcache_tool_demo_second_run_compiles_nothing PROPERTIES
  PASS_REGULAR_EXPRESSION "\"compiles\": 0,\n  \"memory_hits\": [0-9]+,\n  \"disk_hits\": [1-9]"
  ENVIRONMENT KCACHE_DIR=${KCACHE_TEST_DEMO_DIR}/twice)
add_test(NAME kcache_tool_bad_flag_exits_2
  COMMAND sh -c "$<TARGET_FILE:kcache_tool> demo --no-such-flag; test $? -eq 2")
add_test(NAME kcache_tool_bad_value_exits_2
  COMMAND sh -c "$<TARGET_FILE:kcache_tool> demo --passes 0; test $? -eq 2")
if(TARGET kcache_bench)
  add_test(NAME kcache_bench_smoke COMMAND kcache_bench --smoke)
  # The scale curve's smallest sizes: 10 kernels cold and warm, a directory of 100 entries.
  add_test(NAME kcache_bench_scale_smoke COMMAND kcache_bench --scale ${CMAKE_CURRENT_BINARY_DIR}/scale-smoke
    --scale-max 10 --scale-entries 100 --rounds 1 --scale-kcache $<TARGET_FILE:kcache_tool>)
endif()
# The committed CUDA C++ corpus is what its generator writes (bench/corpus/README.md).
add_test(NAME kcache_cuda_corpus_is_the_generators COMMAND python3
  ${CMAKE_CURRENT_SOURCE_DIR}/scripts/make-cuda-corpus.py --compare ${CMAKE_CURRENT_SOURCE_DIR}/bench/corpus/cuda-corpus.tar.xz)
# The kcache command end to end, one fresh cache directory per case (tests/cli/cli_test.sh).
foreach(cli_case help bad_usage prewarm compile_unstored disk_headers compile_error inspect_verify clear_cleanup
        evict_older_than numbers_do_not_wrap config stats stats_concurrent
        version ls_kernels ls_width hostile_keys json_bytes progress remote)
  add_test(NAME kcache_cli_${cli_case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/cli/cli_test.sh $<TARGET_FILE:kcache_tool> ${cli_case})
endforeach()
# The multi-process storm (tests/storm/storm.cpp): writers, byte-checking readers, kcache -C,
# -c under a tiny budget, verify --repair and kill -9, for KCACHE_STORM_SECONDS (default 20)
# plus a third of that without kills.
add_executable(kcache_storm tests/storm/storm.cpp)
target_link_libraries(kcache_storm PRIVATE kcache_testing kcache_examples)
add_dependencies(kcache_storm kcache_tool)
add_test(NAME kcache_storm COMMAND kcache_storm run $<TARGET_FILE:kcache_tool>)
set_tests_properties(kcache_storm PROPERTIES TIMEOUT 110)

# The fleet test of issue 17 (tests/fleet/fleet.cpp): 16 node processes, one redis-server, the
# same 32 kernels at once: each compiled once across the fleet; then with a lease holder killed.
add_executable(kcache_fleet tests/fleet/fleet.cpp)
target_link_libraries(kcache_fleet PRIVATE kcache_testing kcache_examples)
add_test(NAME kcache_fleet COMMAND kcache_fleet run)
set_tests_properties(kcache_fleet PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77)
# The same fleet as hosts in network namespaces, a delayed link between each and Redis (root only).
add_test(NAME kcache_fleet_netns
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/fleet/netns_fleet.sh $<TARGET_FILE:kcache_fleet>
    $<TARGET_FILE:kcache_tool>)
set_tests_properties(kcache_fleet_netns PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77)

# The hostile-directory suite of issue 15 (tests/hostile/hostile_test.sh): the kcache command run
# as `nobody` (permissions matter), one ctest test per case; skipped (exit 77) unless run as
# root with runuser.
# A program that uses the library as a user's would (KernelCache::global(), kcache.conf).
add_executable(kcache_hostile_probe tests/hostile/prebuild_probe.cpp)
target_link_libraries(kcache_hostile_probe PRIVATE kcache_testing)
add_dependencies(kcache_hostile_probe kcache_tool)  # its compile workers: the kcache beside it
set(KCACHE_HOSTILE_CASES
  refused_dir_conf library_conf_program conf_cannot_relax links_stay_inside
  regular_files_entry regular_files_conf regular_files_stats
  headers_fingerprinted huge_numbers compile_tells_truth cleanup_budget_flags stats_add_up
  bad_setting_keeps_others conf_log_applies stopped_lock_holder stopped_stats_lock_holder
  leftovers_temporaries leftovers_non_files symlinked_cache_dir unusable_dir_reported
  read_only_mode bad_archs)
foreach(hostile_case ${KCACHE_HOSTILE_CASES})
  add_test(NAME kcache_hostile_${hostile_case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/hostile/hostile_test.sh
            $<TARGET_FILE:kcache_tool> ${hostile_case} $<TARGET_FILE:kcache_hostile_probe>)
  set_tests_properties(kcache_hostile_${hostile_case} PROPERTIES
    LABELS hostile SKIP_RETURN_CODE 77 TIMEOUT 600)
endforeach()

# kcache as a dependency (tests/install/install_test.sh): this tree installed to a temporary prefix
# with `cmake --install`, then a small program built against it with the CMake package (shared and
# static) and with pkg-config, and run. Not in sanitizer builds, whose libraries need the
# sanitizer runtimes in the program.
if(KCACHE_INSTALL AND KCACHE_SANITIZE STREQUAL "" AND NOT KCACHE_FUZZ)
  include(GNUInstallDirs)
  add_test(NAME kcache_install_consumer
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/install/install_test.sh
            ${CMAKE_CURRENT_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/install-test
            ${PROJECT_VERSION} ${CMAKE_INSTALL_LIBDIR} ${CMAKE_CXX_COMPILER}
            "${CMAKE_CXX_COMPILER_LAUNCHER}")
  set_tests_properties(kcache_install_consumer PROPERTIES TIMEOUT 300)
endif()

# The Python package's CPU tests against this build's libkcache.a (scripts/test-python.sh); not in
# sanitizer or fuzz builds, whose runtimes a Python interpreter does not load.
if(KCACHE_SANITIZE STREQUAL "" AND NOT KCACHE_FUZZ)
  add_test(NAME python_bindings
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/test-python.sh ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(python_bindings PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS python)
endif()
