/* Status codes and the thread-local last-error message.
 *
 * Every fallible library function returns an rt_status (or NULL for
 * constructors) and, on failure, leaves a human-readable message that names
 * the problem and the fix; read it with rt_error_last(). The message buffer is
 * thread-local, so concurrent threads never see each other's errors.
 * Mirrors the negative-errno convention of libuv/Linux (see docs/design.md). */
#ifndef RT_CORE_STATUS_H
#define RT_CORE_STATUS_H

typedef enum rt_status {
    RT_OK = 0,
    RT_STOPPED = 1,            /* not an error: a checkpoint's recompute ended early on purpose
                                  (memory/checkpoint.c; never returned by the API) */
    RT_ERR_INVALID_ARG = -1,   /* a caller passed a bad value (NULL, out of range) */
    RT_ERR_SHAPE = -2,         /* tensor shapes do not fit together */
    RT_ERR_DTYPE = -3,         /* unsupported or mismatched dtype */
    RT_ERR_OOM = -4,           /* tracked allocation over the byte limit, or malloc failed */
    RT_ERR_IO = -5,            /* a file could not be opened, read or written */
    RT_ERR_FORMAT = -6,        /* a file's contents are malformed */
    RT_ERR_BACKEND = -7,       /* oneDNN or BLAS refused a call */
    RT_ERR_GRAPH_RELEASED = -8,/* backward through a graph whose saved tensors were freed */
    RT_ERR_NO_GRAD = -9,       /* backward on a tensor that does not require grad */
    RT_ERR_NONFINITE = -10,    /* NaN or Inf where a finite value is required */
    RT_ERR_UNSUPPORTED = -11,  /* a valid request this build cannot serve (e.g. meta data read) */
    RT_ERR_STATE = -12,        /* an object used in the wrong state */
    RT_ERR_RECONSTRUCTION = -13, /* a reversible block's rebuilt input drifted beyond tolerance */
    RT_ERR_COMM = -30,         /* a collective with other ranks failed or timed out (dist/) */
} rt_status;

/* Short constant name of a status, e.g. "RT_ERR_SHAPE". Never NULL. */
const char *rt_status_str(rt_status s);

/* Records a printf-style message as this thread's last error and returns
 * `code`, so call sites read `return rt_error_set(RT_ERR_SHAPE, "...")`.
 * A NULL fmt still records `code`, with a message saying the format was NULL. */
rt_status rt_error_set(rt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* This thread's last error message ("" when none). Valid until the next
 * rt_error_set on this thread. */
const char *rt_error_last(void);

/* The code passed with this thread's last message (RT_OK when none), for
 * functions that report failure by returning NULL. */
rt_status rt_error_last_status(void);

/* Clears this thread's last error message. */
void rt_error_clear(void);

/* Propagates a failing status: `RT_TRY(f(x));` returns the status of f when it fails. */
#define RT_TRY(expr)                                                                     \
    do {                                                                                 \
        rt_status rt_try_s_ = (expr);                                                    \
        if (rt_try_s_ != RT_OK) return rt_try_s_;                                        \
    } while (0)

#endif
