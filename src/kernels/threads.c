#include "kernels/threads.h"

#include <cblas.h>
#include <omp.h>

void rt_set_num_threads(int n) {
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int rt_get_num_threads(void) { return omp_get_max_threads(); }
