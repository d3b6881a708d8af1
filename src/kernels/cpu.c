#include "kernels/cpu.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdatomic.h>

/* -1 until the first call computes it; every thread computes the same value,
 * so a race only repeats the work. */
static _Atomic int rt_cpu_level_cached = -1;

static rt_cpu_level rt_cpu_level_detect(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned avx512_core = (unsigned)dnnl_cpu_isa_avx512_core, avx2 = (unsigned)dnnl_cpu_isa_avx2;
    __builtin_cpu_init();
    if ((isa & avx512_core) == avx512_core && __builtin_cpu_supports("x86-64-v4")) return RT_CPU_AVX512;
    if ((isa & avx2) == avx2 && __builtin_cpu_supports("x86-64-v3")) return RT_CPU_AVX2;
    return RT_CPU_BASELINE;
}

rt_cpu_level rt_cpu_level_get(void) {
    int level = atomic_load_explicit(&rt_cpu_level_cached, memory_order_relaxed);
    if (level < 0) {
        level = (int)rt_cpu_level_detect();
        atomic_store_explicit(&rt_cpu_level_cached, level, memory_order_relaxed);
    }
    return (rt_cpu_level)level;
}

const char *rt_cpu_level_name(rt_cpu_level level) {
    switch (level) {
    case RT_CPU_BASELINE: return "x86-64-v2";
    case RT_CPU_AVX2: return "AVX2";
    case RT_CPU_AVX512: return "AVX-512";
    }
    return "unknown";
}

const char *rt_cpu_dnnl_isa_name(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_all: return "all";
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    }
    return "unknown";
}
