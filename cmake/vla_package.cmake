# The installed package: `cmake --install build --prefix P` writes
#   P/include/vla/{core,analysis,studies}/   the headers, included as "core/...", "analysis/..." (gpu/ with CUDA)
#   P/lib/libvla_*.a                          the static libraries
#   P/lib/cmake/vla/                          vlaConfig.cmake: find_package(vla) gives vla::core, vla::analysis,
#                                             vla::train, vla::studies (with vla::parallel, which
#                                             splits them over MPI ranks); vla::gpu, vla::gpu_train with CUDA
#   P/bin/vla                                 the command line
# and the Python module when it is built (python/CMakeLists.txt). examples/find_package/ is a project that
# uses the package; tests/package/ builds it against a fresh install.
include(CMakePackageConfigHelpers)

set(VLA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/vla)

set(vla_cpu_libraries vla_core vla_parallel vla_analysis vla_train vla_studies)
set(vla_gpu_libraries)
if(VLA_HAVE_CUDA)
  set(vla_gpu_libraries vla_gpu vla_gpu_train)
endif()
foreach(lib IN LISTS vla_cpu_libraries vla_gpu_libraries)
  string(REGEX REPLACE "^vla_" "" name ${lib})
  # Position-independent, so that a shared library or a Python extension (python/) can link them.
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
endforeach()

# The headers are C++20: a user's target linking vla::core is compiled as C++20 (or later).
target_compile_features(vla_core PUBLIC cxx_std_20)

# The sanitizers' runtime must be in every program that links an instrumented library: an installed
# ASan+UBSan build (make sanitize) passes its flags on to its users.
if(VLA_SANITIZE)
  target_compile_options(vla_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined -fno-omit-frame-pointer
                                                                -fno-sanitize-recover=undefined>)
  target_link_options(vla_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
endif()

# The libraries link vla_warnings privately, and CMake exports a static library's private links (link
# only: its flags never reach a user), so it is exported with them.
set_target_properties(vla_warnings PROPERTIES EXPORT_NAME warnings)
install(TARGETS vla_warnings ${vla_cpu_libraries} EXPORT vlaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT vlaTargets NAMESPACE vla:: DESTINATION ${VLA_INSTALL_CMAKEDIR})
install(TARGETS vla RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir core analysis studies)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vla/${dir}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.def")
endforeach()
# The CUDA targets in a file of their own: vlaConfig.cmake reads it only where the CUDA toolkit is found.
if(VLA_HAVE_CUDA)
  install(TARGETS ${vla_gpu_libraries} EXPORT vlaGpuTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT vlaGpuTargets NAMESPACE vla:: DESTINATION ${VLA_INSTALL_CMAKEDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/gpu/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vla/gpu FILES_MATCHING PATTERN "*.hpp")
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/vlaConfig.cmake.in ${PROJECT_BINARY_DIR}/vlaConfig.cmake
                              INSTALL_DESTINATION ${VLA_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vlaConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vlaConfig.cmake ${PROJECT_BINARY_DIR}/vlaConfigVersion.cmake
        DESTINATION ${VLA_INSTALL_CMAKEDIR})
