#include "backend/backend.h"

#include "backend/tables.h"

const rt_backend *rt_backend_get(rt_device device) {
    switch (device) {
    case RT_DEVICE_CPU: return &rt_backend_cpu;
    case RT_DEVICE_META: return &rt_backend_meta;
    }
    rt_error_set(RT_ERR_INVALID_ARG, "rt_backend_get: unknown device %d (RT_DEVICE_CPU or RT_DEVICE_META)",
                 (int)device);
    return NULL;
}

const rt_backend *rt_backend_of(const rt_tensor *t) {
    if (!t) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_backend_of: the tensor is NULL");
        return NULL;
    }
    return rt_backend_get(t->device);
}
