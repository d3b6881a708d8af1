/* `revtorch train` under MPI: start-up, one speaking rank, abort on failure
 * (cli/ only; the library part is src/dist/dist.h). */
#ifndef CLI_DIST_H
#define CLI_DIST_H

#include <stdbool.h>

#include "dist/dist.h"
#include "dist/sync_bn.h"

typedef struct cli_dist {
    bool active;  /* MPI was initialised by this process */
    int rank, size; /* 0 and 1 when not distributed */
    rt_dist *d;   /* the library's data parallelism, once the optimizer exists */
} cli_dist;

/* True when an MPI launcher started this process (Open MPI's mpirun sets
 * OMPI_COMM_WORLD_SIZE; MPICH/Hydra and Slurm set PMI_SIZE; PMIx PMIX_RANK),
 * as Horovod and torchrun users expect: no flag is needed under mpirun. */
bool cli_dist_launched(void);

/* Initialises MPI when launched under it or when `forced` (--distributed).
 * On ranks other than 0 standard output goes to /dev/null: one rank speaks;
 * errors still reach standard error. Returns 0, or 2 (message printed) for
 * --distributed in a build without MPI. */
int cli_dist_start(cli_dist *c, bool forced);

/* After a failure on this rank: with more than one rank, ends the whole job
 * at once (MPI_Abort: mpirun then names this rank) instead of leaving the
 * others waiting in a collective. Returns rc otherwise. */
int cli_dist_fail(cli_dist *c, int rc);

/* The world communicator (a placeholder without MPI, never used then). */
static inline rt_comm cli_dist_world(void) {
#ifdef RT_HAVE_MPI
    return MPI_COMM_WORLD;
#else
    return 0;
#endif
}

/* Frees the data parallelism and finalises MPI (when started here). */
void cli_dist_end(cli_dist *c);

#endif
