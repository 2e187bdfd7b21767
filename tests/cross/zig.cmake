# The part the cross toolchains in this folder share: zig (the PyPI package ziglang) as the C
# and C++ compiler, archiver and linker for the target EVLOOP_ZIG_TARGET that the including
# file names. zig ships each target's C library headers and links its executables, so no
# SDK or sysroot is needed. tests/cross/run.sh installs zig and writes the wrappers
# (cc, c++, ar, ranlib: `zig <tool> "$@"`) into EVLOOP_ZIG_BIN.
if(NOT EVLOOP_ZIG_BIN)
    set(EVLOOP_ZIG_BIN "$ENV{EVLOOP_ZIG_BIN}")
endif()
if(NOT EXISTS "${EVLOOP_ZIG_BIN}/cc")
    message(FATAL_ERROR "evloop cross toolchain: no zig wrappers in EVLOOP_ZIG_BIN "
                        "(\"${EVLOOP_ZIG_BIN}\"); tests/cross/run.sh makes them")
endif()
# try_compile projects read this file again: give them the same wrappers.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES EVLOOP_ZIG_BIN)

set(CMAKE_C_COMPILER "${EVLOOP_ZIG_BIN}/cc")
set(CMAKE_CXX_COMPILER "${EVLOOP_ZIG_BIN}/c++")
set(CMAKE_C_COMPILER_TARGET ${EVLOOP_ZIG_TARGET})   # CMake passes --target=... to clang
set(CMAKE_CXX_COMPILER_TARGET ${EVLOOP_ZIG_TARGET})
set(CMAKE_AR "${EVLOOP_ZIG_BIN}/ar" CACHE FILEPATH "zig's archiver" FORCE)
set(CMAKE_RANLIB "${EVLOOP_ZIG_BIN}/ranlib" CACHE FILEPATH "zig's ranlib" FORCE)

# macOS: checked against macOS 11 (the first on arm64), so a call newer than that fails the
# build (-Wunguarded-availability-new under -Werror) instead of the program at run time.
if(CMAKE_SYSTEM_NAME STREQUAL "Darwin")
    set(CMAKE_OSX_DEPLOYMENT_TARGET 11.0 CACHE STRING "oldest macOS to build for")
endif()

# CMake wants install_name_tool for Mach-O targets (it rewrites install names when
# installing); zig has none, LLVM's does the same job (Debian: llvm-14).
if(CMAKE_SYSTEM_NAME STREQUAL "Darwin")
    find_program(CMAKE_INSTALL_NAME_TOOL
                 NAMES llvm-install-name-tool-14 llvm-install-name-tool install_name_tool)
    if(NOT CMAKE_INSTALL_NAME_TOOL)
        message(FATAL_ERROR "evloop cross toolchain: no install_name_tool for Mach-O "
                            "(Debian: apt-get install llvm-14)")
    endif()
endif()

# The one C++ program (tests/header_cxx.cc) uses the C library and header-only templates,
# nothing of the C++ runtime: linking without libc++ spares zig building it from source for
# each target (minutes on two cores). A C++ program that needs it fails to link, loudly.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-nostdlib++")

# Nothing of the host may be found: no headers, libraries or packages (the host's cmocka,
# liburing, libkqueue), and no pkg-config file (the target has none): both search roots are
# a folder that does not exist.
set(CMAKE_FIND_ROOT_PATH "${CMAKE_CURRENT_LIST_DIR}/no-sysroot")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} "${CMAKE_CURRENT_LIST_DIR}/no-sysroot")
set(ENV{PKG_CONFIG_PATH} "")
