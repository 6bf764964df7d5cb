# Installs the library, its public headers and a CMake package so that consumers can
# find_package(kvinfer) and link kvinfer::kvinfer.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS kvinfer EXPORT kvinferTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/kvinfer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT kvinferTargets NAMESPACE kvinfer::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvinfer)

configure_package_config_file(cmake/kvinferConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kvinferConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvinfer)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kvinferConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kvinferConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/kvinferConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvinfer)
