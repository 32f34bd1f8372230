# CMake package of an installed executorch wheel: find_package(executorch REQUIRED), then link
#   executorch::runtime        libexecutorch.so.1 (Program, Method, Module, make_tensor_ptr, registries),
#                              bringing the CPU kernels and the thread pool
#   executorch::kernels        libexecutorch_kernels.so.1
#   executorch::threadpool     libexecutorch_threadpool.so.1
#   executorch::xnnpack_backend libexecutorch_backend_xnnpack.so.1 (XnnpackBackend and XNNPACK)
#   executorch::cuda_backend   libexecutorch_cuda_backend.so.1 (wheels built with CUDA)
#   executorch::extension_cuda libexecutorch_extension_cuda.so.1 (the caller's CUDA stream)
#   executorch::shims          backends/cuda/libaoti_cuda_shims.so (the aoti_torch_* C ABI)
# The libraries register kernels and backends from static initializers, so they are linked with
# --no-as-needed: a program that references none of their symbols still loads them.
# Paths are computed from this file's location: the package works wherever pip put it.

get_filename_component(_executorch_root "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(executorch_ROOT_DIR "${_executorch_root}")
set(executorch_INCLUDE_DIRS "${_executorch_root}/include")
set(executorch_LIBRARY_DIR "${_executorch_root}/lib")
# pip puts the CUDA runtime (nvidia-cuda-runtime) next to the executorch package.
get_filename_component(_executorch_cudart_dir "${_executorch_root}/../nvidia/cu13/lib" ABSOLUTE)

function(_executorch_import target file)
  set(_path "${_executorch_root}/${file}")
  if(NOT EXISTS "${_path}")
    return()
  endif()
  get_filename_component(_name "${_path}" NAME)
  add_library(${target} SHARED IMPORTED)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${_path}"
    IMPORTED_SONAME "${_name}"
    INTERFACE_INCLUDE_DIRECTORIES "${executorch_INCLUDE_DIRS}"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endfunction()

if(NOT TARGET executorch::runtime)
  _executorch_import(executorch::runtime lib/libexecutorch.so.1)
  _executorch_import(executorch::threadpool lib/libexecutorch_threadpool.so.1)
  _executorch_import(executorch::kernels lib/libexecutorch_kernels.so.1)
  _executorch_import(executorch::xnnpack_backend lib/libexecutorch_backend_xnnpack.so.1)
  _executorch_import(executorch::cuda_backend lib/libexecutorch_cuda_backend.so.1)
  _executorch_import(executorch::extension_cuda lib/libexecutorch_extension_cuda.so.1)
  _executorch_import(executorch::shims backends/cuda/libaoti_cuda_shims.so)
  if(NOT TARGET executorch::runtime)
    set(executorch_FOUND FALSE)
    set(executorch_NOT_FOUND_MESSAGE "no libexecutorch.so.1 in ${executorch_LIBRARY_DIR}")
    return()
  endif()
  set_target_properties(executorch::threadpool PROPERTIES INTERFACE_LINK_LIBRARIES executorch::runtime)
  set_target_properties(executorch::kernels PROPERTIES
    INTERFACE_LINK_LIBRARIES "executorch::runtime;executorch::threadpool")
  set_target_properties(executorch::runtime PROPERTIES
    INTERFACE_LINK_OPTIONS "LINKER:--no-as-needed"
    INTERFACE_LINK_LIBRARIES "executorch::kernels;executorch::threadpool")
  if(TARGET executorch::xnnpack_backend)
    set_target_properties(executorch::xnnpack_backend PROPERTIES
      INTERFACE_LINK_OPTIONS "LINKER:--no-as-needed"
      INTERFACE_LINK_LIBRARIES "executorch::runtime;executorch::threadpool")
  endif()
  if(TARGET executorch::cuda_backend)
    set(_cuda_link_options "LINKER:-rpath-link,${_executorch_cudart_dir}")
    set_target_properties(executorch::extension_cuda PROPERTIES
      INTERFACE_LINK_LIBRARIES executorch::runtime INTERFACE_LINK_OPTIONS "${_cuda_link_options}")
    set_target_properties(executorch::shims PROPERTIES
      INTERFACE_LINK_LIBRARIES "executorch::runtime;executorch::extension_cuda"
      INTERFACE_LINK_OPTIONS "${_cuda_link_options}")
    set_target_properties(executorch::cuda_backend PROPERTIES
      INTERFACE_LINK_LIBRARIES "executorch::runtime;executorch::shims;executorch::extension_cuda"
      INTERFACE_LINK_OPTIONS "LINKER:--no-as-needed;${_cuda_link_options}")
  endif()
endif()
set(executorch_FOUND TRUE)
