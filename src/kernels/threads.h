/* One thread count for every compute library revtorch uses. */
#ifndef RT_KERNELS_THREADS_H
#define RT_KERNELS_THREADS_H

/* Sets the number of worker threads for oneDNN and revtorch's own OpenMP
 * loops (omp_set_num_threads: the calling thread's OpenMP setting, so call
 * it from the thread that runs training) and for OpenBLAS
 * (openblas_set_num_threads, process-wide). n <= 0 means all cores
 * (omp_get_num_procs), like torch.set_num_threads with the default.
 *
 * How idle threads wait is not set here: libgomp reads OMP_WAIT_POLICY and
 * GOMP_SPINCOUNT once, when it is loaded, before main. Its default (spin
 * 300000 polls, then sleep) made training steps many times slower on a
 * machine where other processes compete for the cores; a short spin
 * (GOMP_SPINCOUNT=10000) stayed close to --threads 1 there and costs nothing
 * on an idle machine, where OMP_WAIT_POLICY=passive costs 7-18%
 * (bench/threads_under_load.sh, cli/main.c). The revtorch CLI sets the short
 * spin unless the user set either variable; a program that links the library
 * and runs on shared machines should start with GOMP_SPINCOUNT=10000 too. */
void rt_set_num_threads(int n);

/* The count the next parallel kernel on this thread will use
 * (omp_get_max_threads). */
int rt_get_num_threads(void);

#endif
