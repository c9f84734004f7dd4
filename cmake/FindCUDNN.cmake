# Finds cuDNN (cudnn.h, libcudnn) and the header-only cuDNN frontend (cudnn_frontend.h).
# Looks in CUDNN_ROOT / CUDNN_FRONTEND_ROOT, the CUDA toolkit, the system, the frontend headers that
# scripts/setup.sh unpacks into .whl/cudnn_frontend, and the Python packages of the interpreter
# (nvidia-cudnn-cu13 carries the library, nvidia-cudnn-frontend the headers).
# Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_FRONTEND_VERSION, CUDNN_NOT_FOUND_REASON and the
# imported targets CUDNN::cudnn and CUDNN::frontend.
set(_cudnn_py_hints "")
find_package(Python3 QUIET COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
    "import importlib.util as u, os\nfor m in ('nvidia.cudnn', 'cudnn'):\n  try:\n    s = u.find_spec(m)\n  except Exception:\n    continue\n  for p in (s.submodule_search_locations or []) if s else []:\n    print(p)\n    print(os.path.dirname(p))"
    OUTPUT_VARIABLE _py_out OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(REPLACE "\n" ";" _cudnn_py_hints "${_py_out}")
endif()

find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda ${_cudnn_py_hints}
  PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda ${_cudnn_py_hints}
  PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
  HINTS ${CUDNN_FRONTEND_ROOT} $ENV{CUDNN_FRONTEND_ROOT} ${CMAKE_SOURCE_DIR}/.whl/cudnn_frontend ${_cudnn_py_hints}
  PATH_SUFFIXES include)

if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _v REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*" "\\1" _maj "${_v}")
  string(REGEX REPLACE ".*CUDNN_MINOR ([0-9]+).*" "\\1" _min "${_v}")
  string(REGEX REPLACE ".*CUDNN_PATCHLEVEL ([0-9]+).*" "\\1" _pat "${_v}")
  set(CUDNN_VERSION "${_maj}.${_min}.${_pat}")
endif()
if(CUDNN_FRONTEND_INCLUDE_DIR AND EXISTS "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h")
  file(STRINGS "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h" _v
       REGEX "^#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION ")
  string(REGEX REPLACE ".*MAJOR_VERSION ([0-9]+).*" "\\1" _maj "${_v}")
  string(REGEX REPLACE ".*MINOR_VERSION ([0-9]+).*" "\\1" _min "${_v}")
  string(REGEX REPLACE ".*PATCH_VERSION ([0-9]+).*" "\\1" _pat "${_v}")
  set(CUDNN_FRONTEND_VERSION "${_maj}.${_min}.${_pat}")
endif()

# A directory given by hand (-DCUDNN_FRONTEND_INCLUDE_DIR=...) is not searched, so check it holds the header.
if(CUDNN_FRONTEND_INCLUDE_DIR AND NOT EXISTS "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend.h")
  set(_cudnn_frontend_bad_dir "${CUDNN_FRONTEND_INCLUDE_DIR}")
  set(CUDNN_FRONTEND_INCLUDE_DIR "CUDNN_FRONTEND_INCLUDE_DIR-NOTFOUND" CACHE PATH "" FORCE)
endif()

# The reasons hold no semicolon: CMake would split the message into arguments of
# find_package_handle_standard_args, which then stops the configure on "unknown keywords".
set(CUDNN_NOT_FOUND_REASON "")
if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
  set(CUDNN_NOT_FOUND_REASON "cuDNN (cudnn.h and libcudnn) was not found at configure time: set CUDNN_ROOT")
elseif(CUDNN_VERSION VERSION_LESS 9.0)
  set(CUDNN_NOT_FOUND_REASON "cuDNN ${CUDNN_VERSION} is too old: the fused attention graphs need cuDNN 9")
elseif(_cudnn_frontend_bad_dir)
  set(CUDNN_NOT_FOUND_REASON "CUDNN_FRONTEND_INCLUDE_DIR ${_cudnn_frontend_bad_dir} has no cudnn_frontend.h")
elseif(NOT CUDNN_FRONTEND_INCLUDE_DIR)
  set(CUDNN_NOT_FOUND_REASON "the cuDNN frontend headers (cudnn_frontend.h) were not found: run scripts/setup.sh or set CUDNN_FRONTEND_ROOT")
endif()
string(REPLACE ";" "," CUDNN_NOT_FOUND_REASON "${CUDNN_NOT_FOUND_REASON}")

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR CUDNN_FRONTEND_INCLUDE_DIR
  VERSION_VAR CUDNN_VERSION REASON_FAILURE_MESSAGE "${CUDNN_NOT_FOUND_REASON}")
if(CUDNN_FOUND AND CUDNN_VERSION VERSION_LESS 9.0)
  set(CUDNN_FOUND FALSE)
endif()
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES
    IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
  # Header-only; imported, so its headers are system headers and their warnings stay out of seqpar's build.
  add_library(CUDNN::frontend INTERFACE IMPORTED)
  set_target_properties(CUDNN::frontend PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_FRONTEND_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY CUDNN_FRONTEND_INCLUDE_DIR)
