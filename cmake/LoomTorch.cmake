# libtorch from PyPI's torch wheel (scripts/install-deps.sh puts it in a virtual environment).
# Defines the target loom_torch and LOOM_HAVE_CUDA (0/1, also a compile definition of loom_torch).
#
# Where the wheel is: LOOM_TORCH_DIR (<site-packages>/torch) if given, else an entry of
# CMAKE_PREFIX_PATH that holds share/cmake/Torch (the Makefile passes both <torch>/share/cmake
# and <torch>), else the virtual environment ${LOOM_VENV:-$HOME/.local/share/loom/venv}.
#
# With a CUDA toolkit (and LOOM_CUDA=ON) it uses find_package(Torch); without one TorchConfig
# stops ("uses CUDA but I cannot find the CUDA libraries"), so loom_torch is then built from
# the wheel's files directly (CPU libraries only).

set(LOOM_TORCH_DIR "" CACHE PATH "<site-packages>/torch of the torch wheel (found when empty)")
option(LOOM_CUDA "Use the CUDA toolkit when one is found (OFF: CPU libraries of the wheel only)" ON)

if(DEFINED ENV{LOOM_VENV})
  set(_venv "$ENV{LOOM_VENV}")
else()
  set(_venv "$ENV{HOME}/.local/share/loom/venv")
endif()
set(_torch_dir "${LOOM_TORCH_DIR}")
if(NOT _torch_dir)
  find_path(_torch_dir NAMES share/cmake/Torch/TorchConfig.cmake
            PATHS ${CMAKE_PREFIX_PATH} NO_DEFAULT_PATH NO_CACHE)
endif()
if(NOT _torch_dir)
  # find_spec does not import torch (which takes seconds).
  execute_process(
    COMMAND "${_venv}/bin/python" -c
            "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])"
    OUTPUT_VARIABLE _torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(NOT _torch_dir OR NOT EXISTS "${_torch_dir}/share/cmake/Torch/TorchConfig.cmake")
  message(FATAL_ERROR "libtorch not found: run scripts/install-deps.sh (it installs the torch "
                      "wheel into ${_venv}) or pass -DLOOM_TORCH_DIR=<site-packages>/torch")
endif()
get_filename_component(_torch_dir "${_torch_dir}" REALPATH)

# A build folder configured against another libtorch (Debian's, another wheel) keeps that
# one's paths in the cache: forget those outside this wheel.
foreach(v Torch_DIR Caffe2_DIR Tensorpipe_DIR TORCH_LIBRARY c10_LIBRARY kineto_LIBRARY
          C10_CUDA_LIBRARY CAFFE2_NVRTC_LIBRARY)
  if(DEFINED CACHE{${v}})
    string(FIND "$CACHE{${v}}" "${_torch_dir}/" _pos)
    if(NOT _pos EQUAL 0)
      unset(${v} CACHE)
    endif()
  endif()
endforeach()
message(STATUS "loom: libtorch from ${_torch_dir}")

# <torch>/lib before the system's libraries (a Debian libtorch there would shadow libc10).
list(PREPEND CMAKE_PREFIX_PATH "${_torch_dir}/share/cmake" "${_torch_dir}")

set(LOOM_HAVE_CUDA 0)
if(LOOM_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(LOOM_HAVE_CUDA 1)
  else()
    message(STATUS "loom: no CUDA toolkit found, CPU-only build")
  endif()
endif()

add_library(loom_torch INTERFACE)
if(LOOM_HAVE_CUDA)
  # nvcc here cannot do CUDA 20; the arch list keeps TorchConfig from probing for a GPU.
  set(CMAKE_CUDA_STANDARD 17)
  if(NOT TORCH_CUDA_ARCH_LIST)
    set(TORCH_CUDA_ARCH_LIST "9.0")
  endif()
  find_package(Torch REQUIRED CONFIG PATHS "${_torch_dir}/share/cmake/Torch" NO_DEFAULT_PATH)
  target_link_libraries(loom_torch INTERFACE ${TORCH_LIBRARIES})
  # Empty MKL_ROOT in the wheel's mkl.cmake: link directories /lib/intel64 ... end up in RPATH.
  if(TARGET caffe2::mkl)
    set_property(TARGET caffe2::mkl PROPERTY INTERFACE_LINK_DIRECTORIES "")
  endif()
else()
  set(_lib "${_torch_dir}/lib")
  foreach(l torch torch_cpu c10)
    if(NOT EXISTS "${_lib}/lib${l}.so")
      message(FATAL_ERROR "${_lib}/lib${l}.so missing: reinstall the torch wheel")
    endif()
  endforeach()
  target_include_directories(loom_torch SYSTEM INTERFACE
    "${_torch_dir}/include" "${_torch_dir}/include/torch/csrc/api/include")
  # What the wheel's torch_cpu target adds, plus the ABI it was built with.
  target_compile_definitions(loom_torch INTERFACE
    USE_DISTRIBUTED USE_C10D_GLOO USE_RPC USE_TENSORPIPE _GLIBCXX_USE_CXX11_ABI=1)
  # Full paths: CMake puts ${_lib} in the build tree's RUNPATH.
  target_link_libraries(loom_torch INTERFACE
    "${_lib}/libtorch.so" "${_lib}/libtorch_cpu.so" "${_lib}/libc10.so")
endif()
target_compile_definitions(loom_torch INTERFACE LOOM_HAVE_CUDA=${LOOM_HAVE_CUDA})
# The wheel's libtorch.so exports std::filesystem functions from its static libstdc++ parts
# that call symbols Debian's libstdc++ lacks (remove_all jumps to 0; pytorch issue 133437).
# libstdc++ ahead of libtorch among an executable's NEEDED libraries makes its definitions win.
target_link_options(loom_torch INTERFACE "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
# c10d's ProcessGroupGloo.hpp includes gloo's headers, which the wheel lacks: Debian's
# libgloo-dev puts them in /usr/include; elsewhere (the GPU machine's bundle) they are found on
# CMAKE_PREFIX_PATH.
find_path(LOOM_GLOO_INCLUDE gloo/config.h)
if(LOOM_GLOO_INCLUDE AND NOT LOOM_GLOO_INCLUDE STREQUAL "/usr/include")
  target_include_directories(loom_torch SYSTEM INTERFACE "${LOOM_GLOO_INCLUDE}")
endif()
