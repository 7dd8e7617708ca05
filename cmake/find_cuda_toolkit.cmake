# find_package(CUDAToolkit) that also works with CMake 3.25.0/3.25.1 and
# CUDA 13. Include it, then use CUDAToolkit_* and CUDA::* as usual:
#
#   include(${CMAKE_CURRENT_LIST_DIR}/cmake/find_cuda_toolkit.cmake)
#   mirrored_find_cuda_toolkit()        # same as find_package(CUDAToolkit QUIET)
#
# Why: FindCUDAToolkit.cmake of CMake 3.25.0 and 3.25.1 (Debian 12's cmake)
# marks CUDA::nvToolsExt deprecated for every toolkit >= 10.0, without first
# checking that the target exists. CUDA 13 no longer ships libnvToolsExt, so
# the target is never made and configuring stops with "set_property could not
# find TARGET CUDA::nvToolsExt" (fixed upstream in 3.25.2). Where that library
# cannot be found, an empty placeholder target stands in for it: the module
# then skips its own search (it creates the target only when absent) and the
# property lands on the placeholder. mirrored never links CUDA::nvToolsExt.
macro(mirrored_find_cuda_toolkit)
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.25 AND CMAKE_VERSION VERSION_LESS 3.25.2
     AND NOT TARGET CUDA::nvToolsExt)
    find_library(MIRRORED_NVTOOLSEXT_LIBRARY NAMES nvToolsExt nvToolsExt64
      HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda
      PATH_SUFFIXES lib64 lib)
    mark_as_advanced(MIRRORED_NVTOOLSEXT_LIBRARY)
    if(NOT MIRRORED_NVTOOLSEXT_LIBRARY)
      add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
    endif()
  endif()
  find_package(CUDAToolkit ${ARGN})
endmacro()
