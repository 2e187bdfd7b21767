# The library targets. Every variant is built as its own static library
# (evloop_arena, evloop_chunk) so tests, benchmarks and the Python module can use both
# from one build; `evloop` (alias evloop::evloop) is the variant EVLOOP_INGRESS names.
find_package(Threads REQUIRED)

if(EVLOOP_WAKE STREQUAL "auto")
    if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
        set(EVLOOP_WAKE futex)
    elseif(APPLE)
        set(EVLOOP_WAKE ulock)
    else()
        set(EVLOOP_WAKE condvar)
    endif()
endif()

set(EVLOOP_CORE_SOURCES
    src/core/loop.c
    src/core/tick.c
    src/core/submit.c
    src/core/timer.c
    src/core/io.c
    src/core/backend.c
    src/core/error.c
    src/core/profile.c
    src/core/autotune.c
    src/core/wake_${EVLOOP_WAKE}.c)

set(EVLOOP_BACKENDS)
set(EVLOOP_BACKEND_SOURCES)
set(EVLOOP_BACKEND_LIBS)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    list(APPEND EVLOOP_BACKENDS epoll)
    list(APPEND EVLOOP_BACKEND_SOURCES src/backends/epoll/epoll.c)
endif()
if(EVLOOP_WITH_IO_URING AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/io_uring/io_uring.c)
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
        pkg_check_modules(LIBURING QUIET IMPORTED_TARGET liburing)
    endif()
    if(LIBURING_FOUND)
        list(APPEND EVLOOP_BACKENDS io_uring)
        list(APPEND EVLOOP_BACKEND_SOURCES src/backends/io_uring/io_uring.c
             src/backends/io_uring/probe.c)
        list(APPEND EVLOOP_BACKEND_LIBS PkgConfig::LIBURING)
    endif()
endif()
# kqueue is native on macOS and the BSDs; elsewhere (Linux) EVLOOP_WITH_KQUEUE builds it
# against libkqueue (found with pkg-config), only to check the backend without a BSD.
option(EVLOOP_WITH_KQUEUE "also build the kqueue backend where it is not native (libkqueue)" OFF)
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/kqueue/kqueue.c AND
   (CMAKE_SYSTEM_NAME MATCHES "Darwin|BSD|DragonFly" OR EVLOOP_WITH_KQUEUE))
    if(NOT CMAKE_SYSTEM_NAME MATCHES "Darwin|BSD|DragonFly")
        find_package(PkgConfig REQUIRED)
        pkg_check_modules(LIBKQUEUE REQUIRED IMPORTED_TARGET libkqueue)
        list(APPEND EVLOOP_BACKEND_LIBS PkgConfig::LIBKQUEUE)
    endif()
    list(APPEND EVLOOP_BACKENDS kqueue)
    list(APPEND EVLOOP_BACKEND_SOURCES src/backends/kqueue/kqueue.c)
endif()
message(STATUS "evloop: ingress ${EVLOOP_INGRESS}, wake ${EVLOOP_WAKE}, backends ${EVLOOP_BACKENDS}")

# evloop_add_library(target variant): one static library of the core + one variant.
function(evloop_add_library target variant)
    add_library(${target} STATIC ${EVLOOP_CORE_SOURCES} ${EVLOOP_BACKEND_SOURCES}
                src/variants/${variant}/${variant}.c)
    target_include_directories(${target}
        PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
        PRIVATE ${PROJECT_SOURCE_DIR}/src/core ${PROJECT_SOURCE_DIR}/src)
    foreach(b IN LISTS EVLOOP_BACKENDS)
        string(TOUPPER ${b} B)
        target_compile_definitions(${target} PRIVATE EVLOOP_HAVE_${B}=1)
    endforeach()
    target_compile_definitions(${target} PRIVATE _GNU_SOURCE)
    set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET hidden)
    target_link_libraries(${target} PUBLIC Threads::Threads PRIVATE ${EVLOOP_BACKEND_LIBS})
    evloop_set_warnings(${target})
    evloop_set_sanitizers(${target})
endfunction()

evloop_add_library(evloop_arena arena)
evloop_add_library(evloop_chunk chunk)
evloop_add_library(evloop ${EVLOOP_INGRESS})
add_library(evloop::evloop ALIAS evloop)
