# ctest Consumer.Cxx17GetsOneClearError: compiles SOURCE (a consumer of kvinfer/kvinfer.h) as
# C++17 against INCLUDES and checks that it fails with kvinfer's #error and no error after it.
#   cmake -DCOMPILER=g++ -DSOURCE=main.cpp -DINCLUDES="inc1;inc2" -P cxx17_refused.cmake
set(flags -std=c++17 -fsyntax-only)
foreach(dir IN LISTS INCLUDES)
  list(APPEND flags -I${dir})
endforeach()
execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE} RESULT_VARIABLE status ERROR_VARIABLE err OUTPUT_VARIABLE out
                TIMEOUT 120)
string(APPEND err "${out}")
if(status EQUAL 0)
  message(FATAL_ERROR "a C++17 consumer compiled:\n${err}")
endif()
if(NOT err MATCHES "kvinfer needs C\\+\\+20")
  message(FATAL_ERROR "no 'kvinfer needs C++20' in the compiler's errors:\n${err}")
endif()
# The #error, then the fatal stop: no error from the code after it (std::span, ...).
string(REGEX MATCHALL "error:" errors "${err}")
list(LENGTH errors count)
if(count GREATER 2 OR err MATCHES "span")
  message(FATAL_ERROR "${count} errors, not kvinfer's one line and its stop:\n${err}")
endif()
message(STATUS "C++17 refused with: ${err}")
