# SPDX-License-Identifier: Apache-2.0
# kcache's own programs: the command, the benchmarks, and what the tests and benchmarks share.

if(KCACHE_BUILD_TESTS AND NOT KCACHE_BUILD_TOOL)
  message(STATUS "kcache: KCACHE_BUILD_TESTS builds the command too (the tests run it)")
  set(KCACHE_BUILD_TOOL ON)
endif()

if(KCACHE_BUILD_TOOL OR KCACHE_BUILD_BENCH OR KCACHE_BUILD_TESTS OR KCACHE_FUZZ)
  add_library(kcache_examples STATIC examples/ptx_kernels.cpp)
  target_include_directories(kcache_examples PUBLIC examples)
endif()

# The test fakes (tests/testing: the driver, the CUDA API table): never in the production library.
if(KCACHE_BUILD_TESTS OR KCACHE_BUILD_BENCH OR KCACHE_FUZZ)
  file(GLOB kcache_testing_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/testing/*.cpp)
  add_library(kcache_testing STATIC ${kcache_testing_sources})
  target_include_directories(kcache_testing PUBLIC tests)
  target_link_libraries(kcache_testing PUBLIC kcache_internal)
endif()

if(KCACHE_BUILD_TOOL)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp REQUIRED)  # the command's JSON
  file(GLOB kcache_tool_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tools/kcache/*.cpp)
  add_executable(kcache_tool ${kcache_tool_sources})
  set_target_properties(kcache_tool PROPERTIES OUTPUT_NAME kcache)
  target_include_directories(kcache_tool PRIVATE ${CLI11_INCLUDE_DIR} ${NLOHMANN_JSON_INCLUDE_DIR}
    ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(kcache_tool PRIVATE kcache_internal kcache_examples)
endif()

if(KCACHE_BUILD_BENCH)
  file(GLOB kcache_bench_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/bench/*.cpp)
  add_executable(kcache_bench ${kcache_bench_sources})
  target_include_directories(kcache_bench PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(kcache_bench PRIVATE kcache_testing kcache_examples)
endif()
