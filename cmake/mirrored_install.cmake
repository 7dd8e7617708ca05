# `cmake --install build [--prefix DIR]`: the binaries (component runtime),
# and the library API as a CMake package (component development):
#
#   <prefix>/bin/mirrored-launch, mirrored-worker
#   <prefix>/lib/libmirrored_*.a
#   <prefix>/include/mirrored/{common,worker,proto,mirrored}/...   headers (<mirrored/mirrored.h>)
#   <prefix>/lib/cmake/mirrored/                                   find_package(mirrored)
#   <prefix>/share/mirrored/examples/custom_training_loop/         a program built on it
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS mirrored-launch mirrored-worker
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# Every library mirrored::train needs, named without the prefix.
set(_mirrored_libs
  mirrored_common mirrored_proto mirrored_dnnl mirrored_precision mirrored_model mirrored_data
  mirrored_wire_type mirrored_comm mirrored_coordination mirrored_summary mirrored_checkpoint mirrored_export
  mirrored_worker_options mirrored_strategy mirrored_train mirrored_eval)
if(MIRRORED_WITH_CUDA)
  list(APPEND _mirrored_libs mirrored_cuda_deps)
endif()
foreach(_lib ${_mirrored_libs})
  string(REPLACE "mirrored_" "" _short ${_lib})
  set_target_properties(${_lib} PROPERTIES EXPORT_NAME ${_short})
endforeach()
install(TARGETS ${_mirrored_libs} EXPORT mirroredTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)

set(_mirrored_inc ${CMAKE_INSTALL_INCLUDEDIR}/mirrored)
install(DIRECTORY common worker DESTINATION ${_mirrored_inc} COMPONENT development
  FILES_MATCHING PATTERN "*.h" PATTERN "examples" EXCLUDE)
install(DIRECTORY ${PROJECT_BINARY_DIR}/generated/proto ${PROJECT_BINARY_DIR}/generated/mirrored
  include/mirrored DESTINATION ${_mirrored_inc} COMPONENT development FILES_MATCHING PATTERN "*.h")

set(_mirrored_cmake ${CMAKE_INSTALL_LIBDIR}/cmake/mirrored)
install(EXPORT mirroredTargets NAMESPACE mirrored:: DESTINATION ${_mirrored_cmake}
  COMPONENT development)
configure_package_config_file(cmake/mirroredConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mirroredConfig.cmake INSTALL_DESTINATION ${_mirrored_cmake})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mirroredConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mirroredConfig.cmake ${PROJECT_BINARY_DIR}/mirroredConfigVersion.cmake
  cmake/find_cuda_toolkit.cmake
  DESTINATION ${_mirrored_cmake} COMPONENT development)

install(FILES worker/examples/CMakeLists.txt worker/examples/custom_training_loop.cc
  DESTINATION ${CMAKE_INSTALL_DATADIR}/mirrored/examples/custom_training_loop COMPONENT development)
