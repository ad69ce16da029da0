# The profiler server (docs/profiling.md): tensorflow.ProfilerService over
# gRPC, in src/profiler/server/grpc_server.cc, the only C++ in kiln.
# Included at the end of CMakeLists.txt, once the kiln targets exist.
#
# Needs (Debian): libgrpc++-dev libprotobuf-dev protobuf-compiler
# protobuf-compiler-grpc. Without them kiln still builds and
# kiln_profiler_server_start reports UNSUPPORTED (src/profiler/server/server.c).
#
# C++ code for proto/profiler_service.proto and proto/profiler_options.proto
# is generated at build time into ${CMAKE_BINARY_DIR}/gen/proto. (Their C
# code, protobuf-c, comes with every proto/*.proto from CMakeLists.txt: the
# fuzz harness tests/fuzz/fuzz_profile_request.c decodes requests with it.)

# (Skipped in the libFuzzer build, see below; pkg-config's answer for grpc++
# is cached after the first, slow, query.)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND AND NOT KILN_FUZZ)
  pkg_check_modules(KILN_GRPC QUIET IMPORTED_TARGET grpc++ protobuf)
endif()
find_program(KILN_PROTOC protoc)
find_program(KILN_GRPC_CPP_PLUGIN grpc_cpp_plugin)

set(KILN_PROFILER_PROTOS profiler_service profiler_options)
set(KILN_PROTO_DIR ${CMAKE_SOURCE_DIR}/proto)
set(KILN_PROTO_GEN ${CMAKE_BINARY_DIR}/gen/proto) # not KILN_PROTO_OUT: the protobuf-c output
file(MAKE_DIRECTORY ${KILN_PROTO_GEN})
set(KILN_PROFILER_PROTO_FILES)
foreach(p ${KILN_PROFILER_PROTOS})
  list(APPEND KILN_PROFILER_PROTO_FILES ${KILN_PROTO_DIR}/${p}.proto)
endforeach()

# The libFuzzer build (scripts/fuzz.sh) compiles C with clang and only needs
# the request checks: it leaves the C++ server out rather than mix two
# compilers' sanitizer runtimes in one link.
if(KILN_GRPC_FOUND AND KILN_PROTOC AND KILN_GRPC_CPP_PLUGIN AND NOT KILN_FUZZ)
  get_property(kiln_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CXX" IN_LIST kiln_langs)
    enable_language(CXX)
  endif()
  set(CMAKE_CXX_STANDARD 17)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  set(gen_cc)
  foreach(p ${KILN_PROFILER_PROTOS})
    list(APPEND gen_cc ${KILN_PROTO_GEN}/${p}.pb.cc ${KILN_PROTO_GEN}/${p}.grpc.pb.cc)
  endforeach()
  add_custom_command(
    OUTPUT ${gen_cc}
    COMMAND ${KILN_PROTOC} -I${KILN_PROTO_DIR} --cpp_out=${KILN_PROTO_GEN} --grpc_out=${KILN_PROTO_GEN}
            --plugin=protoc-gen-grpc=${KILN_GRPC_CPP_PLUGIN} ${KILN_PROFILER_PROTO_FILES}
    DEPENDS ${KILN_PROFILER_PROTO_FILES}
    COMMENT "protoc: C++ and gRPC code for the profiler service"
    VERBATIM)
  # Generated code is not ours to keep warning-free.
  set_source_files_properties(${gen_cc} PROPERTIES COMPILE_OPTIONS "-w")
  # Its own shared object, loaded by src/profiler/server/server.c on first
  # use: libkiln and the programs linked with it do not depend on gRPC.
  include(GNUInstallDirs)
  add_library(kiln_grpc MODULE ${CMAKE_SOURCE_DIR}/src/profiler/server/grpc_server.cc ${gen_cc})
  target_include_directories(kiln_grpc PRIVATE ${KILN_PROTO_GEN} ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(kiln_grpc PRIVATE PkgConfig::KILN_GRPC)
  set_target_properties(kiln_grpc PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
                                             CXX_VISIBILITY_PRESET hidden)
  target_compile_definitions(kiln_obj PRIVATE
    KILN_GRPC_MODULE_BUILD="${CMAKE_BINARY_DIR}/lib/libkiln_grpc.so"
    KILN_GRPC_MODULE_INSTALLED="${CMAKE_INSTALL_FULL_LIBDIR}/kiln/libkiln_grpc.so")
  # An install moved elsewhere, or made with `cmake --install --prefix P`,
  # finds the module from where libkiln.so (or the program, in <bindir>)
  # lies: server.c tries these relative paths first.
  if(NOT IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" AND NOT IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
    file(RELATIVE_PATH kiln_bin_to_module "/p/${CMAKE_INSTALL_BINDIR}" "/p/${CMAKE_INSTALL_LIBDIR}/kiln/libkiln_grpc.so")
    get_filename_component(kiln_bindir_name "${CMAKE_INSTALL_BINDIR}" NAME)
    target_compile_definitions(kiln_obj PRIVATE
      KILN_GRPC_MODULE_FROM_LIB="kiln/libkiln_grpc.so"
      KILN_GRPC_MODULE_FROM_BIN="${kiln_bin_to_module}"
      KILN_GRPC_BINDIR_NAME="${kiln_bindir_name}")
  endif()
  foreach(t kiln kiln_static)
    add_dependencies(${t} kiln_grpc)
  endforeach()
  install(TARGETS kiln_grpc LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/kiln)
  message(STATUS "kiln: profiler server with gRPC ${KILN_GRPC_grpc++_VERSION}")
elseif(NOT KILN_FUZZ)
  message(STATUS "kiln: gRPC not found (pkg-config grpc++ protobuf, protoc, grpc_cpp_plugin): "
                 "the profiler server is disabled")
endif()
