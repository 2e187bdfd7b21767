# The library targets. Every variant is built as its own static library
# (evloop_arena, evloop_chunk) so tests, benchmarks and the Python module can use both
# from one build; `evloop` (alias evloop::evloop) is the variant EVLOOP_INGRESS names, the
# one that is installed: static, or shared with BUILD_SHARED_LIBS. With
# EVLOOP_BUNDLE_LIBURING (default) `evloop` carries the liburing code it uses (see
# docs/design.md, "Build, packaging and linking"), so a program linked with -levloop alone
# starts without liburing.so.2, and a consumer's configure never looks for liburing.
find_package(Threads REQUIRED)

# include/evloop.h's EVLOOP_VERSION_* (and so evloop_version()) must say the project version.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/evloop.h evloop_version_lines
     REGEX "^#define EVLOOP_VERSION_(MAJOR|MINOR|PATCH) ")
set(evloop_header_version)
foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "EVLOOP_VERSION_${part} ([0-9]+)" evloop_match "${evloop_version_lines}")
    list(APPEND evloop_header_version "${CMAKE_MATCH_1}")
endforeach()
string(REPLACE ";" "." evloop_header_version "${evloop_header_version}")
if(NOT evloop_header_version STREQUAL PROJECT_VERSION)
    message(FATAL_ERROR "include/evloop.h says version ${evloop_header_version}, the project "
                        "${PROJECT_VERSION}: EVLOOP_VERSION_* and project(VERSION) must agree")
endif()

if(EVLOOP_WAKE STREQUAL "auto")
    if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
        set(EVLOOP_WAKE futex)
    elseif(APPLE)
        set(EVLOOP_WAKE ulock)
    else()
        set(EVLOOP_WAKE condvar)
    endif()
endif()

# In the layers of docs/design.md ("Layers inside the core"), top first.
set(EVLOOP_CORE_SOURCES
    src/core/lifecycle.c
    src/core/run_once.c
    src/core/run.c
    src/core/tick.c
    src/core/tick_poll.c
    src/core/embed_fd.c
    src/core/hooks.c
    src/core/signals.c
    src/core/work.c
    src/core/ops.c
    src/core/ops_emulate.c
    src/core/ops_sim.c
    src/core/io.c
    src/core/timer.c
    src/core/submit.c
    src/core/callback.c
    src/core/release.c
    src/core/state.c
    src/core/sleep.c
    src/core/spin.c
    src/core/barrier.c
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
# io_uring is Linux's: on another system (a cross build) a liburing.pc that pkg-config finds
# belongs to the host and must not add the backend. When it is left out,
# EVLOOP_IO_URING_LEFT_OUT says why (a build from the sdist with only a compiler has no
# pkg-config, and the user should be told rather than find out from benchmarks).
set(EVLOOP_IO_URING_OFF_WHY "" CACHE STRING
    "why EVLOOP_WITH_IO_URING is OFF, in words for the user (the portable wheel's build sets it)")
set(EVLOOP_IO_URING_LEFT_OUT "")
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
    set(EVLOOP_IO_URING_LEFT_OUT "not Linux")
elseif(NOT EVLOOP_WITH_IO_URING)
    set(EVLOOP_IO_URING_LEFT_OUT "EVLOOP_WITH_IO_URING=OFF")
    if(EVLOOP_IO_URING_OFF_WHY)
        set(EVLOOP_IO_URING_LEFT_OUT "${EVLOOP_IO_URING_OFF_WHY}")
    endif()
elseif(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/io_uring/io_uring.c)
    set(EVLOOP_IO_URING_LEFT_OUT "no src/backends/io_uring in the sources")
else()
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
        pkg_check_modules(LIBURING QUIET IMPORTED_TARGET GLOBAL liburing)
        if(NOT LIBURING_FOUND)
            set(EVLOOP_IO_URING_LEFT_OUT
                "pkg-config finds no liburing (Debian: apt-get install liburing-dev)")
        endif()
    else()
        set(EVLOOP_IO_URING_LEFT_OUT
            "no pkg-config to find liburing with (Debian: apt-get install pkg-config liburing-dev)")
    endif()
    if(LIBURING_FOUND)
        list(APPEND EVLOOP_BACKENDS io_uring)
        list(APPEND EVLOOP_BACKEND_SOURCES src/backends/io_uring/io_uring.c
             src/backends/io_uring/ring_wait.c
             src/backends/io_uring/native_ops.c src/backends/io_uring/probe.c)
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
# How `evloop` gets liburing: "bundled" (liburing.a folded in), "shared" (linked to
# liburing.so: programs then need it to start), or "none" (no io_uring backend).
set(EVLOOP_LIBURING_MODE none)
if(io_uring IN_LIST EVLOOP_BACKENDS)
    set(EVLOOP_LIBURING_MODE shared)
    if(EVLOOP_BUNDLE_LIBURING)
        find_library(EVLOOP_LIBURING_ARCHIVE NAMES liburing.a
                     HINTS ${LIBURING_LIBDIR} ${LIBURING_LIBRARY_DIRS})
        if(EVLOOP_LIBURING_ARCHIVE AND CMAKE_LINKER AND CMAKE_OBJCOPY AND CMAKE_NM AND CMAKE_AR)
            set(EVLOOP_LIBURING_MODE bundled)
        else()
            message(WARNING "evloop: EVLOOP_BUNDLE_LIBURING: no liburing.a (or no ld, objcopy, "
                            "nm, ar): libevloop links liburing.so, and programs need it to start")
        endif()
    endif()
endif()
message(STATUS "evloop: ingress ${EVLOOP_INGRESS}, wake ${EVLOOP_WAKE}, backends "
               "${EVLOOP_BACKENDS}, liburing ${EVLOOP_LIBURING_MODE}")
if(EVLOOP_IO_URING_LEFT_OUT AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    message(STATUS "evloop: io_uring backend left out: ${EVLOOP_IO_URING_LEFT_OUT}")
endif()

# evloop_add_library(target variant [SHARED] [BUNDLE]): the core + one variant, static unless
# SHARED. BUNDLE: liburing.a goes inside (see EVLOOP_LIBURING_MODE) instead of being a link
# dependency of the target.
function(evloop_add_library target variant)
    cmake_parse_arguments(ARG "SHARED;BUNDLE" "" "" ${ARGN})
    set(type STATIC)
    if(ARG_SHARED)
        set(type SHARED)
    endif()
    add_library(${target} ${type} ${EVLOOP_CORE_SOURCES} ${EVLOOP_BACKEND_SOURCES}
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
    target_link_libraries(${target} PUBLIC Threads::Threads)
    set(libs ${EVLOOP_BACKEND_LIBS})
    if(ARG_BUNDLE)
        # liburing's headers to compile, not its library to link: it goes inside.
        list(REMOVE_ITEM libs PkgConfig::LIBURING)
        target_include_directories(${target} SYSTEM PRIVATE ${LIBURING_INCLUDE_DIRS})
        target_compile_options(${target} PRIVATE ${LIBURING_CFLAGS_OTHER})
        if(ARG_SHARED)
            # Linked in, and its symbols kept out of the export table: the .so exports
            # the evloop_* API only (everything of ours is -fvisibility=hidden).
            target_link_libraries(${target} PRIVATE ${EVLOOP_LIBURING_ARCHIVE})
            get_filename_component(archive_name ${EVLOOP_LIBURING_ARCHIVE} NAME)
            target_link_options(${target} PRIVATE "LINKER:--exclude-libs,${archive_name}")
        else()
            # The archive is rewritten after it is made: one relocatable object of ours and
            # liburing's members we use, every symbol but the evloop_* API made local.
            add_custom_command(TARGET ${target} POST_BUILD
                COMMAND ${CMAKE_COMMAND} -DARCHIVE=$<TARGET_FILE:${target}>
                        -DLIBURING=${EVLOOP_LIBURING_ARCHIVE} -DLD=${CMAKE_LINKER}
                        -DOBJCOPY=${CMAKE_OBJCOPY} -DNM=${CMAKE_NM} -DAR=${CMAKE_AR}
                        -P ${PROJECT_SOURCE_DIR}/cmake/EvloopFoldArchive.cmake
                COMMENT "Folding liburing into $<TARGET_FILE_NAME:${target}>"
                VERBATIM)
        endif()
    endif()
    target_link_libraries(${target} PRIVATE ${libs})
    evloop_set_warnings(${target})
    evloop_set_sanitizers(${target})
endfunction()

evloop_add_library(evloop_arena arena)
evloop_add_library(evloop_chunk chunk)
set(evloop_kind)
if(BUILD_SHARED_LIBS)
    set(evloop_kind SHARED)
endif()
if(EVLOOP_LIBURING_MODE STREQUAL "bundled")
    evloop_add_library(evloop ${EVLOOP_INGRESS} ${evloop_kind} BUNDLE)
else()
    evloop_add_library(evloop ${EVLOOP_INGRESS} ${evloop_kind})
endif()
set_target_properties(evloop PROPERTIES VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
add_library(evloop::evloop ALIAS evloop)
