# ProcgroupCuda.cmake — finds CUDA and NCCL (on our machines: /usr/local/cuda, headers and
# libraries, no GPU needed to build) and decides, once for the whole tree, whether the CUDA
# parts are built: backends/nccl, ddp's CUDA kernels, the GPU paths of the training example
# and of collbench. PROCGROUP_WITH_NCCL=AUTO builds them when everything is found.
#
# Sets PROCGROUP_HAVE_CUDA (TRUE/FALSE) and, when TRUE, enables the CUDA language and
# defines interface targets:
#   procgroup_cuda_runtime  CUDA::cudart (and its include directory)
#   procgroup_cublas        CUDA::cublas
#   procgroup_nccl          libnccl + nccl.h
# C++ code that may be built without CUDA tests the PROCGROUP_HAVE_CUDA compile definition,
# which procgroup_cuda_runtime carries.

if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS "/usr/local/cuda")
  set(CUDAToolkit_ROOT "/usr/local/cuda")
endif()
find_package(CUDAToolkit QUIET)
set(_pg_cuda_found FALSE)
if(CUDAToolkit_FOUND AND TARGET CUDA::cudart AND TARGET CUDA::cublas)
  find_path(PROCGROUP_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(PROCGROUP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(PROCGROUP_NCCL_INCLUDE_DIR AND PROCGROUP_NCCL_LIBRARY AND CUDAToolkit_NVCC_EXECUTABLE)
    set(_pg_cuda_found TRUE)
  endif()
endif()
procgroup_dependency_decision(PROCGROUP_WITH_NCCL ${_pg_cuda_found}
  "CUDA toolkit (nvcc, cudart, cublas) and NCCL" PROCGROUP_HAVE_CUDA)
if(NOT PROCGROUP_HAVE_CUDA)
  return()
endif()

# H100/H200 are sm_90; sm_80 keeps A100s working. PTX for 90 lets newer GPUs JIT.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
endif()
enable_language(CUDA)
# CMake 3.25 (bookworm) knows no CUDA20 dialect; .cu files see only C headers and C++17.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

add_library(procgroup_cuda_runtime INTERFACE)
target_link_libraries(procgroup_cuda_runtime INTERFACE CUDA::cudart)
target_compile_definitions(procgroup_cuda_runtime INTERFACE PROCGROUP_HAVE_CUDA=1)
add_library(procgroup_cublas INTERFACE)
target_link_libraries(procgroup_cublas INTERFACE CUDA::cublas procgroup_cuda_runtime)
add_library(procgroup_nccl INTERFACE)
target_include_directories(procgroup_nccl SYSTEM INTERFACE "${PROCGROUP_NCCL_INCLUDE_DIR}")
target_link_libraries(procgroup_nccl INTERFACE "${PROCGROUP_NCCL_LIBRARY}" procgroup_cuda_runtime)
message(STATUS "procgroup: CUDA ${CUDAToolkit_VERSION}, NCCL ${PROCGROUP_NCCL_LIBRARY}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES}")
