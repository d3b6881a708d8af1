/* kernels/vec.h's loops at x86-64-v3 (AVX2, FMA, F16C); see vec_loops.h. */
#define RT_VEC_TABLE_NAME rt_vec_table_avx2
#include "kernels/vec_loops.h"
