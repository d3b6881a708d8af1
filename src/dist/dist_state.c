/* Saving and loading a sharded optimizer's state in the unsharded format
 * (dist/dist.h: rt_dist_gather_state, rt_dist_scatter_state). The state is
 * reached through rt_optimizer_state_visit, whose names carry the global
 * parameter index ("state.<i>.exp_avg"), so shards and the full optimizer
 * meet by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "dist/dist_impl.h"

#ifdef RT_HAVE_MPI

/* One optimizer's state gathered by a visit: per parameter its step and
 * buffers (borrowed from the live state), and the step count. */
typedef struct rt_state_table {
    int n;
    int32_t step_count;
    int32_t *step;
    rt_tensor *(*buf)[2];
    bool *present;
} rt_state_table;

/* "state.<i>.<key>" → i and entry 0 (step), 1 (first buffer), 2 (second);
 * "step_count" → i = -1. */
static void rt_state_name(const char *name, int *i, int *e) {
    char key[64] = "";
    *i = -1;
    *e = 0;
    if (sscanf(name, "state.%d.%63s", i, key) != 2) {
        *i = -1;
        return;
    }
    *e = !strcmp(key, "step") ? 0 : (!strcmp(key, "momentum_buffer") || !strcmp(key, "exp_avg")) ? 1 : 2;
}

static rt_status rt_table_fill(void *ud, const char *name, rt_tensor *t) {
    rt_state_table *tb = ud;
    int i, e;
    rt_state_name(name, &i, &e);
    if (i < 0) {
        tb->step_count = *(int32_t *)rt_tensor_data(t);
        return RT_OK;
    }
    if (i >= tb->n) return rt_error_set(RT_ERR_INVALID_ARG, "optimizer state entry %s is outside %d parameters", name, tb->n);
    tb->present[i] = true;
    if (e == 0) tb->step[i] = *(int32_t *)rt_tensor_data(t);
    else tb->buf[i][e - 1] = t; /* live state: valid while the optimizer lives */
    return RT_OK;
}

static void rt_table_free(rt_state_table *tb) {
    free(tb->step);
    free(tb->buf);
    free(tb->present);
}

static rt_status rt_table_of(rt_optimizer *opt, rt_state_table *tb) {
    *tb = (rt_state_table){.n = rt_optimizer_param_count(opt)};
    tb->step = calloc((size_t)tb->n, sizeof *tb->step);
    tb->buf = calloc((size_t)tb->n, sizeof *tb->buf);
    tb->present = calloc((size_t)tb->n, sizeof *tb->present);
    if (!tb->step || !tb->buf || !tb->present) {
        rt_table_free(tb);
        return rt_error_set(RT_ERR_OOM, "optimizer state: out of memory");
    }
    rt_status st = rt_optimizer_state_visit(opt, rt_table_fill, tb);
    if (st != RT_OK) rt_table_free(tb);
    return st;
}

static rt_status rt_same_kind(const char *who, rt_optimizer *a, rt_optimizer *b) {
    if (rt_optimizer_param_count(a) != rt_optimizer_param_count(b) ||
        strcmp(rt_optimizer_name(a), rt_optimizer_name(b)))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: the full optimizer (%s, %d parameters) does not match the "
                            "training one (%s, %d parameters)", who, rt_optimizer_name(b), rt_optimizer_param_count(b),
                            rt_optimizer_name(a), rt_optimizer_param_count(a));
    return RT_OK;
}

/* Writes entries of the visited optimizer from a table (every rank's own). */
typedef struct rt_fill_from {
    rt_dist *d;
    rt_state_table *src;
    bool receive; /* rank 0 of a gather: entries of other ranks' parameters are received */
} rt_fill_from;

static rt_status rt_fill_entry(void *ud, const char *name, rt_tensor *t) {
    rt_fill_from *f = ud;
    int i, e;
    rt_state_name(name, &i, &e);
    if (i < 0) {
        *(int32_t *)rt_tensor_data(t) = f->src->step_count;
        return RT_OK;
    }
    if (f->receive && f->d->shard && f->d->owner[i] != f->d->rank) {
        MPI_Request req;
        int rc = MPI_Irecv(rt_tensor_data(t), (int)rt_tensor_nbytes(t), MPI_BYTE, f->d->owner[i], i * 3 + e,
                           f->d->comm, &req);
        if (rc != MPI_SUCCESS) return rt_dist_mpi_error(f->d, rc, "receiving the optimizer state");
        return rt_dist_wait(f->d, 1, &req, NULL, "receiving the optimizer state for saving");
    }
    if (i >= f->src->n || !f->src->present[i])
        return rt_error_set(RT_ERR_STATE, "optimizer state: entry %s is missing from its source", name);
    if (e == 0) *(int32_t *)rt_tensor_data(t) = f->src->step[i];
    else memcpy(rt_tensor_data(t), rt_tensor_data(f->src->buf[i][e - 1]), rt_tensor_nbytes(t));
    return RT_OK;
}

/* A non-root rank's part of a gather: sends each of its entries to rank 0. */
static rt_status rt_send_entry(void *ud, const char *name, rt_tensor *t) {
    rt_dist *d = ud;
    int i, e;
    rt_state_name(name, &i, &e);
    if (i < 0) return RT_OK; /* the step count is the same on every rank */
    MPI_Request req;
    int rc = MPI_Isend(rt_tensor_data(t), (int)rt_tensor_nbytes(t), MPI_BYTE, 0, i * 3 + e, d->comm, &req);
    if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, "sending the optimizer state");
    return rt_dist_wait(d, 1, &req, NULL, "sending the optimizer state to rank 0 for saving");
}

rt_status rt_dist_gather_state(rt_dist *d, rt_optimizer *full) {
    if (!d) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_gather_state: d is NULL");
    if (d->rank != 0) return d->shard ? rt_optimizer_state_visit(d->opt, rt_send_entry, d) : RT_OK;
    if (!full) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_gather_state: full is NULL on rank 0");
    RT_TRY(rt_same_kind("rt_dist_gather_state", d->opt, full));
    rt_state_table own;
    RT_TRY(rt_table_of(d->opt, &own));
    rt_fill_from f = {.d = d, .src = &own, .receive = true};
    rt_status st = rt_optimizer_state_visit(full, rt_fill_entry, &f);
    rt_table_free(&own);
    if (st == RT_OK) rt_optimizer_set_step_count(full, rt_optimizer_step_count(d->opt));
    return st;
}

rt_status rt_dist_scatter_state(rt_dist *d, rt_optimizer *full) {
    if (!d || !full) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_scatter_state: %s is NULL", !d ? "d" : "full");
    RT_TRY(rt_same_kind("rt_dist_scatter_state", d->opt, full));
    rt_state_table src;
    RT_TRY(rt_table_of(full, &src));
    rt_fill_from f = {.d = d, .src = &src, .receive = false};
    rt_status st = rt_optimizer_state_visit(d->opt, rt_fill_entry, &f);
    rt_table_free(&src);
    if (st == RT_OK) rt_optimizer_set_step_count(d->opt, rt_optimizer_step_count(full));
    return st;
}

#endif
