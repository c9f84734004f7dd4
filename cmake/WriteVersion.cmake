# Writes version.cpp from its template with `git describe` of the source tree (else the project
# version). Run at configure time (Version.cmake) and again at every build (core/CMakeLists.txt's
# seqpar_version target): a build after a commit or an edit must not stamp its documents with the
# commit it was configured at. configure_file leaves the file alone when the text is unchanged, so
# nothing recompiles unless the version moved.
# Inputs: SEQPAR_SOURCE_DIR, PROJECT_VERSION, SEQPAR_VERSION_TEMPLATE, SEQPAR_VERSION_OUTPUT.
set(SEQPAR_VERSION "${PROJECT_VERSION}")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --tags
    WORKING_DIRECTORY ${SEQPAR_SOURCE_DIR}
    OUTPUT_VARIABLE _desc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _desc)
    set(SEQPAR_VERSION "${PROJECT_VERSION}-${_desc}")
  endif()
endif()
if(SEQPAR_VERSION_TEMPLATE AND SEQPAR_VERSION_OUTPUT)
  configure_file(${SEQPAR_VERSION_TEMPLATE} ${SEQPAR_VERSION_OUTPUT} @ONLY)
endif()
