# kiln's MPI module (docs/distributed.md): src/dist/mpi_impl.c, built as its
# own shared object libkiln_mpi.so and loaded by src/dist/dist.c on the first
# distributed call, so libkiln and the programs linked with it do not depend
# on MPI. Needs (Debian): libopenmpi-dev openmpi-bin. Without them kiln
# still builds; a program launched by mpirun then fails at its first
# distributed call with a message naming what to install.
if(NOT KILN_FUZZ)
  find_package(MPI QUIET COMPONENTS C)
endif()
if(MPI_C_FOUND)
  include(GNUInstallDirs)
  add_library(kiln_mpi MODULE ${CMAKE_SOURCE_DIR}/src/dist/mpi_impl.c)
  target_include_directories(kiln_mpi PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(kiln_mpi PRIVATE MPI::MPI_C)
  set_target_properties(kiln_mpi PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
                                            C_VISIBILITY_PRESET hidden)
  target_compile_definitions(kiln_obj PRIVATE KILN_MPI_MODULE_BUILD="${CMAKE_BINARY_DIR}/lib/libkiln_mpi.so")
  foreach(t kiln kiln_static)
    add_dependencies(${t} kiln_mpi)
  endforeach()
  install(TARGETS kiln_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/kiln)
  message(STATUS "kiln: MPI ${MPI_C_VERSION} (the distributed module libkiln_mpi.so)")

  # The all-reduce benchmark (bench/run.sh runs it under mpirun -np 2): kiln's
  # collective against MPI_Allreduce, so it links MPI itself.
  add_executable(bench_dist_allreduce ${CMAKE_SOURCE_DIR}/bench/dist_allreduce.c)
  set_target_properties(bench_dist_allreduce PROPERTIES OUTPUT_NAME dist_allreduce
                                                        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/bench)
  target_include_directories(bench_dist_allreduce PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(bench_dist_allreduce PRIVATE kiln_static MPI::MPI_C)

  # The distributed tests: tests/dist/*.c run under mpirun by
  # tests/dist/run.sh (as root in CI: Open MPI's allow-run-as-root settings
  # and --oversubscribe are in the script, not in the user's way).
  find_program(KILN_MPIRUN NAMES mpirun mpiexec)
  file(GLOB dist_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/dist/*.c)
  foreach(src ${dist_tests})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/tests)
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
    target_link_libraries(${name} PRIVATE kiln_static)
  endforeach()
  if(KILN_MPIRUN)
    foreach(np 1 2 4)
      add_test(NAME test_dist_np${np}
               COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/run.sh ${KILN_MPIRUN} ${np} ${CMAKE_BINARY_DIR}/bin/tests)
      set_tests_properties(test_dist_np${np} PROPERTIES LABELS e2e TIMEOUT 600
        ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_dist_np${np}")
    endforeach()
    # the same with the all-reduces through MPI, not shared memory
    add_test(NAME test_dist_np2_mpi
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/run.sh ${KILN_MPIRUN} 2 ${CMAKE_BINARY_DIR}/bin/tests test_dist
                     KILN_DIST_SHM=0)
    set_tests_properties(test_dist_np2_mpi PROPERTIES LABELS e2e TIMEOUT 600
      ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_dist_np2_mpi")
    # a collective one rank skips (the timeout report) and a killed rank
    add_test(NAME test_dist_failures
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/fail.sh ${KILN_MPIRUN} ${CMAKE_BINARY_DIR}/bin/tests)
    set_tests_properties(test_dist_failures PROPERTIES LABELS e2e TIMEOUT 300
      ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_dist_failures")
    # ranks tracing different graphs: an error on every rank, not a hang
    # (timeout: a hang fails the test instead of waiting for ctest's limit);
    # the rank-prefixed KILN_DEBUG lines and metrics header
    foreach(np 2 4)
      add_test(NAME test_diverge_np${np}
               COMMAND timeout 180 bash ${CMAKE_SOURCE_DIR}/tests/dist/run.sh ${KILN_MPIRUN} ${np}
                       ${CMAKE_BINARY_DIR}/bin/tests test_diverge KILN_DEBUG=1 KILN_METRICS=1)
      set_tests_properties(test_diverge_np${np} PROPERTIES LABELS e2e TIMEOUT 240
        ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_diverge_np${np}")
    endforeach()
    # the transports: TCP, two network namespaces as two hosts, a world of 8
    foreach(mode tcp netns np8)
      add_test(NAME test_dist_${mode}
               COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/net.sh ${KILN_MPIRUN} ${CMAKE_BINARY_DIR}/bin/tests ${mode})
      set_tests_properties(test_dist_${mode} PROPERTIES LABELS e2e TIMEOUT 700 SKIP_REGULAR_EXPRESSION "^SKIP:"
        ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_dist_${mode}")
    endforeach()
    # `kiln train` under mpirun -np 2 against one process (same global batch)
    add_test(NAME test_dist_train COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/train.sh ${KILN_MPIRUN}
                                          $<TARGET_FILE:kiln_cli>)
    set_tests_properties(test_dist_train PROPERTIES LABELS e2e TIMEOUT 900 SKIP_REGULAR_EXPRESSION "^SKIP:"
      ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_dist_train")
    # a real 2-rank capture with a slow rank: the summary names it (tests/dist/test_dist_prof.sh)
    add_test(NAME test_dist_prof
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/test_dist_prof.sh ${KILN_MPIRUN} ${CMAKE_BINARY_DIR}/bin)
    set_tests_properties(test_dist_prof PROPERTIES LABELS e2e TIMEOUT 300
      ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_dist_prof")
  endif()
elseif(NOT KILN_FUZZ)
  message(STATUS "kiln: MPI not found (libopenmpi-dev): distributed runs are disabled")
endif()
