# libquantgraph_onednn.so: the same four ops, computed by oneDNN Graph (src/onednn/).
#
# QUANTGRAPH_ONEDNN=AUTO (default): build it when oneDNN's graph headers are found; ON: they
# must be found; OFF: skip it. Headers: ONEDNN_INCLUDE_DIR (CMake variable or environment),
# else the include directory of the onednn-devel-cpu-gomp (or onednn-devel) wheel installed
# for the Python that runs the build (pyproject.toml's [build-system].requires has it).
# The library does not link libdnnl: its dnnl_* symbols bind at load time to the
# libdnnl.so.3 the Python side loaded first with RTLD_GLOBAL (any oneDNN 3.x).

if(DEFINED ENV{QUANTGRAPH_ONEDNN} AND NOT DEFINED QUANTGRAPH_ONEDNN)
  set(QUANTGRAPH_ONEDNN "$ENV{QUANTGRAPH_ONEDNN}")
endif()
set(QUANTGRAPH_ONEDNN AUTO CACHE STRING "Build libquantgraph_onednn: AUTO, ON or OFF")
set_property(CACHE QUANTGRAPH_ONEDNN PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${QUANTGRAPH_ONEDNN}" QG_ONEDNN_MODE)

if(QG_ONEDNN_MODE STREQUAL "OFF")
  message(STATUS "quantgraph: QUANTGRAPH_ONEDNN=OFF, skipping the onednn kernel library")
  return()
endif()

if(NOT ONEDNN_INCLUDE_DIR AND DEFINED ENV{ONEDNN_INCLUDE_DIR})
  set(ONEDNN_INCLUDE_DIR "$ENV{ONEDNN_INCLUDE_DIR}")
endif()
set(QG_ONEDNN_FROM "ONEDNN_INCLUDE_DIR")
if(NOT ONEDNN_INCLUDE_DIR)
  # scikit-build-core passes the building Python; a plain cmake run asks python3.
  if(Python_EXECUTABLE)
    set(QG_PYTHON "${Python_EXECUTABLE}")
  else()
    find_program(QG_PYTHON3 NAMES python3 python)
    set(QG_PYTHON "${QG_PYTHON3}")
  endif()
  if(QG_PYTHON)
    execute_process(
      COMMAND "${QG_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/cmake/find_onednn_headers.py"
      OUTPUT_VARIABLE QG_ONEDNN_OUT
      RESULT_VARIABLE QG_ONEDNN_RESULT
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(QG_ONEDNN_RESULT EQUAL 0 AND QG_ONEDNN_OUT)
      string(REPLACE "\n" ";" QG_ONEDNN_LINES "${QG_ONEDNN_OUT}")
      list(GET QG_ONEDNN_LINES 0 ONEDNN_INCLUDE_DIR)
      list(GET QG_ONEDNN_LINES 1 QG_ONEDNN_FROM)
    endif()
  endif()
endif()

if(NOT ONEDNN_INCLUDE_DIR OR NOT EXISTS "${ONEDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_graph.h")
  set(QG_ONEDNN_MISSING
    "oneDNN's graph headers (oneapi/dnnl/dnnl_graph.h) not found "
    "(ONEDNN_INCLUDE_DIR='${ONEDNN_INCLUDE_DIR}'; no onednn-devel-cpu-gomp or onednn-devel "
    "installed for ${QG_PYTHON})")
  if(QG_ONEDNN_MODE STREQUAL "ON")
    message(FATAL_ERROR "quantgraph: ${QG_ONEDNN_MISSING}.\n"
      "pip install onednn-devel-cpu-gomp==2023.2.0, set ONEDNN_INCLUDE_DIR, or build without "
      "the onednn library: -DQUANTGRAPH_ONEDNN=OFF")
  endif()
  message(STATUS "quantgraph: ${QG_ONEDNN_MISSING}: skipping the onednn kernel library")
  return()
endif()
file(STRINGS "${ONEDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" QG_DNNL_VERSION_LINES
     REGEX "^#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE "[^;]*_(MAJOR|MINOR|PATCH) +" "" QG_DNNL_VERSION "${QG_DNNL_VERSION_LINES}")
string(REPLACE ";" "." QG_DNNL_VERSION "${QG_DNNL_VERSION}")
message(STATUS "quantgraph: building the onednn kernel library against oneDNN "
        "${QG_DNNL_VERSION} headers in ${ONEDNN_INCLUDE_DIR} (${QG_ONEDNN_FROM})")

add_library(quantgraph_onednn SHARED
  src/onednn/description.cc
  src/onednn/fused.cc
  src/onednn/graph.cc
  src/onednn/kernel.cc
  src/onednn/partition.cc
  src/onednn/partition_kernel.cc
  src/onednn/partition_op.cc
  src/onednn/plan_api.cc
  src/onednn/register.cc
  src/onednn/tables.cc)
target_link_libraries(quantgraph_onednn PRIVATE quantgraph_common ${CMAKE_DL_LIBS})
target_include_directories(quantgraph_onednn PRIVATE src "${ORT_INCLUDE_DIR}")
target_include_directories(quantgraph_onednn SYSTEM PRIVATE "${ONEDNN_INCLUDE_DIR}")
target_compile_options(quantgraph_onednn PRIVATE ${QG_FP_FLAGS} -Wall -Wextra -fvisibility=hidden
                       -fvisibility-inlines-hidden)
set_target_properties(quantgraph_onednn PROPERTIES
  OUTPUT_NAME quantgraph_onednn
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
if(NOT APPLE)
  # No --no-undefined: dnnl_* stay undefined on purpose. -z now makes a load without oneDNN in
  # the process fail at dlopen ("undefined symbol: dnnl_...") instead of at the first call.
  target_link_options(quantgraph_onednn PRIVATE -Wl,-z,now -Wl,--as-needed
                      "-Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/src/onednn/exports.map")
  set_property(TARGET quantgraph_onednn APPEND PROPERTY LINK_DEPENDS
               "${CMAKE_CURRENT_SOURCE_DIR}/src/onednn/exports.map")
endif()

install(TARGETS quantgraph_onednn LIBRARY DESTINATION quantgraph/_native)
