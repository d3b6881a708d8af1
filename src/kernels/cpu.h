/* Which x86-64 instruction-set level revtorch's own loops run at.
 *
 * The library is compiled for a baseline (x86-64-v2: SSE4.2, POPCNT) so one
 * binary runs on every x86-64 CPU of the last fifteen years. The loops that
 * matter for speed are also compiled for x86-64-v3 (AVX2, FMA, F16C) and
 * x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) in translation units named *_avx2.c and
 * *_avx512.c (CMakeLists.txt gives them their -march), and a table picks one
 * at run time. oneDNN dispatches its own kernels the same way; the level here
 * follows oneDNN's effective ISA (dnnl_get_effective_cpu_isa), so the one
 * switch oneDNN documents, DNNL_MAX_CPU_ISA (e.g. =AVX2), forces both down
 * together: that is how the tests prove an AVX-512 machine and an AVX2 one
 * compute the same results with the same binary. */
#ifndef RT_KERNELS_CPU_H
#define RT_KERNELS_CPU_H

typedef enum rt_cpu_level {
    RT_CPU_BASELINE = 0, /* x86-64-v2 */
    RT_CPU_AVX2 = 1,     /* x86-64-v3: AVX2 + FMA + F16C */
    RT_CPU_AVX512 = 2,   /* x86-64-v4: AVX-512 F/BW/CD/DQ/VL */
} rt_cpu_level;

/* The level revtorch's own loops use in this process: the highest level that
 * both the CPU supports (__builtin_cpu_supports) and oneDNN's effective ISA
 * allows (DNNL_MAX_CPU_ISA caps it; dnnl_set_max_cpu_isa before the first
 * oneDNN primitive does too). Computed once on first use and constant
 * afterwards (the process-wide cache is the library's only mutable global and
 * holds a value every thread computes identically). Never fails. */
rt_cpu_level rt_cpu_level_get(void);

/* "x86-64-v2", "AVX2" or "AVX-512" (for start-up lines and benchmarks);
 * "unknown" for a value outside the enum. Never NULL. */
const char *rt_cpu_level_name(rt_cpu_level level);

/* oneDNN's effective ISA as its documented name without the prefix
 * ("avx512_core_amx", "avx2", ...), "unknown" for a value this build does not
 * know. Never NULL. */
const char *rt_cpu_dnnl_isa_name(void);

#endif
