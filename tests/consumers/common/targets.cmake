# evloop_consumer_targets(lib): the two consumer programs of a consumer project, the same
# source as C11 (consumer_c) and as C++17 (consumer_cxx), warnings as errors, linked to lib.
set(EVLOOP_CONSUMER_COMMON ${CMAKE_CURRENT_LIST_DIR})
function(evloop_consumer_targets lib)
    add_executable(consumer_c ${EVLOOP_CONSUMER_COMMON}/consumer.c)
    set_target_properties(consumer_c PROPERTIES
        C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
    add_executable(consumer_cxx ${EVLOOP_CONSUMER_COMMON}/consumer.cpp)
    set_target_properties(consumer_cxx PROPERTIES
        CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
    foreach(t consumer_c consumer_cxx)
        target_compile_options(${t} PRIVATE -Wall -Wextra -pedantic -Werror)
        target_link_libraries(${t} PRIVATE ${lib})
    endforeach()
endfunction()

# With -DEXPECT_NO_LIBURING=ON the caller promises a machine without liburing: check that
# the simulation really hides it (header, library and pkg-config file), else the proof
# would prove nothing.
if(EXPECT_NO_LIBURING)
    find_path(EVLOOP_CONSUMER_URING_H liburing.h)
    find_library(EVLOOP_CONSUMER_URING_LIB uring)
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
        pkg_check_modules(EVLOOP_CONSUMER_URING_PC QUIET liburing)
    endif()
    if(EVLOOP_CONSUMER_URING_H OR EVLOOP_CONSUMER_URING_LIB OR EVLOOP_CONSUMER_URING_PC_FOUND)
        message(FATAL_ERROR "EXPECT_NO_LIBURING, but liburing is visible: header "
                "'${EVLOOP_CONSUMER_URING_H}', library '${EVLOOP_CONSUMER_URING_LIB}', "
                "pkg-config found '${EVLOOP_CONSUMER_URING_PC_FOUND}'")
    endif()
    message(STATUS "consumer: liburing is hidden here (no header, library or liburing.pc)")
endif()
