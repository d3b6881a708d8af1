#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

/* Thread-local by design (see status.h): the only mutable state of this file. */
static _Thread_local char rt_last_error[1024];
static _Thread_local rt_status rt_last_status;

const char *rt_status_str(rt_status s) {
    switch (s) {
    case RT_OK: return "RT_OK";
    case RT_STOPPED: return "RT_STOPPED";
    case RT_ERR_INVALID_ARG: return "RT_ERR_INVALID_ARG";
    case RT_ERR_SHAPE: return "RT_ERR_SHAPE";
    case RT_ERR_DTYPE: return "RT_ERR_DTYPE";
    case RT_ERR_OOM: return "RT_ERR_OOM";
    case RT_ERR_IO: return "RT_ERR_IO";
    case RT_ERR_FORMAT: return "RT_ERR_FORMAT";
    case RT_ERR_BACKEND: return "RT_ERR_BACKEND";
    case RT_ERR_GRAPH_RELEASED: return "RT_ERR_GRAPH_RELEASED";
    case RT_ERR_NO_GRAD: return "RT_ERR_NO_GRAD";
    case RT_ERR_NONFINITE: return "RT_ERR_NONFINITE";
    case RT_ERR_UNSUPPORTED: return "RT_ERR_UNSUPPORTED";
    case RT_ERR_STATE: return "RT_ERR_STATE";
    case RT_ERR_RECONSTRUCTION: return "RT_ERR_RECONSTRUCTION";
    case RT_ERR_COMM: return "RT_ERR_COMM";
    }
    return "RT_ERR_UNKNOWN";
}

rt_status rt_error_set(rt_status code, const char *fmt, ...) {
    if (!fmt) {
        snprintf(rt_last_error, sizeof rt_last_error, "rt_error_set: the message format is NULL (code %s)",
                 rt_status_str(code));
        rt_last_status = code;
        return code;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt_last_error, sizeof rt_last_error, fmt, ap);
    va_end(ap);
    rt_last_status = code;
    return code;
}

const char *rt_error_last(void) { return rt_last_error; }

rt_status rt_error_last_status(void) { return rt_last_status; }

void rt_error_clear(void) {
    rt_last_error[0] = '\0';
    rt_last_status = RT_OK;
}
