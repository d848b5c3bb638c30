# SPDX-License-Identifier: Apache-2.0
# The library: one CMake library per layer of shared/DESIGN.md, combined into libkcache.a and
# libkcache.so (kcache::kcache_static, kcache::kcache).
#
# Each layer is an OBJECT library, compiled once, position independent. Both products are made of
# the same objects, since CMake cannot merge static archives and a shared library made of static
# per-layer archives would need --whole-archive. The layer order is then held by a check of its
# own (KCACHE_CHECK_LAYERS): each layer is linked as a shared library against the layers below it
# only, with --no-undefined, so a call up the layers is an undefined symbol whichever objects a
# program happens to pull in, which archives linked in order would not guarantee. Every program
# of the build waits for that check.

# Top to bottom; a layer calls only the layers after it. A folder that does not exist is skipped.
set(KCACHE_LAYERS capi cache build compile store driver util)

find_package(Threads REQUIRED)
# Only cuda.h is used, to build kcache; libcuda, NVRTC and nvJitLink are loaded at run time
# (src/driver), and no installed header includes cuda.h.
find_package(CUDAToolkit REQUIRED)
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_path(ZSTD_INCLUDE_DIR zstd.h REQUIRED)
# The shared libzstd, as for any other library: Debian's libzstd.a is not position independent,
# so it cannot go into libkcache.so, and the GPU machine has libzstd.so.1.
find_library(ZSTD_LIBRARY NAMES zstd REQUIRED)
# The remote tier (src/store/remote): hiredis for the RESP protocol only (kcache owns the socket
# and its deadlines), OpenSSL's libcrypto for signed entries. Both shared, as zstd.
find_path(HIREDIS_INCLUDE_DIR hiredis/hiredis.h REQUIRED)
find_library(HIREDIS_LIBRARY NAMES hiredis REQUIRED)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)
set(kcache_private_libraries ${ZSTD_LIBRARY} ${HIREDIS_LIBRARY} OpenSSL::Crypto)

# What every layer's objects are compiled with; not part of any installed target.
add_library(kcache_layer_settings INTERFACE)
target_include_directories(kcache_layer_settings INTERFACE
  ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src
  ${XXHASH_INCLUDE_DIR} ${ZSTD_INCLUDE_DIR} ${HIREDIS_INCLUDE_DIR})
target_include_directories(kcache_layer_settings SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
target_compile_features(kcache_layer_settings INTERFACE cxx_std_20)
target_link_libraries(kcache_layer_settings INTERFACE Threads::Threads OpenSSL::Crypto)
# Position independent code may otherwise not inline or clone a function that another shared
# object could interpose; nothing interposes kcache's internals, and the hit path needs inlining.
target_compile_options(kcache_layer_settings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-fno-semantic-interposition>)

# The AVX2 variant of XXH3 alone gets AVX2 code; kernels() runs it only on CPUs that have it.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/src/util/xxh3_avx2.cpp)
  set_source_files_properties(src/util/xxh3_avx2.cpp PROPERTIES COMPILE_OPTIONS -mavx2)
endif()

set(kcache_layers_built "")
set(kcache_objects "")
foreach(layer IN LISTS KCACHE_LAYERS)
  # A layer's subfolders (src/store/remote) are part of it.
  file(GLOB_RECURSE layer_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/${layer}/*.cpp)
  if(NOT layer_sources)
    continue()
  endif()
  add_library(kcache_${layer} OBJECT ${layer_sources})
  set_target_properties(kcache_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(kcache_${layer} PRIVATE kcache_layer_settings)
  list(APPEND kcache_layers_built ${layer})
  list(APPEND kcache_objects $<TARGET_OBJECTS:kcache_${layer}>)
endforeach()

# --no-undefined and the layer check need the sanitizer runtimes in every shared object, which
# clang links into programs only; sanitizer and fuzz builds leave both to the normal build.
set(kcache_link_checks OFF)
if(KCACHE_SANITIZE STREQUAL "" AND NOT KCACHE_FUZZ)
  set(kcache_link_checks ON)
endif()

add_library(kcache SHARED ${kcache_objects})
add_library(kcache_static STATIC ${kcache_objects})
add_library(kcache::kcache ALIAS kcache)
add_library(kcache::kcache_static ALIAS kcache_static)
include(GNUInstallDirs)
foreach(target kcache kcache_static)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME kcache LINKER_LANGUAGE CXX POSITION_INDEPENDENT_CODE ON EXPORT_NAME ${target})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target} PUBLIC Threads::Threads PRIVATE ${CMAKE_DL_LIBS})
endforeach()
set_target_properties(kcache PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_link_libraries(kcache PRIVATE ${kcache_private_libraries})
# A static library's users link zstd, hiredis and libcrypto themselves: by path here, by name once
# installed, so that the installed package does not name this machine's library folders.
target_link_libraries(kcache_static INTERFACE
  $<BUILD_INTERFACE:${ZSTD_LIBRARY}> $<INSTALL_INTERFACE:zstd>
  $<BUILD_INTERFACE:${HIREDIS_LIBRARY}> $<INSTALL_INTERFACE:hiredis>
  $<BUILD_INTERFACE:OpenSSL::Crypto> $<INSTALL_INTERFACE:crypto>)
if(kcache_link_checks)
  target_link_options(kcache PRIVATE LINKER:--no-undefined)
endif()

if(KCACHE_CHECK_LAYERS AND kcache_link_checks)
  set(kcache_layers_upward ${kcache_layers_built})
  list(REVERSE kcache_layers_upward)
  set(below "")
  foreach(layer IN LISTS kcache_layers_upward)
    add_library(kcache_${layer}_linked SHARED $<TARGET_OBJECTS:kcache_${layer}>)
    set_target_properties(kcache_${layer}_linked PROPERTIES
      OUTPUT_NAME kcache_${layer} LINKER_LANGUAGE CXX
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/layers)
    # PUBLIC: a layer may call any layer below it, not just the next one.
    target_link_libraries(kcache_${layer}_linked PUBLIC ${below}
      PRIVATE Threads::Threads ${CMAKE_DL_LIBS} ${kcache_private_libraries})
    target_link_options(kcache_${layer}_linked PRIVATE LINKER:--no-undefined)
    set(below kcache_${layer}_linked)
  endforeach()
  add_dependencies(kcache ${below})
  add_dependencies(kcache_static ${below})
endif()

# kcache's own programs: the static library (binaries built here run on the GPU machine as they
# are) and the internal headers (src/), with cuda.h for the tests and benchmarks that use the
# CUDA API table.
add_library(kcache_internal INTERFACE)
target_include_directories(kcache_internal INTERFACE src)
target_include_directories(kcache_internal SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(kcache_internal INTERFACE kcache_static)
