/* kernels/vec.h's loops at x86-64-v4 (AVX-512); see vec_loops.h. */
#define RT_VEC_TABLE_NAME rt_vec_table_avx512
#include "kernels/vec_loops.h"
