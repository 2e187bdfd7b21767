// Compiles include/evloop.h as C++17 with -Wall -Wextra -pedantic -Werror and links a few
// calls against the C library, which proves the extern "C" guards. Exits 0 on success.
#include "evloop.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(std::is_same<evloop_timer_id, std::uint64_t>::value, "timer ids are uint64_t");
static_assert(std::is_same<decltype(&evloop_submit), int (*)(evloop *, evloop_cb, void *)>::value,
              "evloop_submit keeps its signature");
static_assert(EVLOOP_READABLE == 1u && EVLOOP_WRITABLE == 2u && EVLOOP_HANGUP == 4u &&
                  EVLOOP_ERROR == 8u,
              "event bits");

static void task(void *)
{
}

int main()
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    evloop_cb cb = task;
    struct evloop_stats st {
    };
    (void)cb;
    (void)st;
    const char *msg = evloop_strerror(-EINVAL);
    if (msg == nullptr || std::strlen(msg) == 0 || evloop_ingress() == nullptr ||
        evloop_now_ns() == 0 || evloop_state(nullptr) != EVLOOP_TERMINATED) {
        std::puts("header.cxx: unexpected result from the library");
        return 1;
    }
    return 0;
}
