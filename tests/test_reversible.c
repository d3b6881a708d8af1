/* Reversible blocks and sequences (src/memory/reversible.h, RevNet, Gomez et
 * al. 2017): strategy equivalence with plain backpropagation, honest
 * recompute (batch-norm statistics, dropout masks, RNG stream), error paths,
 * reconstruction checks, drift detection on unstable chains, memory that does
 * not grow with depth, and RevNet-38 end to end.
 *
 * Shapes are small (x: N=4, C=8, 8×8) so the file runs in seconds, also
 * under ASan. Tolerances, stated per test:
 *   gradient equivalence (reversible vs plain)      rel ≤ 1e-4
 *     rel(a, b) = max|a - b| / max|b| over one tensor (b the plain result)
 *   running statistics after a step                bitwise (≤ 1e-7 accepted)
 *   retain_graph twice = 2 × once                   rel ≤ 1e-6
 *   rt_rev_block_check reconstruction               max abs err / max|x| ≤ 1e-5
 *   unstable chain, AUTO vs plain                   rel ≤ 1e-3
 *   memory: reversible SAVED peak vs depth          within one block's working
 *     set W = 4 activations of the block input's size (see memory_depth)
 *
 * Every test runs in a TU_TEST scope (tests/test_util.h): at its end the
 * tracked allocator must be back where it started (no leaked tensor, grad or
 * saved activation). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "memory/reversible.h"
#include "models/model.h"
#include "nn/layers.h"
#include "nn/state_dict.h"
#include "ops/coupling.h"
#include "ops/ops.h"
#include "optim/optim.h"
#include "rt_test.h"
#include "test_util.h"

enum { NB = 4, HH = 8, WW = 8 };

static void optimizer_free(void *p) { rt_optimizer_destroy(p); }
static void model_free(void *p) { rt_model_destroy(p); }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------ F and G */

/* A sub-network used as F or G:
 *   n_conv 2: conv3×3 → [BN] → [ReLU] → [dropout p] → conv3×3 (+bias)
 *   n_conv 1: conv3×3 (+bias) */
typedef struct subnet {
    int n_conv;
    bool bn, relu;
    float p;
    int stride;          /* of the first conv (1; 2 only for the refusal tests) */
    rt_conv_layer conv[2];
    rt_batchnorm_layer norm;
} subnet;

static rt_status subnet_forward(void *self, rt_tensor *x, bool training, rt_tensor **y) {
    subnet *s = self;
    *y = NULL;
    rt_tensor *h = rt_tensor_retain(x);
    RT_SEQ(h, a, rt_conv_layer_forward(&s->conv[0], h, &a));
    if (s->n_conv == 2) {
        if (s->bn) RT_SEQ(h, b, rt_batchnorm_layer_forward(&s->norm, h, training, &b));
        if (s->relu) RT_SEQ(h, r, rt_relu(h, &r));
        if (s->p > 0.0f) RT_SEQ(h, d, rt_dropout(h, s->p, training, &d));
        RT_SEQ(h, c, rt_conv_layer_forward(&s->conv[1], h, &c));
    }
    *y = h;
    return RT_OK;
}

typedef struct chain_opts {
    int64_t c;            /* channels of the sequence's input */
    int n;                /* blocks */
    rt_coupling coupling;
    int n_conv;           /* 1 or 2 */
    bool bn, relu, bias;
    float p;              /* dropout inside F and G (0: none) */
    float sigma;          /* > 0: scale every conv to spectral norm sigma (power iteration) */
    rt_device device;
    uint64_t seed;
    bool eval;            /* steps in eval mode (BN running statistics, randomised; no dropout) */
} chain_opts;

static rt_status subnet_init(subnet *s, rt_state_dict *sd, const char *prefix, int64_t cin, int64_t cout,
                             const chain_opts *o) {
    char name[96];
    memset(s, 0, sizeof *s);
    s->n_conv = o->n_conv;
    s->bn = o->bn;
    s->relu = o->relu;
    s->p = o->p;
    s->stride = 1;
    snprintf(name, sizeof name, "%s.conv1", prefix);
    RT_TRY(rt_conv_layer_init(&s->conv[0], sd, name, 2, cin, cout, 3, 1, 1, 1, o->n_conv == 1 && o->bias,
                              RT_INIT_DEFAULT));
    if (o->n_conv == 2) {
        if (o->bn) {
            snprintf(name, sizeof name, "%s.bn1", prefix);
            RT_TRY(rt_batchnorm_layer_init(&s->norm, sd, name, cout));
        }
        snprintf(name, sizeof name, "%s.conv2", prefix);
        RT_TRY(rt_conv_layer_init(&s->conv[1], sd, name, 2, cout, cout, 3, 1, 1, 1, o->bias, RT_INIT_DEFAULT));
    }
    return RT_OK;
}

static int subnet_params(subnet *s, rt_tensor **out) {
    int k = 0;
    for (int i = 0; i < s->n_conv; i++) {
        out[k++] = s->conv[i].weight;
        if (s->conv[i].bias) out[k++] = s->conv[i].bias;
    }
    if (s->n_conv == 2 && s->bn) {
        out[k++] = s->norm.weight;
        out[k++] = s->norm.bias;
    }
    return k;
}

/* Spectral norm of a conv (padding 1, stride 1) as a linear map on one
 * (1, cin, HH, WW) sample, by power iteration on WᵀW: v ← WᵀWv / ‖WᵀWv‖,
 * where WᵀWv is the input gradient of conv(v) back-propagated with grad
 * conv(v). 60 iterations; σ² = ‖WᵀWv‖ for unit v. */
static rt_status conv_spectral_norm(rt_conv_layer *cv, int64_t cin, double *sigma) {
    int64_t shape[4] = {1, cin, HH, WW};
    rt_tensor *v = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    if (!v) return RT_ERR_OOM;
    int64_t n = rt_tensor_numel(v);
    float *p = rt_tensor_f32(v);
    rt_philox_uniform(4242, 0, n, p);
    double nn = 0.0;
    for (int64_t i = 0; i < n; i++) {
        p[i] -= 0.5f;
        nn += (double)p[i] * p[i];
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)(p[i] / sqrt(nn));
    rt_status st = RT_OK;
    double s2 = 0.0;
    for (int it = 0; it < 60 && st == RT_OK; it++) {
        rt_tensor *leaf = rt_tensor_detach(v), *u = NULL;
        st = leaf ? rt_tensor_set_requires_grad(leaf, true) : RT_ERR_OOM;
        if (st == RT_OK) st = rt_conv_layer_forward(cv, leaf, &u);
        if (st == RT_OK) st = rt_backward(u, u, false);
        if (st == RT_OK) {
            const float *g = rt_tensor_f32(leaf->grad);
            double gn = 0.0;
            for (int64_t i = 0; i < n; i++) gn += (double)g[i] * g[i];
            gn = sqrt(gn);
            s2 = gn;
            for (int64_t i = 0; i < n; i++) p[i] = (float)(g[i] / gn);
        }
        rt_tensor_release(u);
        rt_tensor_release(leaf);
    }
    rt_tensor_zero_grad(cv->weight);
    if (cv->bias) rt_tensor_zero_grad(cv->bias);
    rt_tensor_release(v);
    *sigma = sqrt(s2);
    return st;
}

/* Power iteration costs ~60 conv passes; chains built from the same seed have
 * the same initial weights, so the norms are remembered per (seed, conv). */
enum { SN_CACHE = 512 };
static struct {
    uint64_t seed;
    int idx;
    double sigma;
} sn_cache[SN_CACHE];
static int sn_cached;

static rt_status conv_spectral_norm_cached(rt_conv_layer *cv, int64_t cin, uint64_t seed, int idx, double *sigma) {
    for (int i = 0; i < sn_cached; i++)
        if (sn_cache[i].seed == seed && sn_cache[i].idx == idx) {
            *sigma = sn_cache[i].sigma;
            return RT_OK;
        }
    RT_TRY(conv_spectral_norm(cv, cin, sigma));
    if (sn_cached < SN_CACHE) sn_cache[sn_cached++] = (__typeof__(sn_cache[0])){seed, idx, *sigma};
    return RT_OK;
}

/* ------------------------------------------------------------ a sequence of blocks */

typedef struct chain {
    chain_opts o;
    rt_state_dict *sd;
    subnet *nets; /* 2 per block: F then G */
    rt_rev_block *blocks;
    int n_init;
    bool training;
    rt_rev_sequence seq;
} chain;

static void randomise_bn(chain *ch, uint64_t seed);

static void chain_destroy(void *p) {
    chain *ch = p;
    if (!ch) return;
    for (int i = 0; i < ch->n_init; i++) rt_rev_block_destroy(&ch->blocks[i]);
    free(ch->blocks);
    free(ch->nets);
    rt_state_dict_destroy(ch->sd);
    free(ch);
}

/* Builds n blocks "blk.i" with F "blk.i.f" (⌈C/2⌉ → ⌊C/2⌋) and G "blk.i.g"
 * (⌊C/2⌋ → ⌈C/2⌉, or 2⌈C/2⌉ for affine). Two chains with equal opts have
 * bitwise equal parameters. Registered for destruction at the end of the test. */
static rt_status chain_create(const chain_opts *o, chain **out) {
    *out = NULL;
    chain *ch = calloc(1, sizeof *ch);
    if (!ch) return RT_ERR_OOM;
    ch->o = *o;
    ch->sd = rt_state_dict_create(o->device, o->seed);
    ch->nets = calloc((size_t)(2 * o->n), sizeof *ch->nets);
    ch->blocks = calloc((size_t)o->n, sizeof *ch->blocks);
    tu_defer(chain_destroy, ch);
    if (!ch->sd || !ch->nets || !ch->blocks) return RT_ERR_OOM;
    int64_t c1 = o->c / 2, c2 = o->c - c1, gout = o->coupling == RT_COUPLING_AFFINE ? 2 * c2 : c2;
    int64_t shape[4] = {NB, o->c, HH, WW};
    for (int i = 0; i < o->n; i++) {
        char prefix[64];
        subnet *f = &ch->nets[2 * i], *g = &ch->nets[2 * i + 1];
        snprintf(prefix, sizeof prefix, "blk.%d.f", i);
        RT_TRY(subnet_init(f, ch->sd, prefix, c2, c1, o));
        snprintf(prefix, sizeof prefix, "blk.%d.g", i);
        RT_TRY(subnet_init(g, ch->sd, prefix, c1, gout, o));
        if (o->sigma > 0.0f && o->device == RT_DEVICE_CPU) {
            subnet *fg[2] = {f, g};
            int64_t cin[2] = {c2, c1};
            for (int j = 0; j < 2; j++)
                for (int l = 0; l < fg[j]->n_conv; l++) {
                    double s;
                    RT_TRY(conv_spectral_norm_cached(&fg[j]->conv[l], l == 0 ? cin[j] : fg[j]->conv[0].weight->shape[0],
                                                     o->seed, 4 * i + 2 * j + l, &s));
                    rt_tensor *w = fg[j]->conv[l].weight;
                    for (int64_t e = 0; e < rt_tensor_numel(w); e++)
                        rt_tensor_f32(w)[e] = (float)(rt_tensor_f32(w)[e] * (o->sigma / s));
                }
        }
        rt_tensor *params[16];
        int np = subnet_params(f, params);
        np += subnet_params(g, params + np);
        snprintf(prefix, sizeof prefix, "blk.%d", i);
        RT_TRY(rt_rev_block_init(&ch->blocks[i], prefix, o->coupling, (rt_subnet){subnet_forward, f},
                                 (rt_subnet){subnet_forward, g}, params, np, 4, shape));
        ch->n_init++;
    }
    ch->seq = (rt_rev_sequence){.blocks = ch->blocks, .n = o->n, .reversible = true, .grouping = RT_GROUPING_FULL};
    ch->training = !o->eval;
    if (o->eval && o->device == RT_DEVICE_CPU) randomise_bn(ch, o->seed + 17);
    *out = ch;
    return RT_OK;
}

static void chain_zero_grad(chain *ch) {
    for (int i = 0; i < ch->sd->n; i++)
        if (ch->sd->entries[i].tensor) rt_tensor_zero_grad(ch->sd->entries[i].tensor);
}

/* rel(a, b) = max|a - b| / max|b| (b the reference); 0 when both are zero,
 * +inf when a differs from an all-zero b; NaN anywhere gives +inf. */
static double rel_err(const rt_tensor *a, const rt_tensor *b) {
    int64_t n = rt_tensor_numel(b);
    double d = tu_max_abs_diff(n, rt_tensor_f32(a), rt_tensor_f32(b)), s = tu_max_abs(n, rt_tensor_f32(b));
    if (d != d || s != s) return INFINITY;
    if (s == 0.0) return d == 0.0 ? 0.0 : INFINITY;
    return d / s;
}

/* Worst rel error over every parameter gradient of `a` against `ref` (same
 * layout). A missing gradient on either side counts as +inf. */
static double grads_rel(const rt_state_dict *a, const rt_state_dict *ref, char *worst, size_t nworst) {
    double w = 0.0;
    snprintf(worst, nworst, "-");
    for (int i = 0; i < ref->n; i++) {
        if (ref->entries[i].kind != RT_ENTRY_PARAM) continue;
        const rt_tensor *ga = a->entries[i].tensor->grad, *gb = ref->entries[i].tensor->grad;
        double e = (ga && gb) ? rel_err(ga, gb) : INFINITY;
        if (!(e <= w)) {
            w = e;
            snprintf(worst, nworst, "%s%s", ref->entries[i].name, (ga && gb) ? "" : " (no grad)");
        }
    }
    return w;
}

/* Largest |a - b| over every buffer (running_mean, running_var) and counter
 * (num_batches_tracked, as a difference of counts). */
static double buffers_maxdiff(const rt_state_dict *a, const rt_state_dict *b) {
    double w = 0.0;
    for (int i = 0; i < b->n; i++) {
        if (b->entries[i].kind == RT_ENTRY_BUFFER) {
            const rt_tensor *x = a->entries[i].tensor, *y = b->entries[i].tensor;
            double d = tu_max_abs_diff(rt_tensor_numel(y), rt_tensor_f32(x), rt_tensor_f32(y));
            if (!(d <= w)) w = d;
        } else if (b->entries[i].kind == RT_ENTRY_COUNTER) {
            double d = fabs((double)(*a->entries[i].counter - *b->entries[i].counter));
            if (d > w) w = d;
        }
    }
    return w;
}

static bool buffers_bitwise(const rt_state_dict *a, const rt_state_dict *b) {
    for (int i = 0; i < b->n; i++) {
        if (b->entries[i].kind == RT_ENTRY_BUFFER &&
            memcmp(rt_tensor_data(a->entries[i].tensor), rt_tensor_data(b->entries[i].tensor),
                   rt_tensor_nbytes(b->entries[i].tensor)))
            return false;
        if (b->entries[i].kind == RT_ENTRY_COUNTER && *a->entries[i].counter != *b->entries[i].counter)
            return false;
    }
    return true;
}

static int64_t counter_value(const rt_state_dict *sd, const char *name) {
    for (int i = 0; i < sd->n; i++)
        if (sd->entries[i].kind == RT_ENTRY_COUNTER && !strcmp(sd->entries[i].name, name))
            return *sd->entries[i].counter;
    return -1;
}

static bool message_has(const char *needle) { return strstr(rt_error_last(), needle) != NULL; }

static bool is_reversible_output(const rt_tensor *y) {
    return y->grad_fn && !strcmp(y->grad_fn->name, "reversible_sequence");
}

/* One training step of a chain: reseed the default generator (seed != 0),
 * forward, backward with upstream gradient dy. *off_fwd / *off_bwd: the
 * generator offset after forward / after backward. *y_out (optional) keeps
 * the output (owned by the test scope). Returns the backward's status (or
 * the forward's if it failed). */
static rt_status chain_step(chain *ch, rt_tensor *x, rt_tensor *dy, uint64_t seed, bool retain, uint64_t *off_fwd,
                            uint64_t *off_bwd, rt_tensor **y_out) {
    if (seed) rt_manual_seed(seed);
    rt_tensor *y = NULL;
    RT_TRY(rt_rev_sequence_forward(&ch->seq, x, ch->training, &y));
    if (off_fwd) *off_fwd = rt_default_generator()->offset;
    rt_status st = rt_backward(y, dy, retain);
    if (off_bwd) *off_bwd = rt_default_generator()->offset;
    if (y_out) *y_out = tu_own(y);
    else rt_tensor_release(y);
    return st;
}

static rt_tensor *make_input(int64_t c, uint64_t seed, float std) {
    int64_t shape[4] = {NB, c, HH, WW};
    rt_generator g = {seed, 0};
    return tu_randn(&g, 4, shape, 0.0f, std);
}

/* ------------------------------------------------------------ 1. strategy equivalence */

/* Runs `steps` training steps on two chains built from the same opts (A
 * plain backpropagation, B reversible with `grouping`/k), on the same batch,
 * upstream gradient and generator seed, and checks after each step:
 *   - B's output comes from one reversible_sequence node and equals A's (≤ 1e-6 rel);
 *   - every parameter gradient and (x_grad) the input gradient: rel ≤ tol;
 *   - the generator: after B's forward and after B's backward it is where it
 *     is after A's forward (and A's backward does not move it);
 *   - running_mean / running_var / num_batches_tracked: equal (≤ 1e-7; bitwise reported).
 * Returns the worst parameter and input errors; *chain_b (optional) gets B. */
static void run_equiv(const char *label, const chain_opts *o, rt_grouping grouping, int k, int steps, bool x_grad,
                      double tol, chain **chain_b) {
    chain *A, *B;
    CHECK_OK(chain_create(o, &A));
    CHECK_OK(chain_create(o, &B));
    A->seq.reversible = false;
    B->seq.grouping = grouping;
    B->seq.k = k;
    rt_tensor *x = make_input(o->c, 1000 + o->seed, 1.0f), *dy = make_input(o->c, 2000 + o->seed, 1.0f);
    if (x_grad) CHECK_OK(rt_tensor_set_requires_grad(x, true));
    double worst_p = 0.0, worst_x = 0.0;
    bool bitwise = true;
    char worst_name[96] = "-";
    for (int s = 0; s < steps; s++) {
        chain_zero_grad(A);
        chain_zero_grad(B);
        rt_tensor_zero_grad(x);
        uint64_t seed = 555 + (uint64_t)s, fa, ba, fb, bb;
        rt_tensor *ya, *yb;
        CHECK_OK(chain_step(A, x, dy, seed, false, &fa, &ba, &ya));
        rt_tensor *gxa = x_grad ? tu_own(rt_tensor_to(x->grad, RT_F32, RT_MEM_TEMP)) : NULL;
        rt_tensor_zero_grad(x);
        CHECK_OK(chain_step(B, x, dy, seed, false, &fb, &bb, &yb));
        CHECK(is_reversible_output(yb));
        CHECK(!is_reversible_output(ya));
        CHECK_EQ_INT(ba, fa);
        CHECK_EQ_INT(fb, fa);
        CHECK_EQ_INT(bb, fa); /* the RNG stream after a step is where it would be without the rebuild */
        CHECK_EQ_INT(rt_default_generator()->seed, seed);
        CHECK(rel_err(yb, ya) <= 1e-6);
        char name[96];
        double e = grads_rel(B->sd, A->sd, name, sizeof name);
        if (!(e <= worst_p)) {
            worst_p = e;
            snprintf(worst_name, sizeof worst_name, "%s", name);
        }
        if (!(e <= tol)) fprintf(stderr, "  %s step %d: worst parameter gradient %s rel %.3g\n", label, s, name, e);
        CHECK(e <= tol);
        if (x_grad) {
            CHECK(x->grad != NULL);
            double ex = rel_err(x->grad, gxa);
            worst_x = ex > worst_x ? ex : worst_x;
            CHECK(ex <= tol);
        } else {
            CHECK(x->grad == NULL);
        }
        CHECK(buffers_maxdiff(B->sd, A->sd) <= 1e-7);
        bitwise = bitwise && buffers_bitwise(B->sd, A->sd);
    }
    if (o->bn) {
        CHECK_EQ_INT(counter_value(A->sd, "blk.0.f.bn1.num_batches_tracked"), o->eval ? 0 : steps);
        CHECK_EQ_INT(counter_value(B->sd, "blk.0.f.bn1.num_batches_tracked"), o->eval ? 0 : steps);
    }
    printf("  %-28s worst param grad rel %.2e (%s), input grad rel %.2e, buffers %s, k=%d, drift %.2e\n", label,
           worst_p, worst_name, worst_x, o->bn ? (bitwise ? "bitwise equal" : "equal <=1e-7") : "none", B->seq.k,
           B->seq.last_drift);
    if (chain_b) *chain_b = B;
}

static chain_opts base_opts(void) {
    return (chain_opts){.c = 8, .n = 3, .coupling = RT_COUPLING_ADDITIVE, .n_conv = 2, .relu = true, .bias = true,
                        .device = RT_DEVICE_CPU, .seed = 11};
}

TU_TEST(equiv_additive) {
    chain_opts o = base_opts();
    run_equiv("additive", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, NULL);
}

TU_TEST(equiv_affine) {
    chain_opts o = base_opts();
    o.coupling = RT_COUPLING_AFFINE;
    run_equiv("affine", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, NULL);
}

TU_TEST(equiv_batchnorm) {
    chain_opts o = base_opts();
    o.bn = true;
    run_equiv("additive+bn", &o, RT_GROUPING_FULL, 0, 2, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    o.coupling = RT_COUPLING_AFFINE;
    run_equiv("affine+bn", &o, RT_GROUPING_FULL, 0, 2, true, 1e-4, NULL);
}

/* Dropout p=0.5 after BN-ReLU inside F and G: both runs start from the same
 * seed, so they draw the same masks only if the rebuild replays them. */
TU_TEST(equiv_dropout) {
    chain_opts o = base_opts();
    o.bn = true;
    o.p = 0.5f;
    run_equiv("additive+bn+dropout", &o, RT_GROUPING_FULL, 0, 2, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    o.coupling = RT_COUPLING_AFFINE;
    run_equiv("affine+bn+dropout", &o, RT_GROUPING_FULL, 0, 2, true, 1e-4, NULL);
}

/* Eval mode with autograd on (fine-tuning with frozen statistics): BN uses
 * randomised running statistics, dropout is off; same equivalence. */
TU_TEST(equiv_eval_mode) {
    chain_opts o = base_opts();
    o.bn = true;
    o.p = 0.5f;
    o.eval = true;
    run_equiv("eval mode, full", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    run_equiv("eval mode, auto", &o, RT_GROUPING_AUTO, 0, 2, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    o.coupling = RT_COUPLING_AFFINE;
    run_equiv("eval mode, affine", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, NULL);
}

/* Negative control for the dropout case: if the reversible run starts from a
 * different seed, its masks differ and the gradients must NOT match; this
 * shows the comparison above can fail. */
TU_TEST(equiv_dropout_control) {
    chain_opts o = base_opts();
    o.p = 0.5f;
    chain *A, *B;
    CHECK_OK(chain_create(&o, &A));
    CHECK_OK(chain_create(&o, &B));
    A->seq.reversible = false;
    rt_tensor *x = make_input(o.c, 3, 1.0f), *dy = make_input(o.c, 4, 1.0f);
    CHECK_OK(chain_step(A, x, dy, 100, false, NULL, NULL, NULL));
    CHECK_OK(chain_step(B, x, dy, 101, false, NULL, NULL, NULL));
    char name[96];
    CHECK(grads_rel(B->sd, A->sd, name, sizeof name) > 1e-2);
}

/* One step: running_mean, running_var and num_batches_tracked of every BN
 * layer equal in both modes, and num_batches_tracked is exactly 1 (the
 * rebuild in backward does not update them again). */
TU_TEST(equiv_running_stats) {
    chain_opts o = base_opts();
    o.bn = true;
    o.p = 0.5f;
    chain *B = NULL;
    run_equiv("running stats (1 step)", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, &B);
    if (rt_test_failed_) return;
    for (int i = 0; i < B->sd->n; i++)
        if (B->sd->entries[i].kind == RT_ENTRY_COUNTER) CHECK_EQ_INT(*B->sd->entries[i].counter, 1);
    /* running stats moved away from their initial values (the check has teeth) */
    rt_state_entry *rv = rt_state_dict_find(B->sd, "blk.2.g.bn1.running_var");
    CHECK(rv != NULL);
    CHECK(fabsf(rt_tensor_f32(rv->tensor)[0] - 1.0f) > 1e-4f);
}

TU_TEST(equiv_grouping_every) {
    chain_opts o = base_opts();
    o.bn = true;
    o.p = 0.5f;
    run_equiv("every k=2 (n=3)", &o, RT_GROUPING_EVERY, 2, 2, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    run_equiv("every k=1 (n=3)", &o, RT_GROUPING_EVERY, 1, 1, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    o.coupling = RT_COUPLING_AFFINE;
    run_equiv("affine every k=2", &o, RT_GROUPING_EVERY, 2, 1, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    /* k < 1 is refused */
    chain *ch;
    o.coupling = RT_COUPLING_ADDITIVE;
    CHECK_OK(chain_create(&o, &ch));
    ch->seq.grouping = RT_GROUPING_EVERY;
    ch->seq.k = 0;
    rt_tensor *x = make_input(o.c, 5, 1.0f), *y = NULL;
    CHECK_EQ_INT(rt_rev_sequence_forward(&ch->seq, x, true, &y), RT_ERR_INVALID_ARG);
    CHECK(y == NULL);
}

/* AUTO: the first training step calibrates (keeps every input), later steps
 * keep every k-th; both must match plain backpropagation. */
TU_TEST(equiv_grouping_auto) {
    chain_opts o = base_opts();
    o.bn = true;
    o.p = 0.5f;
    o.n = 4;
    chain *B = NULL;
    run_equiv("auto (n=4, 3 steps)", &o, RT_GROUPING_AUTO, 0, 3, true, 1e-4, &B);
    if (rt_test_failed_) return;
    CHECK(B->seq.k >= 1 && B->seq.k <= o.n);
    /* a well-conditioned chain needs no exact activation inside it */
    CHECK_EQ_INT(B->seq.k, o.n);
}

/* ------------------------------------------------------------ 2. input without grad */

TU_TEST(param_grads_without_input_grad) {
    chain_opts o = base_opts();
    o.bn = true;
    run_equiv("x without grad, full", &o, RT_GROUPING_FULL, 0, 1, false, 1e-4, NULL);
    if (rt_test_failed_) return;
    run_equiv("x without grad, every 2", &o, RT_GROUPING_EVERY, 2, 1, false, 1e-4, NULL);
    if (rt_test_failed_) return;
    run_equiv("x without grad, auto", &o, RT_GROUPING_AUTO, 0, 2, false, 1e-4, NULL);
    if (rt_test_failed_) return;
    /* every parameter got a gradient, and the output requires grad */
    chain *ch;
    CHECK_OK(chain_create(&o, &ch));
    rt_tensor *x = make_input(o.c, 8, 1.0f), *dy = make_input(o.c, 9, 1.0f), *y;
    CHECK(!x->requires_grad);
    CHECK_OK(chain_step(ch, x, dy, 1, false, NULL, NULL, &y));
    CHECK(y->requires_grad);
    for (int i = 0; i < ch->sd->n; i++)
        if (ch->sd->entries[i].kind == RT_ENTRY_PARAM) CHECK(ch->sd->entries[i].tensor->grad != NULL);
}

/* ------------------------------------------------------------ 3. released graph, retain_graph */

TU_TEST(retain_graph) {
    chain_opts o = base_opts();
    o.bn = true;
    o.p = 0.5f;
    chain *ch;
    CHECK_OK(chain_create(&o, &ch));
    rt_tensor *x = make_input(o.c, 21, 1.0f), *dy = make_input(o.c, 22, 1.0f), *y = NULL;
    CHECK_OK(rt_tensor_set_requires_grad(x, true));

    /* released: the second backward fails before touching any gradient */
    rt_manual_seed(5);
    CHECK_OK(rt_rev_sequence_forward(&ch->seq, x, true, &y));
    tu_own(y);
    CHECK(is_reversible_output(y));
    CHECK_OK(rt_backward(y, dy, false));
    rt_state_entry *w = rt_state_dict_find(ch->sd, "blk.1.g.conv2.weight");
    CHECK(w && w->tensor->grad);
    rt_tensor *g_once = tu_own(rt_tensor_to(w->tensor->grad, RT_F32, RT_MEM_TEMP));
    rt_tensor *gx_once = tu_own(rt_tensor_to(x->grad, RT_F32, RT_MEM_TEMP));
    rt_status st = rt_backward(y, dy, false);
    CHECK_EQ_INT(st, RT_ERR_GRAPH_RELEASED);
    CHECK(message_has("reversible_sequence"));
    CHECK(rel_err(w->tensor->grad, g_once) == 0.0);
    CHECK(rel_err(x->grad, gx_once) == 0.0);

    /* retained: two backwards give exactly twice the gradients of one */
    chain_zero_grad(ch);
    rt_tensor_zero_grad(x);
    rt_tensor *y2 = NULL;
    rt_manual_seed(5);
    CHECK_OK(rt_rev_sequence_forward(&ch->seq, x, true, &y2));
    tu_own(y2);
    uint64_t off = rt_default_generator()->offset;
    CHECK_OK(rt_backward(y2, dy, true));
    CHECK_OK(rt_backward(y2, dy, true));
    CHECK_EQ_INT(rt_default_generator()->offset, off);
    CHECK(rel_err(w->tensor->grad, g_once) > 0.5); /* it did accumulate */
    /* compare every parameter with 2 × one pass of a twin chain (same
     * weights, seed and batch; training-mode batch norm does not read the
     * running statistics, so the twin needs no history) */
    chain *twin;
    CHECK_OK(chain_create(&o, &twin));
    CHECK_OK(chain_step(twin, x, dy, 5, false, NULL, NULL, NULL));
    for (int i = 0; i < twin->sd->n; i++) {
        rt_tensor *t = twin->sd->entries[i].tensor;
        if (twin->sd->entries[i].kind != RT_ENTRY_PARAM) continue;
        CHECK(t->grad != NULL);
        for (int64_t e = 0; e < rt_tensor_numel(t->grad); e++) rt_tensor_f32(t->grad)[e] *= 2.0f;
    }
    char name[96];
    double err = grads_rel(ch->sd, twin->sd, name, sizeof name);
    printf("  retain_graph twice vs 2x once: worst rel %.2e (%s)\n", err, name);
    CHECK(err <= 1e-6);
    /* batch norm counted the step once, not once per backward */
    CHECK_EQ_INT(counter_value(ch->sd, "blk.0.g.bn1.num_batches_tracked"), 2);
}

/* Input gradient with retain_graph twice = 2 × once (separate, so x.grad is clean). */
TU_TEST(retain_graph_input_grad) {
    chain_opts o = base_opts();
    o.bn = true;
    chain *ch;
    CHECK_OK(chain_create(&o, &ch));
    rt_tensor *x = make_input(o.c, 23, 1.0f), *dy = make_input(o.c, 24, 1.0f), *y = NULL;
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    CHECK_OK(rt_rev_sequence_forward(&ch->seq, x, true, &y));
    tu_own(y);
    CHECK_OK(rt_backward(y, dy, true));
    rt_tensor *once = tu_own(rt_tensor_to(x->grad, RT_F32, RT_MEM_TEMP));
    CHECK_OK(rt_backward(y, dy, true));
    for (int64_t e = 0; e < rt_tensor_numel(once); e++) rt_tensor_f32(once)[e] *= 2.0f;
    double err = rel_err(x->grad, once);
    CHECK(err <= 1e-6);
    CHECK_OK(rt_backward(y, dy, false));
    CHECK_EQ_INT(rt_backward(y, dy, false), RT_ERR_GRAPH_RELEASED);
}

/* ------------------------------------------------------------ 4. channel counts and refusals */

TU_TEST(odd_channels) {
    chain_opts o = base_opts();
    o.c = 5;
    o.bn = true;
    chain *B = NULL;
    run_equiv("C=5 additive", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, &B);
    if (rt_test_failed_) return;
    CHECK_EQ_INT(B->blocks[0].c1, 2);
    CHECK_EQ_INT(B->blocks[0].c2, 3);
    o.coupling = RT_COUPLING_AFFINE;
    run_equiv("C=5 affine", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, NULL);
    if (rt_test_failed_) return;
    o.c = 3;
    o.coupling = RT_COUPLING_ADDITIVE;
    run_equiv("C=3 additive", &o, RT_GROUPING_FULL, 0, 1, true, 1e-4, NULL);
}

/* A single conv used as F or G for the refusal tests. */
typedef struct refuse_ctx {
    rt_state_dict *sd;
    subnet f, g;
} refuse_ctx;

static void refuse_ctx_free(void *p) {
    refuse_ctx *r = p;
    rt_state_dict_destroy(r->sd);
    free(r);
}

static refuse_ctx *refuse_ctx_create(int64_t fin, int64_t fout, int64_t fstride, int64_t gin, int64_t gout) {
    refuse_ctx *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->sd = rt_state_dict_create(RT_DEVICE_CPU, 3);
    tu_defer(refuse_ctx_free, r);
    if (!r->sd) return NULL;
    r->f.n_conv = r->g.n_conv = 1;
    if (rt_conv_layer_init(&r->f.conv[0], r->sd, "f", 2, fin, fout, 3, fstride, 1, 1, false, RT_INIT_DEFAULT) ||
        rt_conv_layer_init(&r->g.conv[0], r->sd, "g", 2, gin, gout, 3, 1, 1, 1, false, RT_INIT_DEFAULT))
        return NULL;
    return r;
}

TU_TEST(refuse_one_channel) {
    refuse_ctx *r = refuse_ctx_create(1, 1, 1, 1, 1);
    CHECK(r != NULL);
    rt_tensor *params[2] = {r->f.conv[0].weight, r->g.conv[0].weight};
    int64_t shape[4] = {NB, 1, HH, WW};
    rt_rev_block b;
    rt_status st = rt_rev_block_init(&b, "tiny_block", RT_COUPLING_ADDITIVE, (rt_subnet){subnet_forward, &r->f},
                                     (rt_subnet){subnet_forward, &r->g}, params, 2, 4, shape);
    CHECK_EQ_INT(st, RT_ERR_SHAPE);
    CHECK(message_has("tiny_block"));
    printf("  C=1: %s\n", rt_error_last());
    rt_rev_block_destroy(&b); /* safe after a failed init */
}

/* Initialises a C=7 block (c1 = 3, c2 = 4) whose F/G come from r; returns the status. */
static rt_status init_c7(refuse_ctx *r, const char *name, rt_coupling coupling) {
    rt_tensor *params[2] = {r->f.conv[0].weight, r->g.conv[0].weight};
    int64_t shape[4] = {NB, 7, HH, WW};
    rt_rev_block b;
    rt_status st = rt_rev_block_init(&b, name, coupling, (rt_subnet){subnet_forward, &r->f},
                                     (rt_subnet){subnet_forward, &r->g}, params, 2, 4, shape);
    rt_rev_block_destroy(&b);
    return st;
}

/* The refusal message must name the block, the sub-network, the input
 * shape, the shape it should produce and the shape it produced. C = 7 makes
 * the three shapes distinct: F maps [1, 4, 8, 8] → [1, 3, 8, 8]. */
TU_TEST(refuse_bad_subnets) {
    /* control: correct F and G are accepted */
    refuse_ctx *ok = refuse_ctx_create(4, 3, 1, 3, 4);
    CHECK(ok != NULL);
    CHECK_OK(init_c7(ok, "good_block", RT_COUPLING_ADDITIVE));

    /* F with stride 2 */
    refuse_ctx *r = refuse_ctx_create(4, 3, 2, 3, 4);
    CHECK(r != NULL);
    CHECK_EQ_INT(init_c7(r, "strided_block", RT_COUPLING_ADDITIVE), RT_ERR_SHAPE);
    printf("  stride 2: %s\n", rt_error_last());
    CHECK(message_has("strided_block"));
    CHECK(message_has("F"));
    CHECK(message_has("[1, 4, 8, 8]")); /* input */
    CHECK(message_has("[1, 3, 4, 4]")); /* got */
    bool want_stride = message_has("[1, 3, 8, 8]");

    /* F with the wrong output channels (5 instead of 3) */
    r = refuse_ctx_create(4, 5, 1, 3, 4);
    CHECK(r != NULL);
    CHECK_EQ_INT(init_c7(r, "wide_block", RT_COUPLING_ADDITIVE), RT_ERR_SHAPE);
    printf("  wrong F channels: %s\n", rt_error_last());
    CHECK(message_has("wide_block"));
    CHECK(message_has("[1, 4, 8, 8]"));
    CHECK(message_has("[1, 5, 8, 8]"));
    bool want_wide = message_has("[1, 3, 8, 8]");

    /* G sized for an additive block used in an affine one (wants 2·4 = 8 channels) */
    r = refuse_ctx_create(4, 3, 1, 3, 4);
    CHECK(r != NULL);
    CHECK_EQ_INT(init_c7(r, "affine_block", RT_COUPLING_AFFINE), RT_ERR_SHAPE);
    printf("  affine G: %s\n", rt_error_last());
    CHECK(message_has("affine_block"));
    CHECK(message_has("G"));
    CHECK(message_has("[1, 3, 8, 8]"));
    CHECK(message_has("[1, 4, 8, 8]"));
    bool want_affine = message_has("[1, 8, 8, 8]");

    /* the expected ("must map ... to") shape must appear too */
    CHECK(want_stride);
    CHECK(want_wide);
    CHECK(want_affine);
}

/* ------------------------------------------------------------ 5. block check and logdet */

/* Randomises BN affine parameters and running statistics so eval mode is not
 * the identity. */
static void randomise_bn(chain *ch, uint64_t seed) {
    rt_generator g = {seed, 0};
    for (int i = 0; i < 2 * ch->o.n; i++) {
        rt_batchnorm_layer *bn = &ch->nets[i].norm;
        if (!bn->weight) continue;
        int64_t c = bn->weight->shape[0];
        float u[64];
        rt_generator_uniform(&g, 4 * c, u);
        for (int64_t j = 0; j < c; j++) {
            rt_tensor_f32(bn->weight)[j] = 0.5f + u[j];
            rt_tensor_f32(bn->bias)[j] = u[c + j] - 0.5f;
            rt_tensor_f32(bn->running_mean)[j] = u[2 * c + j] - 0.5f;
            rt_tensor_f32(bn->running_var)[j] = 0.5f + 1.5f * u[3 * c + j];
        }
    }
}

/* Copies channels [c0, c0 + cn) of x into a new tensor. */
static rt_tensor *slice_channels(const rt_tensor *x, int64_t c0, int64_t cn) {
    int64_t shape[4] = {x->shape[0], cn, x->shape[2], x->shape[3]}, inner = x->shape[2] * x->shape[3];
    rt_tensor *s = tu_own(rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    for (int64_t b = 0; b < shape[0]; b++)
        memcpy(rt_tensor_f32(s) + b * cn * inner, rt_tensor_f32(x) + (b * x->shape[1] + c0) * inner,
               (size_t)(cn * inner) * sizeof(float));
    return s;
}

static void check_block(rt_coupling coupling, bool training) {
    chain_opts o = base_opts();
    o.bn = true;
    o.n = 1;
    o.coupling = coupling;
    chain *ch;
    CHECK_OK(chain_create(&o, &ch));
    randomise_bn(ch, 77);
    rt_rev_block *b = &ch->blocks[0];
    rt_tensor *x = make_input(o.c, 31, 1.0f);
    rt_state_entry *rm = rt_state_dict_find(ch->sd, "blk.0.f.bn1.running_mean");
    CHECK(rm != NULL);
    rt_tensor *rm0 = tu_own(rt_tensor_to(rm->tensor, RT_F32, RT_MEM_TEMP));
    float e1 = -1, e2 = -1;
    CHECK_OK(rt_rev_block_check(b, x, training, &e1, &e2));
    double xmax = tu_max_abs(rt_tensor_numel(x), rt_tensor_f32(x));
    printf("  check %s %s: inverse(forward(x)) %.2e, forward(inverse(x)) %.2e (relative to max|x| %.2f)\n",
           coupling == RT_COUPLING_AFFINE ? "affine  " : "additive", training ? "train" : "eval ", e1 / xmax,
           e2 / xmax, xmax);
    CHECK(e1 >= 0 && e2 >= 0);
    CHECK(e1 / xmax <= 1e-5);
    CHECK(e2 / xmax <= 1e-5);
    /* no running-statistics update, no counter, no autograd */
    CHECK(rel_err(rm->tensor, rm0) == 0.0);
    CHECK_EQ_INT(counter_value(ch->sd, "blk.0.f.bn1.num_batches_tracked"), 0);
    for (int i = 0; i < ch->sd->n; i++)
        if (ch->sd->entries[i].kind == RT_ENTRY_PARAM) CHECK(ch->sd->entries[i].tensor->grad == NULL);

    /* the same numbers computed here from forward and inverse */
    bool grad = rt_grad_set_enabled(false), rec = rt_recompute_set_active(true);
    rt_tensor *y = NULL, *xr = NULL;
    rt_status st = rt_rev_block_forward(b, x, training, &y);
    if (st == RT_OK) st = rt_rev_block_inverse(b, y, training, &xr);
    rt_recompute_set_active(rec);
    rt_grad_set_enabled(grad);
    tu_own(y);
    tu_own(xr);
    CHECK_OK(st);
    double mine = tu_max_abs_diff(rt_tensor_numel(x), rt_tensor_f32(xr), rt_tensor_f32(x));
    CHECK_NEAR(mine, e1, 1e-7 * xmax);
    /* and the block is not the identity (the check has teeth) */
    CHECK(tu_max_abs_diff(rt_tensor_numel(x), rt_tensor_f32(y), rt_tensor_f32(x)) > 1e-2);
}

TU_TEST(block_check) {
    check_block(RT_COUPLING_ADDITIVE, false);
    if (rt_test_failed_) return;
    check_block(RT_COUPLING_ADDITIVE, true);
    if (rt_test_failed_) return;
    check_block(RT_COUPLING_AFFINE, false);
    if (rt_test_failed_) return;
    check_block(RT_COUPLING_AFFINE, true);
}

/* log|det| of an affine block = Σ over C·H·W of 2·tanh(s_raw / 2), with
 * s_raw the first half of G's output channels, computed here from F and G
 * directly (double sums). Tolerance 1e-4 relative to Σ|s|. Additive: zeros. */
TU_TEST(block_logdet) {
    chain_opts o = base_opts();
    o.bn = true;
    o.n = 1;
    o.coupling = RT_COUPLING_AFFINE;
    chain *ch;
    CHECK_OK(chain_create(&o, &ch));
    randomise_bn(ch, 78);
    rt_rev_block *b = &ch->blocks[0];
    rt_tensor *x = make_input(o.c, 32, 2.0f), *ld = NULL;
    CHECK_OK(rt_rev_block_logdet(b, x, false, &ld));
    tu_own(ld);
    CHECK_EQ_INT(ld->ndim, 1);
    CHECK_EQ_INT(ld->shape[0], NB);

    int64_t c1 = b->c1, c2 = b->c2, inner = HH * WW;
    rt_tensor *x1 = slice_channels(x, 0, c1), *x2 = slice_channels(x, c1, c2), *fx = NULL, *st = NULL;
    bool grad = rt_grad_set_enabled(false);
    rt_status s = subnet_forward(&ch->nets[0], x2, false, &fx);
    tu_own(fx);
    rt_tensor *y1 = NULL;
    if (s == RT_OK) {
        y1 = tu_own(rt_tensor_empty_like(x1, RT_MEM_TEMP));
        for (int64_t i = 0; i < rt_tensor_numel(x1); i++)
            rt_tensor_f32(y1)[i] = rt_tensor_f32(x1)[i] + rt_tensor_f32(fx)[i];
        s = subnet_forward(&ch->nets[1], y1, false, &st);
        tu_own(st);
    }
    rt_grad_set_enabled(grad);
    CHECK_OK(s);
    CHECK_EQ_INT(st->shape[1], 2 * c2);
    double maxabs = 0.0;
    for (int64_t n = 0; n < NB; n++) {
        double sum = 0.0, abs_sum = 0.0;
        for (int64_t i = 0; i < c2 * inner; i++) {
            double sr = rt_tensor_f32(st)[n * 2 * c2 * inner + i];
            double v = 2.0 * tanh(sr / 2.0);
            sum += v;
            abs_sum += fabs(v);
        }
        double got = rt_tensor_f32(ld)[n];
        printf("  logdet sample %lld: library %.6f, here %.6f\n", (long long)n, got, sum);
        CHECK(abs_sum > 1.0); /* the scales are not trivially 1 */
        CHECK_NEAR(got, sum, 1e-4 * abs_sum);
        maxabs = fmax(maxabs, fabs(sum));
    }
    CHECK(maxabs > 0.1);

    /* additive: zeros */
    o.coupling = RT_COUPLING_ADDITIVE;
    chain *ca;
    CHECK_OK(chain_create(&o, &ca));
    rt_tensor *z = NULL;
    CHECK_OK(rt_rev_block_logdet(&ca->blocks[0], x, false, &z));
    tu_own(z);
    CHECK_EQ_INT(z->shape[0], NB);
    CHECK(tu_max_abs(NB, rt_tensor_f32(z)) == 0.0);
}

/* ------------------------------------------------------------ 6. unstable chain */

/* 48 additive blocks, no normalisation, F and G a single conv3×3 without
 * bias, each conv scaled (power iteration, conv_spectral_norm) to spectral
 * norm σ. The chain is linear; its forward amplifies some directions and the
 * inverse amplifies the others, so rounding errors in the rebuilt inputs grow
 * geometrically with the number of inversions while the forward stays finite.
 * A scan over σ prints max|y|, the FULL outcome and the drift; the property
 * "FULL returns an error or gradients within 1e-3 of plain" must hold for
 * every σ, and at σ_unstable FULL must fail. */
enum { UNSTABLE_N = 48 };

static chain_opts unstable_opts(float sigma) {
    return (chain_opts){.c = 8, .n = UNSTABLE_N, .coupling = RT_COUPLING_ADDITIVE, .n_conv = 1, .sigma = sigma,
                        .device = RT_DEVICE_CPU, .seed = 5};
}

static const float SIGMA_UNSTABLE = 2.0f;

TU_TEST(unstable_chain_full) {
    const float sigmas[] = {0.5f, 1.0f, 2.0f, 4.0f};
    rt_tensor *x = make_input(8, 41, 1.0f), *dy = make_input(8, 42, 1.0f);
    bool failed_at_unstable = false;
    for (size_t si = 0; si < sizeof sigmas / sizeof sigmas[0]; si++) {
        chain_opts o = unstable_opts(sigmas[si]);
        chain *A, *B;
        CHECK_OK(chain_create(&o, &A));
        CHECK_OK(chain_create(&o, &B));
        A->seq.reversible = false;
        rt_tensor *ya;
        CHECK_OK(chain_step(A, x, dy, 0, false, NULL, NULL, &ya));
        double ymax = tu_max_abs(rt_tensor_numel(ya), rt_tensor_f32(ya));
        CHECK(isfinite(ymax));
        uint64_t fwd_off = 0, bwd_off = 1;
        rt_status st = chain_step(B, x, dy, 0, false, &fwd_off, &bwd_off, NULL);
        /* also on failure: modes and generator restored */
        CHECK(!rt_recompute_is_active());
        CHECK(rt_grad_is_enabled());
        CHECK_EQ_INT(bwd_off, fwd_off);
        char name[96];
        double e = st == RT_OK ? grads_rel(B->sd, A->sd, name, sizeof name) : NAN;
        printf("  sigma %.2f: max|y| %.3g, FULL backward %s (drift %.3g)%s%s\n", sigmas[si], ymax,
               rt_status_str(st), B->seq.last_drift, st == RT_OK ? "" : ": ", st == RT_OK ? "" : rt_error_last());
        if (st == RT_OK) {
            printf("    gradients vs plain: rel %.3g (%s)\n", e, name);
            CHECK(e <= 1e-3); /* never silently wrong */
        } else {
            CHECK(st == RT_ERR_RECONSTRUCTION || st == RT_ERR_NONFINITE);
            CHECK(message_has("blk."));
            if (sigmas[si] == SIGMA_UNSTABLE) failed_at_unstable = true;
        }
    }
    CHECK(failed_at_unstable);
}

/* AUTO on the unstable chain: the first step calibrates k, then the step's
 * gradients match plain backpropagation (≤ 1e-3) — on the calibration step
 * and on the following ones. */
TU_TEST(unstable_chain_auto) {
    chain_opts o = unstable_opts(SIGMA_UNSTABLE);
    rt_tensor *x = make_input(8, 41, 1.0f), *dy = make_input(8, 42, 1.0f);
    chain *A, *B;
    CHECK_OK(chain_create(&o, &A));
    CHECK_OK(chain_create(&o, &B));
    A->seq.reversible = false;
    B->seq.grouping = RT_GROUPING_AUTO;
    CHECK_OK(chain_step(A, x, dy, 0, false, NULL, NULL, NULL));
    double e[3];
    for (int s = 0; s < 3; s++) {
        chain_zero_grad(B);
        CHECK_OK(chain_step(B, x, dy, 0, false, NULL, NULL, NULL));
        char name[96];
        e[s] = grads_rel(B->sd, A->sd, name, sizeof name);
        printf("  auto step %d: k=%d, calib_error [%.3g, %.3g], drift %.3g, grads vs plain rel %.3g (%s)\n", s,
               B->seq.k, B->seq.calib_error[0], B->seq.calib_error[1], B->seq.last_drift, e[s], name);
    }
    CHECK(B->seq.k >= 1 && B->seq.k < UNSTABLE_N);
    CHECK(e[1] <= 1e-3);
    CHECK(e[2] <= 1e-3);
}

/* The calibration step itself must not return gradients that FULL would
 * have refused: its gradients too must match plain within 1e-3. */
TU_TEST(unstable_chain_auto_calibration_step) {
    chain_opts o = unstable_opts(SIGMA_UNSTABLE);
    rt_tensor *x = make_input(8, 41, 1.0f), *dy = make_input(8, 42, 1.0f);
    chain *A, *B;
    CHECK_OK(chain_create(&o, &A));
    CHECK_OK(chain_create(&o, &B));
    A->seq.reversible = false;
    B->seq.grouping = RT_GROUPING_AUTO;
    CHECK_OK(chain_step(A, x, dy, 0, false, NULL, NULL, NULL));
    CHECK_OK(chain_step(B, x, dy, 0, false, NULL, NULL, NULL));
    char name[96];
    double e = grads_rel(B->sd, A->sd, name, sizeof name);
    if (!(e <= 1e-3))
        fprintf(stderr, "  calibration step (k=%d chosen): gradient %s rel %.3g vs plain\n", B->seq.k, name, e);
    CHECK(e <= 1e-3);
}

/* Inputs much smaller than F's output: additive coupling then loses the
 * input's low bits (x1 = y1 - F(x2) with |y1| >> |x1|), and batch norm inside
 * F and G (scale invariant) turns that into large gradient errors. The drift
 * check must refuse exactly those rebuilds: for each input scale, either
 * FULL succeeds with gradients ≤ 1e-4 of plain, or it returns
 * RT_ERR_RECONSTRUCTION naming the block AND the same step with the check
 * disabled (tol = +inf) really gives gradients > 1e-4 off (no false alarm). */
static void small_input_case(float scale, bool *refused) {
    chain_opts o = base_opts();
    o.bn = true;
    chain *A, *B, *C;
    CHECK_OK(chain_create(&o, &A));
    CHECK_OK(chain_create(&o, &B));
    CHECK_OK(chain_create(&o, &C));
    A->seq.reversible = false;
    C->seq.tol = INFINITY;
    rt_tensor *x = make_input(o.c, 81, 1.0f), *dy = make_input(o.c, 82, 1.0f);
    for (int64_t i = 0; i < rt_tensor_numel(x); i++) rt_tensor_f32(x)[i] *= scale;
    CHECK_OK(chain_step(A, x, dy, 1, false, NULL, NULL, NULL));
    rt_status st = chain_step(B, x, dy, 1, false, NULL, NULL, NULL);
    CHECK(st == RT_OK || st == RT_ERR_RECONSTRUCTION);
    if (st != RT_OK) CHECK(message_has("blk.0"));
    CHECK_OK(chain_step(C, x, dy, 1, false, NULL, NULL, NULL));
    char name[96], name_c[96];
    double e = st == RT_OK ? grads_rel(B->sd, A->sd, name, sizeof name) : NAN;
    double ec = grads_rel(C->sd, A->sd, name_c, sizeof name_c);
    printf("  input scale %-6g: FULL %s (drift %.2e)", scale, rt_status_str(st), B->seq.last_drift);
    if (st == RT_OK) printf(", grads rel %.2e", e);
    printf("; unchecked grads rel %.2e (%s)\n", ec, name_c);
    if (st == RT_OK) CHECK(e <= 1e-4);
    else CHECK(ec > 1e-4);
    *refused = st != RT_OK;
}

TU_TEST(small_input) {
    const float scales[5] = {1e-1f, 1e-2f, 1e-3f, 1e-5f, 0.0f};
    bool refused[5] = {0};
    for (int i = 0; i < 5; i++) {
        small_input_case(scales[i], &refused[i]);
        if (rt_test_failed_) return;
    }
    CHECK(!refused[0]);
    CHECK(refused[2]); /* the check has teeth */
}

/* ------------------------------------------------------------ 7. memory */

/* SAVED peak over forward + backward of one step (x DATA without grad,
 * upstream gradient dy), F/G = conv-BN-ReLU-conv, C = 8, 8×8, N = 4. */
static void saved_peak(int n, bool reversible, int64_t *peak) {
    chain_opts o = base_opts();
    o.bn = true;
    o.n = n;
    chain *ch;
    CHECK_OK(chain_create(&o, &ch));
    ch->seq.reversible = reversible;
    rt_tensor *x = make_input(o.c, 51, 1.0f), *dy = make_input(o.c, 52, 1.0f);
    rt_memstats m0, m;
    rt_memstats_get(&m0);
    CHECK_EQ_INT(m0.live[RT_MEM_SAVED], 0);
    rt_memstats_reset_peaks();
    CHECK_OK(chain_step(ch, x, dy, 1, false, NULL, NULL, NULL));
    rt_memstats_get(&m);
    CHECK_EQ_INT(m.live[RT_MEM_SAVED], 0);
    *peak = m.peak[RT_MEM_SAVED];
}

TU_TEST(memory_depth) {
    const int depths[3] = {2, 10, 40};
    int64_t rev[3], plain[3];
    for (int i = 0; i < 3; i++) {
        saved_peak(depths[i], true, &rev[i]);
        if (rt_test_failed_) return;
        saved_peak(depths[i], false, &plain[i]);
        if (rt_test_failed_) return;
    }
    /* one activation of the block input's size, and the working set W of one block */
    const int64_t act = (int64_t)NB * 8 * HH * WW * 4, W = 4 * act;
    printf("  activation %lld B; SAVED peak reversible 2/10/40 blocks: %lld / %lld / %lld B\n", (long long)act,
           (long long)rev[0], (long long)rev[1], (long long)rev[2]);
    printf("  SAVED peak plain      2/10/40 blocks: %lld / %lld / %lld B\n", (long long)plain[0],
           (long long)plain[1], (long long)plain[2]);
    /* reversible: independent of depth, and at most the output + one block's working set */
    CHECK(llabs(rev[1] - rev[0]) <= W);
    CHECK(llabs(rev[2] - rev[0]) <= W);
    CHECK(rev[2] <= act + W);
    CHECK(rev[0] > 0);
    /* plain: linear in depth. 40 − 10 blocks = 30, 10 − 2 = 8: ratio 3.75 within 5% */
    double ratio = (double)(plain[2] - plain[1]) / (double)(plain[1] - plain[0]);
    printf("  plain (P40-P10)/(P10-P2) = %.4f (linear: 3.75); P40/P2 = %.2f\n", ratio,
           (double)plain[2] / (double)plain[0]);
    CHECK(fabs(ratio - 3.75) <= 0.05 * 3.75);
    CHECK(plain[2] >= 15 * plain[0]);
    CHECK(plain[2] > 10 * rev[2]);
}

/* 20 SGD steps (momentum 0.9, MSE loss): the total live bytes after every
 * step from the 2nd on equal those after the 2nd (the 1st allocates the
 * momentum buffers), and nothing stays SAVED between steps. For plain
 * backpropagation, reversible FULL, EVERY k=2 and AUTO (calibrates at step 1). */
TU_TEST(memory_steady) {
    const struct {
        const char *name;
        bool reversible;
        rt_grouping grouping;
        int k;
    } modes[4] = {{"plain", false, RT_GROUPING_FULL, 0},
                  {"full", true, RT_GROUPING_FULL, 0},
                  {"every 2", true, RT_GROUPING_EVERY, 2},
                  {"auto", true, RT_GROUPING_AUTO, 0}};
    for (int mi = 0; mi < 4; mi++) {
        int64_t live_before = tu_live_bytes();
        chain_opts o = base_opts();
        o.bn = true;
        o.p = 0.5f;
        o.n = 4;
        chain *ch;
        CHECK_OK(chain_create(&o, &ch));
        ch->seq.reversible = modes[mi].reversible;
        ch->seq.grouping = modes[mi].grouping;
        ch->seq.k = modes[mi].k;
        int np = rt_state_dict_num_params(ch->sd);
        rt_tensor **params = calloc((size_t)np, sizeof *params);
        CHECK(params != NULL);
        tu_defer(free, params);
        rt_state_dict_params(ch->sd, params);
        rt_sgd_opts so = rt_sgd_default_opts(0.01);
        so.momentum = 0.9;
        rt_optimizer *opt = rt_sgd_create(params, np, &so);
        CHECK(opt != NULL);
        tu_defer(optimizer_free, opt);
        rt_tensor *x = make_input(o.c, 61, 1.0f), *target = make_input(o.c, 62, 0.5f);
        int64_t live2 = 0, live_k[21] = {0};
        for (int step = 1; step <= 20; step++) {
            rt_optimizer_zero_grad(opt);
            rt_tensor *y = NULL, *loss = NULL;
            CHECK_OK(rt_rev_sequence_forward(&ch->seq, x, true, &y));
            rt_status st = rt_mse_loss(y, target, &loss);
            if (st == RT_OK) st = rt_backward(loss, NULL, false);
            if (st == RT_OK) st = rt_optimizer_step(opt);
            rt_tensor_release(loss);
            rt_tensor_release(y);
            CHECK_OK(st);
            rt_memstats m;
            rt_memstats_get(&m);
            CHECK_EQ_INT(m.live[RT_MEM_SAVED], 0);
            live_k[step] = m.live_total;
            if (step == 2) live2 = m.live_total;
        }
        for (int step = 2; step <= 20; step++) {
            if (live_k[step] != live2)
                fprintf(stderr, "  %s: live after step %d = %lld, after step 2 = %lld\n", modes[mi].name, step,
                        (long long)live_k[step], (long long)live2);
            CHECK_EQ_INT(live_k[step], live2);
        }
        printf("  %-8s live bytes after steps 2..20 (params, grads, momentum, batch): %lld (k=%d)\n", modes[mi].name,
               (long long)(live2 - live_before), ch->seq.k);
    }
}

/* ------------------------------------------------------------ meta device */

/* The planner promise (shared/design.md, "Meta tensors"): a training step on
 * meta tensors books the same memory as the real one, for any strategy. The
 * step runs in a child process so that a crash is reported as a failure of
 * this test instead of killing the suite. */
static int meta_child(void) {
    int64_t peaks[2];
    for (int d = 0; d < 2; d++) {
        chain_opts o = base_opts();
        o.bn = true;
        o.n = 3;
        o.device = d ? RT_DEVICE_META : RT_DEVICE_CPU;
        chain *ch;
        if (chain_create(&o, &ch) != RT_OK) return 3;
        int64_t shape[4] = {NB, o.c, HH, WW};
        rt_tensor *x = rt_tensor_create(4, shape, RT_F32, o.device, RT_MEM_DATA);
        rt_tensor *dy = rt_tensor_create(4, shape, RT_F32, o.device, RT_MEM_TEMP);
        if (!x || !dy) return 3;
        if (!d) {
            rt_generator g = {71, 0};
            rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
            rt_generator_normal(&g, rt_tensor_numel(dy), 0.0f, 1.0f, rt_tensor_f32(dy));
        }
        rt_memstats_reset_peaks();
        rt_status st = chain_step(ch, x, dy, 1, false, NULL, NULL, NULL);
        if (st != RT_OK) {
            fprintf(stderr, "  meta child (%s): %s: %s\n", d ? "meta" : "cpu", rt_status_str(st), rt_error_last());
            return 4;
        }
        rt_memstats m;
        rt_memstats_get(&m);
        peaks[d] = m.peak[RT_MEM_SAVED];
    }
    printf("  SAVED peak reversible step: cpu %lld B, meta %lld B\n", (long long)peaks[0], (long long)peaks[1]);
    fflush(stdout);
    return peaks[0] == peaks[1] ? 0 : 5;
}

static void meta_device(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(120);
        tu_begin();
        int rc = meta_child();
        fflush(stdout);
        _exit(rc);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status))
        fprintf(stderr, "  reversible step on the meta device: child killed by signal %d\n", WTERMSIG(status));
    else if (WEXITSTATUS(status))
        fprintf(stderr, "  reversible step on the meta device: child exit code %d\n", WEXITSTATUS(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ------------------------------------------------------------ 8. RevNet-38 */

/* RevNet-38s from the same seed (1 input channel, 10 classes): one plain
 * (m->reversible false) and reversible ones with grouping FULL, AUTO and
 * EVERY k=2, one training step each on the same batch of 8 random 1×28×28
 * images: every parameter gradient ≤ 1e-4 rel of the plain model's, running
 * statistics and counters bitwise equal, and the reversible FULL step keeps
 * less SAVED than the plain one. */
TU_TEST(revnet38) {
    const struct {
        const char *name;
        bool reversible;
        int grouping, k;
    } modes[4] = {{"plain", false, RT_GROUPING_FULL, 0},
                  {"full", true, RT_GROUPING_FULL, 0},
                  {"auto", true, RT_GROUPING_AUTO, 0},
                  {"every 2", true, RT_GROUPING_EVERY, 2}};
    rt_model *ms[4];
    for (int i = 0; i < 4; i++) {
        CHECK_OK(rt_model_create("revnet38", 1, 10, RT_DEVICE_CPU, 2024, &ms[i]));
        tu_defer(model_free, ms[i]);
        CHECK(ms[i]->reversible); /* the default */
        ms[i]->reversible = modes[i].reversible;
        ms[i]->grouping = modes[i].grouping;
        ms[i]->group_k = modes[i].k;
    }
    int64_t xs[4] = {8, 1, 28, 28}, ts[1] = {8};
    rt_generator g = {909, 0};
    rt_tensor *x = tu_randn(&g, 4, xs, 0.0f, 1.0f);
    rt_tensor *t = tu_own(rt_tensor_create(1, ts, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
    for (int i = 0; i < 8; i++) ((int32_t *)rt_tensor_data(t))[i] = (i * 7) % 10;
    int64_t peak[4];
    for (int i = 0; i < 4; i++) {
        rt_tensor *logits = NULL, *loss = NULL;
        rt_memstats_reset_peaks();
        double t0 = now_s();
        rt_manual_seed(3);
        rt_status st = rt_model_forward(ms[i], x, &logits);
        if (st == RT_OK) st = rt_cross_entropy(logits, t, 0.0f, &loss);
        if (st == RT_OK) st = rt_backward(loss, NULL, false);
        double secs = now_s() - t0;
        rt_tensor_release(loss);
        rt_tensor_release(logits);
        CHECK_OK(st);
        rt_memstats m;
        rt_memstats_get(&m);
        peak[i] = m.peak[RT_MEM_SAVED];
        char name[96] = "-";
        double e = i ? grads_rel(ms[i]->sd, ms[0]->sd, name, sizeof name) : 0.0;
        printf("  revnet38 %-7s: step %.2f s, SAVED peak %lld B, grads vs plain rel %.2e (%s)\n", modes[i].name, secs,
               (long long)peak[i], e, name);
        CHECK(e <= 1e-4);
        CHECK(buffers_bitwise(ms[i]->sd, ms[0]->sd));
    }
    CHECK_EQ_INT(counter_value(ms[1]->sd, "layer1.1.f.bn1.num_batches_tracked"), 1);
    CHECK_EQ_INT(counter_value(ms[1]->sd, "layer3.2.g.bn2.num_batches_tracked"), 1);
    CHECK(peak[1] < peak[0]);
}

RT_TEST_MAIN({"meta_device", meta_device}, {"equiv_additive", equiv_additive}, {"equiv_affine", equiv_affine},
             {"equiv_batchnorm", equiv_batchnorm}, {"equiv_dropout", equiv_dropout},
             {"equiv_dropout_control", equiv_dropout_control},
             {"equiv_eval_mode", equiv_eval_mode}, {"equiv_running_stats", equiv_running_stats},
             {"equiv_grouping_every", equiv_grouping_every}, {"equiv_grouping_auto", equiv_grouping_auto},
             {"param_grads_without_input_grad", param_grads_without_input_grad}, {"retain_graph", retain_graph},
             {"retain_graph_input_grad", retain_graph_input_grad}, {"odd_channels", odd_channels},
             {"refuse_one_channel", refuse_one_channel}, {"refuse_bad_subnets", refuse_bad_subnets},
             {"block_check", block_check}, {"block_logdet", block_logdet},
             {"unstable_chain_full", unstable_chain_full}, {"unstable_chain_auto", unstable_chain_auto},
             {"unstable_chain_auto_calibration_step", unstable_chain_auto_calibration_step},
             {"small_input", small_input},
             {"memory_depth", memory_depth}, {"memory_steady", memory_steady}, {"revnet38", revnet38})
