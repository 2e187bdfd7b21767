/* soak_proto: what the C soak's server (c_soak.c) and clients (c_soak_client.c) agree on, the
 * same protocol aio_soak.py speaks: a request "GET /r/<conn>/<seq> HTTP/1.1" with "X-Size: N"
 * (and "Connection: close" on a connection's last request, when the server is to close it)
 * is answered "200 OK" with the body "id=<conn>/<seq>;" and N filler bytes that depend on
 * the id; the echo server sends back the bytes it reads. Also the clients' report line, the
 * clock and /proc readings. Header-only. */
#ifndef SOAK_PROTO_H
#define SOAK_PROTO_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SOAK_ALPHA "abcdefghijklmnopqrstuvwxyz0123456789"
#define SOAK_ALPHA_LEN 36u
#define SOAK_MAX_SIZE 65536u                        /* the largest X-Size the server accepts */
#define SOAK_SIGNAL_TIMEOUT_NS (10 * 1000000000ull) /* a signal not handled by then is lost */
#define SOAK_OP_TIMEOUT_S 30                        /* a reply not there by then is lost */

static inline uint32_t soak_fnv1a(const char *p, size_t n)
{
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x01000193u;
    return h;
}

/* Bytes of the body answering request id rid (rid_len bytes) with size filler bytes. */
static inline size_t soak_body_len(size_t rid_len, size_t size)
{
    return 3 + rid_len + 1 + size;
}

/* Writes that body at out (soak_body_len() bytes). */
static inline void soak_body(char *out, const char *rid, size_t rid_len, size_t size)
{
    uint32_t r = soak_fnv1a(rid, rid_len) % SOAK_ALPHA_LEN;
    memcpy(out, "id=", 3);
    memcpy(out + 3, rid, rid_len);
    out[3 + rid_len] = ';';
    char *f = out + 4 + rid_len;
    for (size_t i = 0; i < size; i++)
        f[i] = SOAK_ALPHA[(r + i) % SOAK_ALPHA_LEN];
}

/* The request for <conn>/<seq> into buf; returns its length. */
static inline size_t soak_request(char *buf, size_t cap, uint64_t conn, uint64_t seq, size_t size,
                                  bool close)
{
    int n = snprintf(buf, cap, "GET /r/%llu/%llu HTTP/1.1\r\nHost: soak\r\nX-Size: %zu\r\n%s\r\n",
                     (unsigned long long)conn, (unsigned long long)seq, size,
                     close ? "Connection: close\r\n" : "");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* The clients' counters, reported as one line "soak-client k=v ..." on their stdout. */
#define SOAK_CLIENT_FIELDS(X)                                                                      \
    X(ok)                                                                                          \
    X(http) X(echo) X(conns) X(resets) X(halfcloses) X(server_closes) X(slow) X(idle) X(idle_peak) \
        X(errors) X(connect_retries) X(final)

struct soak_client_report {
#define SOAK_FIELD(name) uint64_t name;
    SOAK_CLIENT_FIELDS(SOAK_FIELD)
#undef SOAK_FIELD
};

/* The clients' main (c_soak_client.c): c_soak runs itself with --client. */
int soak_client_main(int argc, char **argv);

static inline uint64_t soak_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void soak_sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) < 0)
        continue; /* EINTR (the soak's signals): sleep the rest */
}

/* xorshift64*: the clients' and workers' random numbers. */
static inline uint64_t soak_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* This process's resident set in bytes (/proc/self/statm), 0 if unreadable. */
static inline uint64_t soak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* This process's open fds (/proc/self/fd, less the one reading it), -1 if unreadable. */
static inline int soak_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;
}

#endif /* SOAK_PROTO_H */
