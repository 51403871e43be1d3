# Helpers shared by every folder: one library per concern, tests with CTest labels.

# loom_library(NAME name DEPS ... [TORCH])
# Builds every .cpp in the calling folder into the static library `name`.
# TORCH targets reuse one precompiled libtorch header (torch/torch.h costs ~30 s per unit).
function(loom_library)
  cmake_parse_arguments(L "TORCH" "NAME" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(${L_NAME} STATIC ${srcs})
  target_include_directories(${L_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${L_NAME} PUBLIC ${L_DEPS})
  if(L_TORCH)
    loom_use_torch(${L_NAME})
  endif()
endfunction()

function(loom_use_torch target)
  target_link_libraries(${target} PUBLIC loom_torch_pch)
  target_precompile_headers(${target} REUSE_FROM loom_torch_pch)
endfunction()

# loom_test(NAME name SOURCES ... DEPS ... LABELS ... [NP n] [GLOO] [TORCH] [TIMEOUT s] [ARGS ...])
# NP > 0 runs the test on n ranks (oversubscribed: CI has 2 cores): under mpiexec (the mpi
# backend), or with GLOO under `loom launch` (the gloo backend, no MPI at all).
function(loom_test)
  cmake_parse_arguments(T "TORCH;GLOO" "NAME;NP;TIMEOUT;EXE" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
  if(T_EXE)
    set(exe ${T_EXE})
  else()
    set(exe ${T_NAME})
    add_executable(${exe} ${T_SOURCES})
    target_link_libraries(${exe} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
    if(T_TORCH)
      target_precompile_headers(${exe} REUSE_FROM loom_torch_pch)
      target_link_libraries(${exe} PRIVATE loom_torch_pch)
    endif()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(T_NP AND T_GLOO)
    add_test(NAME ${T_NAME}
             COMMAND $<TARGET_FILE:loom> launch --nproc ${T_NP} --comm gloo --
                     $<TARGET_FILE:${exe}> ${T_ARGS})
    # One gloo job at a time: its groups connect full meshes over loopback TCP, and on two
    # oversubscribed cores two such jobs at once have (rarely) lost a connection while meshing.
    # A cost above the others' (CTest starts the costliest first): the chain of locked tests
    # starts at once beside the rest, rather than running alone at the end.
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1;MKL_NUM_THREADS=1"
                         RESOURCE_LOCK gloo_ranks COST 60)
  elseif(T_NP)
    add_test(NAME ${T_NAME}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} --oversubscribe
                     $<TARGET_FILE:${exe}> ${T_ARGS})
    set_tests_properties(${T_NAME} PROPERTIES
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;MKL_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  else()
    add_test(NAME ${T_NAME} COMMAND $<TARGET_FILE:${exe}> ${T_ARGS})
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1;MKL_NUM_THREADS=1")
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
