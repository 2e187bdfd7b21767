# Installs libevloop.a, the header, a CMake package config (find_package(evloop)) and a
# pkg-config file (pkg-config --libs evloop).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS evloop EXPORT evloopTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/evloop.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT evloopTargets NAMESPACE evloop:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/evloop)
configure_package_config_file(cmake/evloopConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/evloopConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/evloop)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/evloopConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/evloopConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/evloopConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/evloop)
if(LIBURING_FOUND)
    set(EVLOOP_PC_PRIVATE_REQUIRES "liburing")
endif()
configure_file(cmake/evloop.pc.in ${CMAKE_CURRENT_BINARY_DIR}/evloop.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/evloop.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
