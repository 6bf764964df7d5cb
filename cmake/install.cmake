# Installs the library (shared or static, as built), its public headers, a CMake package
# (find_package(kvinfer) → kvinfer::kvinfer) and a pkg-config file (kvinfer.pc).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_target_property(kvinfer_type kvinfer TYPE)
if(kvinfer_type STREQUAL "SHARED_LIBRARY")
  set(KVINFER_SHARED ON)
else()
  set(KVINFER_SHARED OFF)
endif()

install(TARGETS kvinfer EXPORT kvinferTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/kvinfer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "*.in" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/kvinfer/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvinfer)
install(EXPORT kvinferTargets NAMESPACE kvinfer::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvinfer)

configure_package_config_file(cmake/kvinferConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kvinferConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvinfer)
# Our own version file: write_basic_package_version_file's SameMinorVersion refuses a range such
# as 0.1...1.0 unless both ends are 0.1 (cmake/kvinferConfigVersion.cmake.in).
configure_file(cmake/kvinferConfigVersion.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/kvinferConfigVersion.cmake @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kvinferConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/kvinferConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvinfer)

# pkg-config. Relocatable: the prefix is found from the .pc file's own place. A static libkvinfer
# lists what it links (pkg-config --static --libs kvinfer).
file(RELATIVE_PATH pc_prefix_from_pcdir "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" pc_prefix_from_pcdir "${pc_prefix_from_pcdir}")
set(pc_requires_private "")
set(pc_libs_private "")
if(NOT KVINFER_SHARED)
  set(pc_requires_private "fmt libpcre2-8 libutf8proc")
  if(OpenMP_CXX_FOUND)
    string(APPEND pc_libs_private " ${OpenMP_CXX_FLAGS}")
  endif()
  if(KVINFER_WITH_CUDA AND NOT KVINFER_CUDA_SIM)
    string(APPEND pc_libs_private " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt -lpthread")
  endif()
  string(APPEND pc_libs_private " -ldl")
  string(STRIP "${pc_libs_private}" pc_libs_private)
endif()
configure_file(cmake/kvinfer.pc.in ${CMAKE_CURRENT_BINARY_DIR}/kvinfer.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kvinfer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
