/* Reconstruction check of every reversible sequence in a tree (memory/reversible.h). */
#include <math.h>

#include "autograd/node.h"
#include "memory/reversible.h"
#include "ops/ops.h"

typedef struct rt_recon {
    double block_err, chain_err;
    char *worst;
    size_t n;
} rt_recon;

/* Forward hook on every ReversibleSequence: checks its blocks on its input. */
static rt_status rt_recon_hook(rt_module *m, rt_tensor *x, rt_tensor *y, void *user) {
    (void)y;
    rt_recon *r = user;
    rt_tensor *h = rt_tensor_retain(x), *t = NULL;
    rt_status st = RT_OK;
    /* as training runs a sequence: its forward and its rebuild leave a
     * precision region's reduced compute (memory/precision.h), so F and G
     * compute in f32 here too, whatever region the check runs in */
    rt_dtype prev_compute = rt_autocast_set_compute_dtype(RT_F32);
    for (int i = 0; i < m->n_children && st == RT_OK; i++) {
        rt_module *b = m->children[i].module;
        float e1 = 0, e2 = 0;
        st = rt_rev_block_check(b, h, &e1, &e2);
        double unused, scale = 0.0;
        if (st == RT_OK) st = rt_compare(h, h, &unused, &scale);
        double e = fmax(e1, e2) / fmax(scale, 1e-30);
        if (st == RT_OK && !(e <= r->block_err)) {
            r->block_err = e;
            rt_module_path(b, r->worst, r->n);
        }
        if (st == RT_OK) st = rt_module_forward(b, h, &t);
        rt_tensor_release(h);
        h = t;
        t = NULL;
    }
    rt_tensor *back = rt_tensor_retain(h);
    for (int i = m->n_children - 1; i >= 0 && st == RT_OK; i--) {
        st = rt_rev_block_inverse(m->children[i].module, back, &t);
        rt_tensor_release(back);
        back = t;
        t = NULL;
    }
    if (st == RT_OK && m->n_children) r->chain_err = fmax(r->chain_err, rt_rel_difference(back, x));
    rt_tensor_release(back);
    rt_tensor_release(h);
    rt_autocast_set_compute_dtype(prev_compute);
    return st;
}

typedef struct rt_recon_hooks {
    rt_recon *r;
    bool install;
} rt_recon_hooks;

static rt_status rt_recon_set_hooks(rt_module *m, const char *path, void *user) {
    (void)path;
    rt_recon_hooks *h = user;
    if (rt_rev_sequence_of(m)) rt_module_set_forward_hook(m, h->install ? rt_recon_hook : NULL, h->r);
    return RT_OK;
}

rt_status rt_reversible_reconstruction(rt_module *net, rt_tensor *x, double *block_err, double *chain_err,
                                       char *worst_block, size_t n) {
    if (!net || !x || !block_err || !chain_err || (!worst_block && n > 0))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_reversible_reconstruction: %s is NULL",
                            !net ? "the module" : !x ? "x" : !block_err ? "block_err" : !chain_err ? "chain_err"
                                                                                            : "worst_block");
    *block_err = *chain_err = 0.0;
    if (n) worst_block[0] = '\0';
    if (rt_module_count_reversible(net) == 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "the model has no reversible blocks to check");
    rt_recon r = {.worst = worst_block, .n = n};
    rt_recon_hooks hooks = {&r, true};
    bool training = net->training, grad = rt_grad_set_enabled(false);
    rt_module_train(net, false);
    rt_module_visit(net, rt_recon_set_hooks, &hooks);
    rt_tensor *y = NULL;
    rt_status st = rt_module_forward(net, x, &y);
    rt_tensor_release(y);
    hooks.install = false;
    rt_module_visit(net, rt_recon_set_hooks, &hooks);
    rt_module_train(net, training);
    rt_grad_set_enabled(grad);
    *block_err = r.block_err;
    *chain_err = r.chain_err;
    return st;
}
