/* Compiles include/evloop.h as strict C11 with -Wall -Wextra -pedantic -Werror, alone (no
 * other header first, so it includes what it needs), and links a few calls. */
#include "evloop.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(evloop_timer_id) == 8, "timer ids are 64-bit");

int main(void)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    const char *msg = evloop_strerror(-EINVAL);
    if (msg == NULL || strlen(msg) == 0 || evloop_ingress() == NULL ||
        evloop_state(NULL) != EVLOOP_TERMINATED) {
        puts("header.c11: unexpected result from the library");
        return 1;
    }
    return 0;
}
