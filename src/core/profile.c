/* The profile file: evloop_profile_save, evloop_profile_load and evloop_profile_format.
 * A small text format read and written here, with no library: a first line
 * "# evloop profile", then "key value" lines, one per field of struct evloop_profile.
 * Unknown keys and "#" lines are skipped, so a newer writer's extra keys do not break an
 * older reader; anything else that is not exactly right is -EINVAL, never a crash. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "profile.h"

#define HEADER "# evloop profile"
#define FILE_MAX 65536 /* a profile is under 1 KiB; a bigger file is something else */
#define TEMP_TRIES 100

enum kind { KIND_UNSIGNED, KIND_INT64, KIND_UINT64, KIND_BACKEND };

struct field {
    const char *key;
    enum kind kind;
    size_t offset;
    bool required; /* the measurements may be absent: they are informative only */
};

#define AT(member) offsetof(struct evloop_profile, member)

static const struct field fields[] = {
    {"version", KIND_UNSIGNED, AT(version), true},
    {"ncpu", KIND_UNSIGNED, AT(ncpu), true},
    {"backend", KIND_BACKEND, AT(backend), true},
    {"spin_ns", KIND_INT64, AT(spin_ns), true},
    {"spin_max_ns", KIND_INT64, AT(spin_max_ns), true},
    {"batch_budget", KIND_UNSIGNED, AT(batch_budget), true},
    {"wake_ns", KIND_UINT64, AT(wake_ns), false},
    {"handoff_ns", KIND_UINT64, AT(handoff_ns), false},
};
/* Then one optional "readiness_<backend>_ns" per backend (backend.c's names, in their order):
 * readiness_ns[i]. */
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))
#define NKEYS (NFIELDS + EVLOOP__BACKENDS)

/* The field of key k < NKEYS: fields[k], or readiness_ns[k - NFIELDS]. */
static struct field field_at(size_t k)
{
    if (k < NFIELDS)
        return fields[k];
    return (struct field){NULL, KIND_UINT64, AT(readiness_ns) + (k - NFIELDS) * sizeof(uint64_t),
                          false};
}

/* The key of a readiness field, "readiness_epoll_ns", into buf. */
static const char *readiness_key(size_t i, char *buf, size_t size)
{
    snprintf(buf, size, "readiness_%s_ns", evloop_backend_name((unsigned)i));
    return buf;
}

bool evloop__profile_is_valid(const struct evloop_profile *p)
{
    if (p->version != EVLOOP_PROFILE_VERSION || p->ncpu == 0 || p->ncpu > (1u << 20))
        return false;
    if (!memchr(p->backend, '\0', sizeof(p->backend)))
        return false;
    if (strcmp(p->backend, "auto") != 0 && evloop__backend_index(p->backend) < 0)
        return false;
    if (p->spin_max_ns < 0 || p->spin_max_ns > EVLOOP__PROFILE_SPIN_LIMIT_NS || p->spin_ns < 0 ||
        p->spin_ns > p->spin_max_ns)
        return false;
    if (p->batch_budget == 0 || p->batch_budget > EVLOOP__PROFILE_BUDGET_LIMIT)
        return false;
    if (p->wake_ns > EVLOOP__PROFILE_TIME_LIMIT_NS || p->handoff_ns > EVLOOP__PROFILE_TIME_LIMIT_NS)
        return false;
    for (size_t i = 0; i < EVLOOP__BACKENDS; i++)
        if (p->readiness_ns[i] > EVLOOP__PROFILE_TIME_LIMIT_NS)
            return false;
    return true;
}

/* ---- writing --------------------------------------------------------------------------- */

static bool append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size - *len)
        return false;
    *len += (size_t)n;
    return true;
}

static bool append_field(char *buf, size_t size, size_t *len, const struct field *f,
                         const struct evloop_profile *p)
{
    const char *key = f->key;
    const char *at = (const char *)p + f->offset;
    unsigned u;
    int64_t i;
    uint64_t v;
    switch (f->kind) {
    case KIND_UNSIGNED:
        memcpy(&u, at, sizeof(u));
        return append(buf, size, len, "%s %u\n", key, u);
    case KIND_INT64:
        memcpy(&i, at, sizeof(i));
        return append(buf, size, len, "%s %" PRId64 "\n", key, i);
    case KIND_UINT64:
        memcpy(&v, at, sizeof(v));
        return append(buf, size, len, "%s %" PRIu64 "\n", key, v);
    case KIND_BACKEND: return append(buf, size, len, "%s %s\n", key, at);
    }
    return false;
}

EVLOOP_API int evloop_profile_format(const struct evloop_profile *p, char *buf, size_t size)
{
    if (!p || !buf || size == 0 || !evloop__profile_is_valid(p))
        return -EINVAL;
    size_t len = 0;
    bool ok = append(buf, size, &len, "%s\n", HEADER);
    for (size_t k = 0; ok && k < NKEYS; k++) {
        struct field f = field_at(k);
        char key[48];
        if (!f.key)
            f.key = readiness_key(k - NFIELDS, key, sizeof(key));
        ok = append_field(buf, size, &len, &f, p);
    }
    if (!ok) {
        buf[0] = '\0';
        return -ENOSPC;
    }
    return 0;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Creates a new file beside path (so rename() stays within one file system); its name
 * goes into tmp. Returns the fd or -errno. */
static int create_temp(const char *path, char *tmp, size_t tmp_size)
{
    static _Atomic unsigned counter;
    for (int tries = 0; tries < TEMP_TRIES; tries++) {
        /* relaxed: only makes names differ between threads of this process */
        unsigned n = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
        snprintf(tmp, tmp_size, "%s.%ld.%u.tmp", path, (long)getpid(), n);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd >= 0 ? fd : -errno;
    }
    return -EEXIST;
}

EVLOOP_API int evloop_profile_save(const struct evloop_profile *p, const char *path)
{
    if (!p || !path)
        return -EINVAL;
    char text[EVLOOP_PROFILE_TEXT_MAX];
    int r = evloop_profile_format(p, text, sizeof(text));
    if (r < 0)
        return r;
    size_t tmp_size = strlen(path) + 48;
    char *tmp = malloc(tmp_size);
    if (!tmp)
        return -ENOMEM;
    int fd = create_temp(path, tmp, tmp_size);
    if (fd < 0) {
        free(tmp);
        return fd;
    }
    r = write_all(fd, text, strlen(text));
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    free(tmp);
    return r;
}

/* ---- reading --------------------------------------------------------------------------- */

/* Reads the whole file into a NUL-terminated malloc'd buffer. Returns 0 or -errno; -EINVAL
 * when it is too big to be a profile or holds a NUL byte. */
static int read_file(const char *path, char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char *buf = malloc(FILE_MAX + 1);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    size_t len = 0;
    int r = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            r = -errno;
        else if ((len += (size_t)n) > FILE_MAX)
            r = -EINVAL;
        if (n <= 0 || r < 0)
            break;
    }
    close(fd);
    if (r == 0 && memchr(buf, '\0', len))
        r = -EINVAL;
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

/* A decimal integer, optionally negative, that is the whole of s: no sign "+", no spaces,
 * no overflow of 64 bits. */
static bool parse_number(const char *s, bool *negative, uint64_t *magnitude)
{
    *negative = *s == '-';
    if (*negative)
        s++;
    if (!*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *magnitude = v;
    return true;
}

/* Stores value into the field of p that f names. Returns false when it does not parse or
 * does not fit the field's type (ranges between fields are checked afterwards). */
static bool set_field(struct evloop_profile *p, const struct field *f, const char *value)
{
    char *at = (char *)p + f->offset;
    if (f->kind == KIND_BACKEND) {
        size_t n = strlen(value);
        if (n == 0 || n >= sizeof(p->backend))
            return false;
        memcpy(at, value, n + 1);
        return true;
    }
    bool negative;
    uint64_t m;
    if (!parse_number(value, &negative, &m))
        return false;
    if (f->kind == KIND_INT64) {
        if (m > (negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
            return false;
        int64_t i = negative ? (int64_t)(0 - m) : (int64_t)m;
        memcpy(at, &i, sizeof(i));
        return true;
    }
    if (negative && m != 0)
        return false;
    if (f->kind == KIND_UNSIGNED) {
        if (m > UINT32_MAX)
            return false;
        unsigned u = (unsigned)m;
        memcpy(at, &u, sizeof(u));
    } else {
        memcpy(at, &m, sizeof(m));
    }
    return true;
}

/* The index (< NKEYS) of key, or NKEYS when no field has it. */
static size_t find_key(const char *key)
{
    for (size_t k = 0; k < NFIELDS; k++)
        if (strcmp(fields[k].key, key) == 0)
            return k;
    char buf[48];
    for (size_t i = 0; i < EVLOOP__BACKENDS; i++)
        if (strcmp(readiness_key(i, buf, sizeof(buf)), key) == 0)
            return NFIELDS + i;
    return NKEYS;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Takes the next line off *text (NUL-terminating it in place), without its trailing blanks.
 * Returns NULL at the end. */
static char *next_line(char **text)
{
    char *line = *text;
    if (!*line)
        return NULL;
    char *nl = strchr(line, '\n');
    *text = nl ? nl + 1 : line + strlen(line);
    char *end = nl ? nl : *text;
    while (end > line && is_blank(end[-1]))
        end--;
    *end = '\0';
    return line;
}

/* Parses the text of a profile file into *p. Returns 0 or -EINVAL. */
static int parse(char *text, struct evloop_profile *p)
{
    char *line = next_line(&text);
    if (!line || strcmp(line, HEADER) != 0)
        return -EINVAL;
    bool seen[NKEYS] = {false};
    while ((line = next_line(&text)) != NULL) {
        while (is_blank(*line))
            line++;
        if (!*line || *line == '#')
            continue;
        char *value = line;
        while (*value && !is_blank(*value))
            value++;
        if (*value)
            *value++ = '\0';
        while (is_blank(*value))
            value++;
        size_t k = find_key(line);
        if (k == NKEYS)
            continue; /* a key of a newer writer */
        struct field f = field_at(k);
        if (seen[k] || !set_field(p, &f, value))
            return -EINVAL;
        seen[k] = true;
    }
    for (size_t k = 0; k < NFIELDS; k++)
        if (fields[k].required && !seen[k])
            return -EINVAL;
    return evloop__profile_is_valid(p) ? 0 : -EINVAL;
}

EVLOOP_API int evloop_profile_load(struct evloop_profile *p, const char *path)
{
    if (!p || !path)
        return -EINVAL;
    char *text = NULL;
    int r = read_file(path, &text);
    if (r < 0)
        return r;
    struct evloop_profile got;
    memset(&got, 0, sizeof(got));
    r = parse(text, &got);
    free(text);
    if (r == 0)
        *p = got;
    return r;
}
