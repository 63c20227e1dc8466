# The embedding package that `cmake --install` writes (docs/embedding.md):
#
#   include/meshflow/          the public headers, the only ones a host includes
#   lib/libmeshflow.so         the interpreter, planner and runtime in one library
#   lib/cmake/meshflow/        meshflowConfig.cmake: find_package(meshflow) gives
#                              the imported target meshflow::meshflow
#   share/meshflow/stdlib/     the .mesh standard library
#   bin/meshflow               the command-line tool
#
# The build tree links its tools and tests against the static libraries; a host
# gets one shared library, so it never copies the link line of eight archives.
# The library finds the stdlib relative to where it is installed
# (interp/StdlibLocation.cpp), so the installed tree can be moved.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Every object of the static libraries goes into the shared one; what they link
# in turn (fmt, ANTLR, Z3, BLAS, threads) stays a dependency of libmeshflow.so.
set(meshflow_archives meshflow_interp meshflow_grammar meshflow_grammar_generated
    meshflow_passes meshflow_runtime meshflow_ir)
add_library(meshflow_shared SHARED ${CMAKE_CURRENT_LIST_DIR}/Empty.cpp)
set_target_properties(meshflow_shared PROPERTIES
  OUTPUT_NAME meshflow EXPORT_NAME meshflow
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_link_libraries(meshflow_shared PRIVATE
  -Wl,--whole-archive ${meshflow_archives} -Wl,--no-whole-archive)
target_include_directories(meshflow_shared INTERFACE
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(meshflow_shared INTERFACE cxx_std_20)

# Inside this build a host (examples/embed) names the target as an installed
# host does, and links the static libraries behind it.
add_library(meshflow::meshflow ALIAS meshflow_all)

install(TARGETS meshflow_shared EXPORT meshflowTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS meshflow RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/meshflow
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/stdlib/
        DESTINATION ${MESHFLOW_INSTALL_STDLIBDIR} FILES_MATCHING PATTERN "*.mesh")

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/meshflow)
install(EXPORT meshflowTargets NAMESPACE meshflow:: DESTINATION ${config_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/meshflowConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/meshflowConfig.cmake INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/meshflowConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/meshflowConfig.cmake
        ${CMAKE_CURRENT_BINARY_DIR}/meshflowConfigVersion.cmake DESTINATION ${config_dir})
