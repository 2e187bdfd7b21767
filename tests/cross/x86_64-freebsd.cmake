# Cross toolchain: FreeBSD (amd64): kqueue backend, condvar wake, built by zig.
# cmake -DCMAKE_TOOLCHAIN_FILE=tests/cross/x86_64-freebsd.cmake -DEVLOOP_ZIG_BIN=DIR ...
# (tests/cross/run.sh does it all).
set(CMAKE_SYSTEM_NAME FreeBSD)
set(CMAKE_SYSTEM_PROCESSOR amd64)
set(EVLOOP_ZIG_TARGET x86_64-freebsd)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
