#include "core/device.h"

#include <string.h>

static rt_status rt_cpu_alloc(size_t nbytes, rt_mem_category cat, void **out) {
    return rt_mem_alloc(nbytes, cat, out);
}

static void rt_cpu_copy(void *dst, const void *src, size_t nbytes) {
    if (nbytes) memcpy(dst, src, nbytes);
}

/* Meta books exactly what the CPU would allocate, so a meta run's peak is
 * the real run's (tests/test_memory.c meta_matches_real, tests/test_predict.c). */
static rt_status rt_meta_alloc(size_t nbytes, rt_mem_category cat, void **out) {
    *out = NULL;
    return rt_mem_account(nbytes, cat);
}

static void rt_meta_free(void *p, size_t nbytes, rt_mem_category cat) {
    (void)p;
    rt_mem_unaccount(nbytes, cat);
}

static void rt_meta_copy(void *dst, const void *src, size_t nbytes) {
    (void)dst, (void)src, (void)nbytes;
}

const rt_device_memory rt_device_memory_cpu = {"cpu", RT_DEVICE_CPU, rt_cpu_alloc, rt_mem_free,
                                                      rt_cpu_copy};
const rt_device_memory rt_device_memory_meta = {"meta", RT_DEVICE_META, rt_meta_alloc, rt_meta_free,
                                                       rt_meta_copy};

const rt_device_memory *rt_device_memory_get(rt_device device) {
    switch (device) {
    case RT_DEVICE_CPU: return &rt_device_memory_cpu;
    case RT_DEVICE_META: return &rt_device_memory_meta;
    }
    return NULL;
}

const char *rt_device_name(rt_device device) {
    const rt_device_memory *m = rt_device_memory_get(device);
    return m ? m->name : "unknown";
}
