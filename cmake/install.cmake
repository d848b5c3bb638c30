# SPDX-License-Identifier: Apache-2.0
# What `cmake --install` puts under the prefix: the headers, libkcache.so (with its SONAME) and
# libkcache.a, the CMake package (find_package(kcache CONFIG): kcache::kcache, the shared library,
# and kcache::kcache_static), kcache.pc for pkg-config, and the kcache command.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(kcache_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kcache)

install(TARGETS kcache kcache_static EXPORT kcacheTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/kcache DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(EXPORT kcacheTargets NAMESPACE kcache:: DESTINATION ${kcache_cmake_dir})

configure_package_config_file(cmake/kcacheConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kcacheConfig.cmake INSTALL_DESTINATION ${kcache_cmake_dir})
# Before 1.0 a minor version may change the API, so only the same minor version satisfies a request.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kcacheConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcacheConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/kcacheConfigVersion.cmake DESTINATION ${kcache_cmake_dir})

# kcache.pc names its folders relative to itself, so that the prefix given to `cmake --install
# --prefix` (or a moved installation) needs no new file.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(KCACHE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(KCACHE_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH kcache_pc_up /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
  string(REGEX REPLACE "/$" "" kcache_pc_up "${kcache_pc_up}")
  set(KCACHE_PC_PREFIX "\${pcfiledir}/${kcache_pc_up}")
  set(KCACHE_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(KCACHE_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(KCACHE_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/kcache.pc.in ${CMAKE_CURRENT_BINARY_DIR}/kcache.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcache.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(TARGET kcache_tool)
  install(TARGETS kcache_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
