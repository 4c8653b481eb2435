# Every dependency is a Debian package installed by scripts/setup.
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)                 # Boost.Math is header-only
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 2.1 REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# ONNX import (model/): libonnx-dev's CMake package; its targets need protobuf's.
find_package(Protobuf REQUIRED)
find_package(ONNX 1.12 REQUIRED)
# KServe v2 over HTTP: Debian's cpp-httplib 0.11, a compiled library found through pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib>=0.11)
# Debian's dnnl-config.cmake insists on OpenCL (its GPU runtime); we use the CPU engine only, so
# find the library and headers directly.
find_library(SERF_DNNL_LIBRARY dnnl REQUIRED)
find_path(SERF_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp REQUIRED)
add_library(serf_dnnl INTERFACE)
target_link_libraries(serf_dnnl INTERFACE ${SERF_DNNL_LIBRARY})
target_include_directories(serf_dnnl SYSTEM INTERFACE ${SERF_DNNL_INCLUDE})
add_library(DNNL::dnnl ALIAS serf_dnnl)

# gRPC (KServe v2 over gRPC): AUTO builds the front end when libgrpc++, protobuf and
# grpc_cpp_plugin are found; ON insists; OFF skips it (--grpc then says so).
set(SERF_HAVE_GRPC OFF)
if(NOT SERF_WITH_GRPC STREQUAL "OFF")
  find_package(Protobuf QUIET)
  find_package(gRPC CONFIG QUIET)
  find_program(SERF_GRPC_CPP_PLUGIN grpc_cpp_plugin)
  if(Protobuf_FOUND AND Protobuf_PROTOC_EXECUTABLE AND gRPC_FOUND AND SERF_GRPC_CPP_PLUGIN)
    set(SERF_HAVE_GRPC ON)
  elseif(SERF_WITH_GRPC STREQUAL "ON")
    message(FATAL_ERROR "SERF_WITH_GRPC=ON but libgrpc++, protobuf or grpc_cpp_plugin was not "
                        "found (scripts/setup installs them)")
  endif()
endif()

# MPI: AUTO builds the runtime when found; ON insists; OFF skips it.
set(SERF_HAVE_MPI OFF)
if(NOT SERF_WITH_MPI STREQUAL "OFF")
  if(SERF_WITH_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(SERF_HAVE_MPI ON)
  endif()
endif()

# CUDA: AUTO builds the backend when nvcc and cuDNN/cuBLAS are found; ON insists.
# nvcc is found where CMake's own FindCUDAToolkit looks, in its order: CMAKE_CUDA_COMPILER or the
# CUDACXX environment variable when given; else CUDAToolkit_ROOT (CMake or environment variable),
# then PATH, then the CUDA_PATH environment variable, then /usr/local/cuda (the toolkit's default
# symlink on Linux, so AUTO finds it when nvcc is not on PATH).
set(SERF_HAVE_CUDA OFF)
if(NOT SERF_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(SERF_NVCC nvcc
                 HINTS ${CUDAToolkit_ROOT} ENV CUDAToolkit_ROOT
                 PATHS ENV CUDA_PATH /usr/local/cuda
                 PATH_SUFFIXES bin
                 DOC "nvcc, found as FindCUDAToolkit would (CUDAToolkit_ROOT, PATH, CUDA_PATH, /usr/local/cuda)")
    if(SERF_NVCC)
      set(CMAKE_CUDA_COMPILER ${SERF_NVCC} CACHE FILEPATH "CUDA compiler")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # H100 / H200 (sm_90) unless the user says otherwise: one architecture keeps nvcc fast.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures (90: H100/H200)")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    # cuDNN beside the toolkit that was found (or where CUDNN_ROOT / CUDNN_PATH say).
    find_library(SERF_CUDNN_LIBRARY cudnn HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ENV CUDNN_PATH
                 ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
    find_path(SERF_CUDNN_INCLUDE cudnn.h HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ENV CUDNN_PATH
              ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
    if(CUDAToolkit_FOUND AND SERF_CUDNN_LIBRARY AND SERF_CUDNN_INCLUDE AND TARGET CUDA::cublas)
      set(SERF_HAVE_CUDA ON)
    endif()
  endif()
  if(SERF_WITH_CUDA STREQUAL "ON" AND NOT SERF_HAVE_CUDA)
    message(FATAL_ERROR "SERF_WITH_CUDA=ON but nvcc, cuDNN or cuBLAS was not found "
                        "(set CUDAToolkit_ROOT or CMAKE_CUDA_COMPILER, or use SERF_WITH_CUDA=AUTO)")
  endif()
endif()

find_package(Catch2 2 QUIET)
if(SERF_BUILD_TESTS AND NOT Catch2_FOUND)
  message(FATAL_ERROR "Catch2 v2 not found: run scripts/setup (Debian package catch2)")
endif()
