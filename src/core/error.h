/* The detail behind a failure: a thread-local string that evloop_last_error() returns.
 * A failure site that knows which argument, variable or file was wrong records it here just
 * before it returns its -errno; a call that can record one clears it when it starts. */
#ifndef EVLOOP_ERROR_H
#define EVLOOP_ERROR_H

/* Starts a call that may record a detail: the detail reads "" until one is recorded. */
void evloop__error_clear(void);

/* Records the detail of the failure about to be returned (printf-style; cut short at
 * about 255 bytes). Returns err, so a site can write return evloop__error_set(err, ...). */
int evloop__error_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
