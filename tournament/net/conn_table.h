/* conn_table: the open connections of a server, indexed by fd, so a server can close and
 * free those left when it stops. Loop thread only; header-only. */
#ifndef BENCH_NET_CONN_TABLE_H
#define BENCH_NET_CONN_TABLE_H

#include <errno.h>
#include <stdlib.h>

struct conn_table {
    void **slot; /* slot[fd]: the connection of fd, or NULL */
    int cap;
};

/* Records conn as fd's. Returns 0 or -ENOMEM. */
static inline int conn_table_put(struct conn_table *t, int fd, void *conn)
{
    if (fd >= t->cap) {
        int cap = t->cap ? t->cap : 1024;
        while (cap <= fd)
            cap *= 2;
        void **slot = realloc(t->slot, (size_t)cap * sizeof(*slot));
        if (!slot)
            return -ENOMEM;
        for (int i = t->cap; i < cap; i++)
            slot[i] = NULL;
        t->slot = slot;
        t->cap = cap;
    }
    t->slot[fd] = conn;
    return 0;
}

static inline void conn_table_drop(struct conn_table *t, int fd)
{
    if (fd >= 0 && fd < t->cap)
        t->slot[fd] = NULL;
}

/* Calls close_fn on every connection left, then frees the table. */
static inline void conn_table_close_all(struct conn_table *t, void (*close_fn)(void *conn))
{
    for (int fd = 0; fd < t->cap; fd++)
        if (t->slot[fd])
            close_fn(t->slot[fd]);
    free(t->slot);
    t->slot = NULL;
    t->cap = 0;
}

#endif /* BENCH_NET_CONN_TABLE_H */
