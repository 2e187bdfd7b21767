# What builds by default. The library always; the tests, the benchmark suite, the examples,
# the tools and valgrind memcheck only when evloop is the top-level project (not under
# add_subdirectory or FetchContent, whose users want the library alone), and tests and bench
# only when what
# they need is installed: tests cmocka, bench google-benchmark, libuv and libev (and the
# bench not in a sanitizer or fuzzer build). The defaults are decided on the first
# configure of a build folder; an explicit -DEVLOOP_BUILD_TESTS=ON / -DEVLOOP_BUILD_BENCH=ON
# still fails loudly when a piece is missing. C++ is enabled only for what needs it (the
# header's C++ check, the bench, Python).
if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
    set(EVLOOP_IS_TOP_LEVEL ON)
else()
    set(EVLOOP_IS_TOP_LEVEL OFF)
endif()

include(CheckLanguage)
if(EVLOOP_IS_TOP_LEVEL OR EVLOOP_BUILD_TESTS OR EVLOOP_BUILD_BENCH OR EVLOOP_BUILD_PYTHON)
    check_language(CXX)
    if(CMAKE_CXX_COMPILER)
        enable_language(CXX)
    endif()
endif()

if(NOT DEFINED EVLOOP_BUILD_TESTS)
    set(evloop_default OFF)
    if(EVLOOP_IS_TOP_LEVEL)
        find_path(EVLOOP_CMOCKA_INCLUDE_DIR cmocka.h)
        find_library(EVLOOP_CMOCKA_LIBRARY cmocka)
        if(NOT EVLOOP_CMOCKA_INCLUDE_DIR OR NOT EVLOOP_CMOCKA_LIBRARY)
            message(STATUS "evloop: tests off: cmocka not found (Debian: libcmocka-dev)")
        elseif(NOT CMAKE_CXX_COMPILER)
            message(STATUS "evloop: tests off: no C++ compiler (the header's C++ check)")
        else()
            set(evloop_default ON)
        endif()
    endif()
endif()
option(EVLOOP_BUILD_TESTS "build the cmocka tests (default: ON at top level with cmocka)"
       ${evloop_default})

if(NOT DEFINED EVLOOP_BUILD_BENCH)
    set(evloop_default OFF)
    if(EVLOOP_IS_TOP_LEVEL AND (NOT EVLOOP_SANITIZE STREQUAL "" OR EVLOOP_BUILD_FUZZ))
        # A sanitized or fuzzing build measures the instrumentation, not evloop.
        message(STATUS "evloop: bench off: sanitizer or fuzzer build")
    elseif(EVLOOP_IS_TOP_LEVEL)
        if(CMAKE_CXX_COMPILER)
            find_package(benchmark QUIET)
        endif()
        find_package(PkgConfig QUIET)
        if(PkgConfig_FOUND)
            pkg_check_modules(EVLOOP_PROBE_LIBUV QUIET libuv)
        endif()
        find_path(LIBEV_INCLUDE_DIR ev.h)
        find_library(LIBEV_LIBRARY ev)
        set(evloop_missing)
        if(NOT CMAKE_CXX_COMPILER)
            list(APPEND evloop_missing "a C++ compiler")
        endif()
        if(NOT benchmark_FOUND)
            list(APPEND evloop_missing "google-benchmark (libbenchmark-dev)")
        endif()
        if(NOT EVLOOP_PROBE_LIBUV_FOUND)
            list(APPEND evloop_missing "libuv (libuv1-dev)")
        endif()
        if(NOT LIBEV_INCLUDE_DIR OR NOT LIBEV_LIBRARY)
            list(APPEND evloop_missing "libev (libev-dev)")
        endif()
        if(evloop_missing)
            string(REPLACE ";" ", " evloop_missing "${evloop_missing}")
            message(STATUS "evloop: bench off: not found: ${evloop_missing}")
        else()
            set(evloop_default ON)
        endif()
    endif()
endif()
option(EVLOOP_BUILD_BENCH
       "build the benchmark suite (default: ON at top level with google-benchmark, libuv, libev)"
       ${evloop_default})

# tests/stress/CMakeLists.txt turns memcheck on when valgrind is found; under another
# project it starts off (the option is then already in the cache when that file asks).
if(NOT EVLOOP_IS_TOP_LEVEL)
    option(EVLOOP_MEMCHECK "run the functional suite under valgrind memcheck (memcheck.*)" OFF)
endif()

# The examples need only the library; a wheel build (EVLOOP_BUILD_PYTHON) wants the modules.
set(evloop_default ${EVLOOP_IS_TOP_LEVEL})
if(EVLOOP_BUILD_PYTHON)
    set(evloop_default OFF)
endif()
option(EVLOOP_BUILD_EXAMPLES "build examples/ (each is a ctest entry too)" ${evloop_default})
# The tools (tools/: evloop_autotune) need only the library and are installed with it.
option(EVLOOP_BUILD_TOOLS "build tools/ (evloop_autotune), installed with the library"
       ${evloop_default})

option(EVLOOP_INSTALL "install the library, header, CMake package and pkg-config file"
       ${EVLOOP_IS_TOP_LEVEL})
