# Cross toolchain: macOS (arm64): kqueue backend, ulock wake (os_sync_wait_on_address or __ulock_wait2), built by zig.
# cmake -DCMAKE_TOOLCHAIN_FILE=tests/cross/aarch64-macos.cmake -DEVLOOP_ZIG_BIN=DIR ...
# (tests/cross/run.sh does it all).
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_SYSTEM_PROCESSOR arm64)
set(EVLOOP_ZIG_TARGET aarch64-macos)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
