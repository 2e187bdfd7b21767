# evloop_set_warnings(target): the project's warning set, per target (never global).
function(evloop_set_warnings target)
    target_compile_options(${target} PRIVATE
        $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wstrict-prototypes
            -Wmissing-prototypes -Wpointer-arith -Wno-unused-parameter>
        $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
    if(EVLOOP_WERROR)
        target_compile_options(${target} PRIVATE -Werror)
    endif()
endfunction()
