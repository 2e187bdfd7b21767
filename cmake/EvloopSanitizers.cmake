# evloop_set_sanitizers(target): applies EVLOOP_SANITIZE (address = ASan+UBSan,
# thread = TSan) to one target, and turns on EVLOOP_ASSERT there.
function(evloop_set_sanitizers target)
    if(EVLOOP_SANITIZE STREQUAL "address")
        set(flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
                  -fno-omit-frame-pointer)
    elseif(EVLOOP_SANITIZE STREQUAL "thread")
        set(flags -fsanitize=thread -fno-omit-frame-pointer)
    elseif(EVLOOP_SANITIZE STREQUAL "")
        return()
    else()
        message(FATAL_ERROR "EVLOOP_SANITIZE must be '', address or thread")
    endif()
    target_compile_options(${target} PRIVATE ${flags})
    target_compile_definitions(${target} PRIVATE EVLOOP_DEBUG=1)
    target_link_options(${target} PUBLIC ${flags})
endfunction()
