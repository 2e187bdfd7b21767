# Installs libevloop (static, or shared with BUILD_SHARED_LIBS), the header, a CMake package
# config (find_package(evloop)) and a pkg-config file (pkg-config --libs evloop). Both are
# relocatable: the package config finds itself, and evloop.pc's prefix is ${pcfiledir}, so
# `cmake --install build --prefix P` (or moving P afterwards) needs no reconfigure.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS evloop EXPORT evloopTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/evloop.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT evloopTargets NAMESPACE evloop:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/evloop)

# What a consumer of an installed evloop must link besides libevloop itself: nothing when
# liburing is bundled or absent; liburing when it is not bundled and libevloop is static.
get_target_property(evloop_type evloop TYPE)
set(EVLOOP_NEEDS_LIBURING OFF)
if(EVLOOP_LIBURING_MODE STREQUAL "shared" AND evloop_type STREQUAL "STATIC_LIBRARY")
    set(EVLOOP_NEEDS_LIBURING ON)
endif()
configure_package_config_file(cmake/evloopConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/evloopConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/evloop)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/evloopConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/evloopConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/evloopConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/evloop)

# evloop.pc: prefix relative to the .pc file's own folder (one ".." per component of
# LIBDIR/pkgconfig), unless LIBDIR or INCLUDEDIR was given as an absolute path.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(EVLOOP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
    set(EVLOOP_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
    set(EVLOOP_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
    set(EVLOOP_PC_PREFIX "\${pcfiledir}")
    string(REPLACE "/" ";" evloop_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
    foreach(part IN LISTS evloop_parts)
        if(part AND NOT part STREQUAL ".")
            string(APPEND EVLOOP_PC_PREFIX "/..")
        endif()
    endforeach()
    set(EVLOOP_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
    set(EVLOOP_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# A shared libevloop carries its own dependencies (DT_NEEDED); a static one lists them:
# -pthread always (a no-op on glibc >= 2.34), liburing only when it is not bundled, and then
# as Requires (not .private) so a plain `pkg-config --libs evloop` links too.
set(EVLOOP_PC_REQUIRES "")
if(EVLOOP_NEEDS_LIBURING)
    set(EVLOOP_PC_REQUIRES "Requires: liburing")
elseif(EVLOOP_LIBURING_MODE STREQUAL "shared")
    set(EVLOOP_PC_REQUIRES "Requires.private: liburing")
endif()
configure_file(cmake/evloop.pc.in ${CMAKE_CURRENT_BINARY_DIR}/evloop.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/evloop.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# liburing is MIT / LGPL-2.1 dual licensed; evloop takes it under MIT, whose one condition
# is that its copyright and permission notice go along with the copies: install the notice
# of the liburing that was folded in (Debian: /usr/share/doc/liburing-dev/copyright).
if(EVLOOP_LIBURING_MODE STREQUAL "bundled")
    get_filename_component(evloop_uring_libdir "${EVLOOP_LIBURING_ARCHIVE}" DIRECTORY)
    find_file(EVLOOP_LIBURING_NOTICE NAMES copyright COPYING LICENSE
              PATHS /usr/share/doc/liburing-dev /usr/share/doc/liburing2
                    ${evloop_uring_libdir}/../share/doc/liburing
                    ${evloop_uring_libdir}/../../share/doc/liburing-dev
              NO_DEFAULT_PATH)
    if(EVLOOP_LIBURING_NOTICE)
        install(FILES ${EVLOOP_LIBURING_NOTICE} DESTINATION ${CMAKE_INSTALL_DOCDIR}
                RENAME liburing.copyright)
    else()
        message(WARNING "evloop: liburing is folded into libevloop, but its license notice "
                        "was not found: ship liburing's MIT notice with the library")
    endif()
endif()
