# cmake -DARCHIVE=libevloop.a -DLIBURING=liburing.a -DLD=ld -DOBJCOPY=objcopy -DNM=nm -DAR=ar
#       -P EvloopFoldArchive.cmake
# Rewrites the static libevloop.a so that it needs no liburing (run after the archive is
# made, as a POST_BUILD step of the target evloop):
#   1. ld -r links every member of ARCHIVE, and the members of LIBURING they call, into one
#      relocatable object (references between them are resolved there);
#   2. objcopy makes every symbol defined in it local except the public evloop_* API, so
#      liburing's io_uring_* and our evloop__* internals cannot clash with a program's own
#      (a program that also links liburing gets its own copy, never ours);
#   3. ARCHIVE is replaced by an archive of that one object.
# Undefined references (libc, pthread, a sanitizer's runtime) stay global and resolve when
# the program links. Needs GNU binutils and no LTO objects.
foreach(v ARCHIVE LIBURING LD OBJCOPY NM AR)
    if(NOT ${v})
        message(FATAL_ERROR "EvloopFoldArchive: -D${v}=... is required")
    endif()
endforeach()

set(work "${ARCHIVE}.fold")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")

function(run)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        string(REPLACE ";" " " cmd "${ARGN}")
        message(FATAL_ERROR "EvloopFoldArchive: ${cmd}: ${rc}\n${out}${err}")
    endif()
endfunction()

run(${LD} -r -o "${work}/linked.o" --whole-archive "${ARCHIVE}" --no-whole-archive "${LIBURING}")
run(${OBJCOPY} --wildcard "--keep-global-symbol=evloop_[a-z]*" "${work}/linked.o"
    "${work}/libevloop.o")

# What a program linking the result will have to provide: no io_uring_* may be left.
execute_process(COMMAND ${NM} -u "${work}/libevloop.o" OUTPUT_VARIABLE undefined
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "EvloopFoldArchive: ${NM} -u failed")
endif()
if(undefined MATCHES "io_uring")
    message(FATAL_ERROR "EvloopFoldArchive: liburing references left unresolved:\n${undefined}")
endif()

file(REMOVE "${ARCHIVE}")
run(${AR} qcs "${ARCHIVE}" "${work}/libevloop.o")
file(REMOVE_RECURSE "${work}")
