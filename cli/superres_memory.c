/* `revtorch superres memory`: predicted step memory of edsr and revedsr on
 * the meta device, and the largest revedsr batch within edsr's budget. */
#include <stdbool.h>
#include <stdio.h>

#include "common.h"
#include "kernels/conv.h"
#include "superres_internal.h"

/* The largest batch of r (at most r->max_batch; 0 when even 1 does not fit)
 * whose predicted step peak (saved: its SAVED peak) is within budget bytes,
 * with that batch's peaks in *p. Both peaks grow with the batch: doubling,
 * then bisection. */
static rt_status sr_largest_batch(const cli_sr_opts *r, int64_t budget, bool saved, int64_t *best, rt_memstats *p) {
    int64_t lo = 0, hi = 1;
    *p = (rt_memstats){0};
    while (hi <= r->max_batch) {
        RT_TRY(cli_sr_predict(r, hi, p));
        if ((saved ? p->peak[RT_MEM_SAVED] : p->peak_total) > budget) break;
        lo = hi, hi *= 2;
    }
    if (hi > r->max_batch) hi = r->max_batch + 1;
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        RT_TRY(cli_sr_predict(r, mid, p));
        if ((saved ? p->peak[RT_MEM_SAVED] : p->peak_total) <= budget) lo = mid;
        else hi = mid;
    }
    *best = lo;
    return lo > 0 ? cli_sr_predict(r, lo, p) : RT_OK;
}

int cli_sr_memory(const cli_sr_opts *o) {
    cli_sr_opts e = *o, r = *o;
    e.model = "edsr", r.model = "revedsr";
    e.rev_width = e.rev_hidden = 0;
    if (o->rev_blocks) r.blocks = o->rev_blocks;
    rt_memstats pe, pr, ref;
    if (cli_sr_predict(&e, o->batch, &pe) != RT_OK || cli_sr_predict(&r, o->batch, &pr) != RT_OK ||
        cli_sr_predict(&e, o->ref_batch, &ref) != RT_OK)
        return cli_fail("memory prediction failed");
    int64_t params[2];
    const cli_sr_opts *which[2] = {&e, &r};
    for (int i = 0; i < 2; i++) {
        rt_model *m = NULL;
        if (cli_sr_model_create(which[i], RT_DEVICE_META, 0, &m) != RT_OK) return cli_fail("cannot create the model");
        params[i] = rt_state_dict_num_param_elements(m->sd);
        rt_model_destroy(m);
    }
    char we[160], wr[160];
    cli_sr_describe(&e, we, sizeof we);
    cli_sr_describe(&r, wr, sizeof wr);
    printf("one training step (Adam, L1, %lldx%lld LR patches), predicted on the meta device, of\n  %s\n  %s\n",
           (long long)o->patch, (long long)o->patch, we, wr);
    printf("%-8s %10s %6s %20s %14s %14s\n", "model", "params", "batch", "activations (SAVED)", "TEMP peak",
           "step peak");
    const rt_memstats *rows[2] = {&pe, &pr};
    const char *names[2] = {"edsr", "revedsr"};
    for (int i = 0; i < 2; i++)
        printf("%-8s %10lld %6lld %16.1f MiB %10.1f MiB %10.1f MiB\n", names[i], (long long)params[i],
               (long long)o->batch, (double)rows[i]->peak[RT_MEM_SAVED] / 1048576.0,
               (double)rows[i]->peak[RT_MEM_TEMP] / 1048576.0, (double)rows[i]->peak_total / 1048576.0);
    /* the largest batch by step peak (all categories), by activations (SAVED)
     * alone, and by step peak with revedsr's convolutions direct: Winograd's
     * backward scratch (oneDNN's transformed tensors, ~6 MiB per 48x48
     * patch for the upsampler's 64->256 convolution) outgrows revedsr's
     * activations, so in a tight budget trading its speed buys batch */
    const rt_conv_algo algo = rt_conv_algo_get();
    for (int crit = 0; crit < 3; crit++) {
        if (crit == 2 && algo == RT_CONV_ALGO_DIRECT) break;
        const bool saved = crit == 1;
        const int64_t budget = saved ? ref.peak[RT_MEM_SAVED] : ref.peak_total;
        if (crit == 2) rt_conv_algo_set(RT_CONV_ALGO_DIRECT);
        int64_t lo;
        rt_memstats p;
        rt_status st = sr_largest_batch(&r, budget, saved, &lo, &p);
        rt_conv_algo_set(algo);
        if (st != RT_OK) return cli_fail("memory prediction failed");
        const char *what = saved ? "activations (SAVED)" : "step peak";
        printf("edsr at batch %lld: %s %.1f MiB; the largest revedsr batch within it%s: %lld", (long long)o->ref_batch,
               what, (double)budget / 1048576.0, crit == 2 ? " with --conv-algo direct" : "", (long long)lo);
        if (lo > 0)
            printf(" (%s %.1f MiB, %.2fx the batch%s)", what,
                   (double)(saved ? p.peak[RT_MEM_SAVED] : p.peak_total) / 1048576.0,
                   (double)lo / (double)o->ref_batch, lo >= o->max_batch ? "; --max-batch reached" : "");
        printf("\n");
    }
    return 0;
}
