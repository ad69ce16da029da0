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
    # a real 2-rank capture with a slow rank: the summary names it (tests/dist/test_dist_prof.sh)
    add_test(NAME test_dist_prof
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/test_dist_prof.sh ${KILN_MPIRUN} ${CMAKE_BINARY_DIR}/bin)
    set_tests_properties(test_dist_prof PROPERTIES LABELS e2e TIMEOUT 300
      ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache/test_dist_prof")
  endif()
elseif(NOT KILN_FUZZ)
  message(STATUS "kiln: MPI not found (libopenmpi-dev): distributed runs are disabled")
endif()
