/* `revtorch train` under MPI (cli/dist.h). */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>

bool cli_dist_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int cli_dist_start(cli_dist *c, bool forced) {
    *c = (cli_dist){.size = 1};
    if (!forced && !cli_dist_launched()) return 0;
#ifdef RT_HAVE_MPI
    int provided = 0;
    /* one thread calls MPI; OpenMP threads never do */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "revtorch train: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    c->active = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    if (c->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "revtorch train: rank %d cannot silence its output\n", c->rank);
        return 1;
    }
    return 0;
#else
    fprintf(stderr, "revtorch train: %s, but this revtorch was built without MPI; install libopenmpi-dev "
                    "(scripts/setup.sh) and build again\n",
            forced ? "--distributed asks for MPI" : "started by an MPI launcher");
    return 2;
#endif
}

int cli_dist_fail(cli_dist *c, int rc) {
#ifdef RT_HAVE_MPI
    if (c->active && c->size > 1 && rc != 0) {
        fprintf(stderr, "revtorch train: rank %d of %d failed (see above); ending every rank\n", c->rank, c->size);
        fflush(stderr);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
#else
    (void)c;
#endif
    return rc;
}

void cli_dist_end(cli_dist *c) {
    rt_dist_destroy(c->d);
    c->d = NULL;
#ifdef RT_HAVE_MPI
    if (c->active) MPI_Finalize();
#endif
    c->active = false;
}
