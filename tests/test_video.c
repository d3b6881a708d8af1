/* Video prediction: Moving Fashion-MNIST generation (data/moving_fashion.h),
 * the ConvLSTM predictor (models/convlstm.h: finite-difference gradient
 * check of one step, PyTorch parity over several steps) and backpropagation
 * through time under checkpointing schedules (memory/time_chain.h):
 * gradients equal plain BPTT's, the schedule's cost is Griewank's binomial
 * optimum, and the meta-device prediction of the peak equals the measured
 * one and shrinks with the schedule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "core/mem.h"
#include "data/mnist.h"
#include "data/moving_fashion.h"
#include "memory/time_chain.h"
#include "models/convlstm.h"
#include "nn/module.h"
#include "ops/ops.h"
#include "rt_test.h"
#include "test_util.h"
#include "gradcheck_util.h"
#include "fashion_data.h"

#define FIXTURE_DIR RT_SOURCE_DIR "/tests/fixtures/video"
#include "parity_util.h"

/* ------------------------------------------------------------ data */

/* n synthetic 28x28 items: a filled square of value 40·(i+1) with a bright
 * corner (255), so every item has pixels at its border. */
static uint8_t *synthetic_items(int n) {
    uint8_t *im = calloc((size_t)n * 28 * 28, 1);
    for (int i = 0; im && i < n; i++) {
        for (int p = 0; p < 28 * 28; p++) im[i * 784 + p] = (uint8_t)(40 * (i % 6 + 1));
        im[i * 784] = 255;
    }
    return im;
}

/* The same (seed, index) gives the same sequence, another index or seed a
 * different one; items stay inside the frame, bounce (velocity reverses at
 * the border, the position changes by the speed otherwise), pixels in
 * [0, 1] and the frame's maximum is that of the items drawn. */
TU_TEST(moving_fashion_synthetic) {
    uint8_t *im = synthetic_items(5);
    CHECK(im);
    tu_defer(free, im);
    rt_moving_fashion_opts o = rt_moving_fashion_defaults(60);
    const int S = o.size, T = o.frames, K = o.items;
    float *a = malloc(sizeof(float) * T * S * S), *b = malloc(sizeof(float) * T * S * S);
    int *pa = malloc(sizeof(int) * T * K * 2), *pb = malloc(sizeof(int) * T * K * 2);
    CHECK(a && b && pa && pb);
    tu_defer(free, a), tu_defer(free, b), tu_defer(free, pa), tu_defer(free, pb);
    CHECK_OK(rt_moving_fashion_sequence(im, 5, 28, &o, 7, 3, a, pa));
    CHECK_OK(rt_moving_fashion_sequence(im, 5, 28, &o, 7, 3, b, pb));
    CHECK(memcmp(a, b, sizeof(float) * T * S * S) == 0);
    CHECK(memcmp(pa, pb, sizeof(int) * T * K * 2) == 0);
    CHECK_OK(rt_moving_fashion_sequence(im, 5, 28, &o, 7, 4, b, pb));
    CHECK(memcmp(pa, pb, sizeof(int) * T * K * 2) != 0);
    CHECK_OK(rt_moving_fashion_sequence(im, 5, 28, &o, 8, 3, b, pb));
    CHECK(memcmp(pa, pb, sizeof(int) * T * K * 2) != 0);
    int bounces = 0;
    for (int t = 0; t < T; t++) {
        float mx = 0.0f;
        for (int p = 0; p < S * S; p++) {
            float v = a[t * S * S + p];
            CHECK(v >= 0.0f && v <= 1.0f);
            if (v > mx) mx = v;
        }
        CHECK(mx == 1.0f); /* the bright corner of an item is always drawn */
        for (int k = 0; k < K; k++) {
            int r = pa[(t * K + k) * 2], c = pa[(t * K + k) * 2 + 1];
            CHECK(r >= 0 && c >= 0 && r <= S - 28 && c <= S - 28);
            CHECK(a[t * S * S + r * S + c] == 1.0f);
            if (t >= 2) { /* displacement per frame is at most the speed (+1 for rounding) */
                int r1 = pa[((t - 1) * K + k) * 2], r2 = pa[((t - 2) * K + k) * 2];
                CHECK(abs(r - r1) <= 5);
                if ((r - r1) * (r1 - r2) < 0) bounces++;
            }
        }
    }
    CHECK(bounces > 0); /* 60 frames at 3.6 px in a 36 px range: items bounce */
    /* batch layout: frame t of sequence b at (t, b) */
    float *batch = malloc(sizeof(float) * T * 2 * S * S);
    CHECK(batch);
    tu_defer(free, batch);
    rt_dataset *ds = NULL;
    int32_t labels[5] = {0, 1, 2, 3, 4};
    rt_sample_shape shp = {3, {1, 28, 28, 0}, RT_U8};
    CHECK_OK(rt_dataset_from_memory(5, &shp, 10, im, labels, &ds));
    rt_status st = rt_moving_fashion_batch(ds, &o, 7, 2, 2, batch);
    rt_dataset_destroy(ds);
    CHECK_OK(st);
    CHECK(memcmp(batch + (5 * 2 + 1) * S * S, a + 5 * S * S, sizeof(float) * S * S) == 0);
    o.speed = -1.0f;
    CHECK(rt_moving_fashion_sequence(im, 5, 28, &o, 7, 3, a, NULL) == RT_ERR_INVALID_ARG);
}

/* The real data: training sequences differ from test sequences, pixels in
 * [0, 1], the frame is the maximum of two Fashion-MNIST items. */
TU_TEST(moving_fashion_real) {
    rt_dataset *tr = NULL, *te = NULL;
    CHECK_OK(rt_mnist_load(fashion_dir(), true, &tr));
    rt_status st = rt_mnist_load(fashion_dir(), false, &te);
    if (st != RT_OK) rt_dataset_destroy(tr);
    CHECK_OK(st);
    rt_moving_fashion_opts o = rt_moving_fashion_defaults(10);
    float *a = malloc(sizeof(float) * 10 * 2 * 64 * 64), *b = malloc(sizeof(float) * 10 * 2 * 64 * 64);
    st = a && b ? rt_moving_fashion_batch(tr, &o, 1, 0, 2, a) : RT_ERR_OOM;
    if (st == RT_OK) st = rt_moving_fashion_batch(te, &o, 1, 0, 2, b);
    rt_dataset_destroy(tr);
    rt_dataset_destroy(te);
    tu_defer(free, a), tu_defer(free, b);
    CHECK_OK(st);
    CHECK(memcmp(a, b, sizeof(float) * 10 * 2 * 64 * 64) != 0);
    double sum = 0;
    for (int i = 0; i < 10 * 2 * 64 * 64; i++) {
        CHECK(a[i] >= 0.0f && a[i] <= 1.0f);
        sum += a[i];
    }
    CHECK(sum > 0.0);
}

/* ------------------------------------------------------------ ConvLSTM */

static rt_module *g_model;

/* cat[S_{t+1}, x̂_{t+1}] of one step: in = frame, state, then the four
 * parameters (perturbed in place by the check). */
static rt_status f_step(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    rt_tensor *next = NULL, *pred = NULL;
    RT_TRY(rt_convlstm_step(g_model, in[0], in[1], &next, &pred));
    rt_status st = rt_cat_channels(2, (rt_tensor *[]){next, pred}, out);
    rt_tensor_release(next);
    rt_tensor_release(pred);
    return st;
}

static rt_module *make_model(rt_device dev, int hidden, uint64_t seed) {
    rt_init_ctx ctx = rt_init_ctx_make(dev, seed);
    rt_convlstm_config cfg = {1, hidden, 3};
    rt_module *m = NULL;
    if (rt_convlstm_create(&ctx, &cfg, &m) != RT_OK) return NULL;
    return m;
}

static void module_destroy_(void *m) { rt_module_destroy(m); }

/* Finite differences against autograd for one step: gradients of the frame,
 * the packed state (h and c) and all four parameters. */
TU_TEST(convlstm_gradcheck) {
    seed_inputs(161);
    g_model = make_model(RT_DEVICE_CPU, 3, 5);
    CHECK(g_model);
    tu_defer(module_destroy_, g_model);
    rt_tensor *w = rt_module_tensor(rt_module_find(g_model, "cell.conv"), "weight");
    rt_tensor *bc = rt_module_tensor(rt_module_find(g_model, "cell.conv"), "bias");
    rt_tensor *hw = rt_module_tensor(rt_module_find(g_model, "head"), "weight");
    rt_tensor *hb = rt_module_tensor(rt_module_find(g_model, "head"), "bias");
    CHECK(w && bc && hw && hb);
    CHECK(GC("convlstm_step", f_step, NULL, 1e-2f, RANDN(0.5, 0.3, 2, 1, 5, 4), RANDN(0, 0.5, 2, 6, 5, 4), w, bc, hw,
             hb));
}

/* ------------------------------------------------------------ time chain */

/* A small sequence: T + 1 random frames (N, 1, H, W) in [0, 1]. */
typedef struct chain_case {
    rt_module *model;
    rt_tensor *frames[130];
    rt_tensor *state0;
    rt_convlstm_seq seq;
} chain_case;

static bool chain_setup(chain_case *c, rt_device dev, int T, int N, int H, int hidden) {
    memset(c, 0, sizeof *c);
    c->model = make_model(dev, hidden, 11);
    if (!c->model) return false;
    tu_defer(module_destroy_, c->model);
    for (int t = 0; t <= T; t++) {
        c->frames[t] = tu_own(rt_tensor_create(4, (int64_t[]){N, 1, H, H}, RT_F32, dev, RT_MEM_DATA));
        if (!c->frames[t]) return false;
        if (dev == RT_DEVICE_CPU) rt_philox_uniform(99, (uint64_t)t * 1000, N * H * H, rt_tensor_f32(c->frames[t]));
    }
    c->state0 = tu_own(rt_tensor_zeros(4, (int64_t[]){N, 2 * hidden, H, H}, RT_F32, dev, RT_MEM_TEMP));
    c->seq = (rt_convlstm_seq){c->model, c->frames, T + 1};
    return c->state0 != NULL;
}

#define N_PARAMS 4
static const char *const k_params[N_PARAMS][2] = {
    {"cell.conv", "weight"}, {"cell.conv", "bias"}, {"head", "weight"}, {"head", "bias"}};

static rt_tensor *param(rt_module *m, int i) { return rt_module_tensor(rt_module_find(m, k_params[i][0]), k_params[i][1]); }

static void zero_grads(rt_module *m) {
    for (int i = 0; i < N_PARAMS; i++) rt_tensor_zero_grad(param(m, i));
}

/* Plain BPTT written out: all steps with grad on, mean of the losses, one
 * rt_backward; copies of the gradients in g[]. */
static rt_status plain_bptt(chain_case *c, int T, double *loss, rt_tensor **g) {
    zero_grads(c->model);
    rt_tensor *cur = rt_tensor_retain(c->state0), *total = NULL;
    rt_status st = RT_OK;
    *loss = 0;
    for (int t = 0; t < T && st == RT_OK; t++) {
        rt_tensor *next = NULL, *l = NULL, *sc = NULL;
        st = rt_convlstm_seq_step(&c->seq, t, cur, &next, &l);
        rt_tensor_release(cur);
        cur = next;
        if (st != RT_OK) break;
        *loss += rt_tensor_f32(l)[0];
        st = rt_mul_scalar(l, 1.0f / T, &sc);
        rt_tensor_release(l);
        if (st == RT_OK && total) {
            rt_tensor *s = NULL;
            st = rt_add(total, sc, &s);
            rt_tensor_release(total);
            rt_tensor_release(sc);
            total = s;
        } else if (st == RT_OK) {
            total = sc;
        }
    }
    rt_tensor_release(cur);
    if (st == RT_OK) st = rt_backward(total, NULL, false);
    rt_tensor_release(total);
    for (int i = 0; i < N_PARAMS && st == RT_OK; i++) g[i] = tu_own(rt_tensor_to(param(c->model, i)->grad, RT_F32, RT_MEM_DATA));
    return st;
}

/* Every schedule gives plain BPTT's loss and gradients (relative 1e-5):
 * plain through the chain, store-every-k for several k, the binomial
 * (Revolve) schedule with few slots, and the budget's choice. */
TU_TEST(time_chain_equals_plain) {
    const int T = 12;
    chain_case c;
    CHECK(chain_setup(&c, RT_DEVICE_CPU, T, 2, 12, 4));
    double ref_loss = 0;
    rt_tensor *ref[N_PARAMS];
    CHECK_OK(plain_bptt(&c, T, &ref_loss, ref));
    rt_time_plan plans[8];
    int np = 0;
    CHECK_OK(rt_time_plan_plain(T, 1, 1, &plans[np++]));
    CHECK_OK(rt_time_plan_every(T, 3, 1, 1, &plans[np++]));
    CHECK_OK(rt_time_plan_every(T, 5, 1, 1, &plans[np++]));
    plans[np++] = (rt_time_plan){T, 1, 2, 0, 0};  /* Revolve, 2 slots */
    plans[np++] = (rt_time_plan){T, 1, 11, 0, 0}; /* every state kept */
    plans[np++] = (rt_time_plan){T, 2, 3, 0, 0};  /* mixed: segments of 2, 3 slots */
    CHECK_OK(rt_time_plan_budget(T, 100, 700, 3000, &plans[np++]));
    for (int p = 0; p < np; p++) {
        zero_grads(c.model);
        double loss = 0;
        CHECK_OK(rt_time_chain_run(rt_convlstm_seq_step, &c.seq, &plans[p], c.state0, 1.0f / T, &loss));
        CHECK(fabs(loss - ref_loss) <= 1e-6 * fabs(ref_loss));
        for (int i = 0; i < N_PARAMS; i++) {
            double rel = rt_rel_difference(param(c.model, i)->grad, ref[i]);
            if (!(rel <= 1e-5))
                fprintf(stderr, "  plan %d (segment %d, slots %d): %s.%s rel %.3g\n", p, plans[p].segment,
                        plans[p].slots, k_params[i][0], k_params[i][1], rel);
            CHECK(rel <= 1e-5);
        }
    }
    zero_grads(c.model);
}

/* The dynamic program's cost with segments of 1 is Griewank's binomial
 * optimum: with c checkpoints, t(l, c) = r·l − β(c+1, r−1) advances, β(c, r)
 * = (c+r)!/(c!r!), r the integer with β(c, r−1) < l <= β(c, r) (Griewank &
 * Walther 2000, ACM TOMS 26, Proposition 1), plus the l recordings. c =
 * slots: Griewank counts the start state among his checkpoints, the time
 * chain holds it besides its slots but needs one slot for the state being
 * advanced (c = 1 is the quadratic schedule, l(l-1)/2 advances, in both). */
static double binom(int n, int k) {
    double r = 1;
    for (int i = 1; i <= k; i++) r = r * (n - k + i) / i;
    return r;
}
static double beta(int c, int r) { return r < 0 ? 0 : binom(c + r, c); }

TU_TEST(time_chain_binomial_cost) {
    for (int s = 1; s <= 4; s++)
        for (int l = 2; l <= 40; l++) {
            rt_time_plan p;
            /* a budget admitting exactly s slots and segments of 1 */
            CHECK_OK(rt_time_plan_budget(l, 1000, 1000000, (int64_t)s * 1000 + 1000000 + 999, &p));
            int r = 0;
            while (!(beta(s, r - 1) < l && l <= beta(s, r))) r++;
            double advances = r * (double)l - beta(s + 1, r - 1);
            if (!(fabs(p.forwards - l - advances) < 1e-9))
                fprintf(stderr, "  l %d s %d: %g forwards, binomial %g + %d\n", l, s, p.forwards, advances, l);
            CHECK(fabs(p.forwards - l - advances) < 1e-9);
        }
}

static int64_t chain_peak(chain_case *c, const rt_time_plan *p, int T) {
    int64_t peak = -1;
    if (rt_time_chain_peak(rt_convlstm_seq_step, &c->seq, p, c->state0, 1.0f / T, &peak, NULL) != RT_OK)
        fprintf(stderr, "  chain: %s\n", rt_error_last());
    return peak;
}

/* The meta device predicts the measured peak exactly (same schedule, same
 * bookings), and at 128 steps the budgeted schedule needs at most a
 * quarter of plain BPTT's activation memory with at most 2T forwards. */
TU_TEST(time_chain_memory) {
    const int T = 10;
    chain_case real, meta;
    CHECK(chain_setup(&real, RT_DEVICE_CPU, T, 2, 16, 4));
    CHECK(chain_setup(&meta, RT_DEVICE_META, T, 2, 16, 4));
    rt_time_plan plans[3];
    CHECK_OK(rt_time_plan_plain(T, 1, 1, &plans[0]));
    CHECK_OK(rt_time_plan_every(T, 3, 1, 1, &plans[1]));
    plans[2] = (rt_time_plan){T, 1, 3, 0, 0};
    for (int p = 0; p < 3; p++) {
        zero_grads(real.model);
        zero_grads(meta.model);
        int64_t a = chain_peak(&real, &plans[p], T), b = chain_peak(&meta, &plans[p], T);
        CHECK(a > 0);
        CHECK_EQ_INT(a, b);
    }
    /* fewer slots never need more memory: the recursion with one slot is
     * T levels deep, and no level may keep the gradient of a state already
     * passed (each is released as soon as the next recording holds it) */
    int64_t prev_peak = -1;
    for (int s = 1; s <= 9; s += 2) {
        rt_time_plan p = {T, 1, s, 0, 0};
        zero_grads(meta.model);
        int64_t peak = chain_peak(&meta, &p, T);
        CHECK(peak > 0);
        if (prev_peak >= 0) CHECK(peak >= prev_peak);
        prev_peak = peak;
    }
    zero_grads(real.model);
    zero_grads(meta.model);
}

TU_TEST(time_chain_memory_128) {
    const int T = 128;
    chain_case meta;
    CHECK(chain_setup(&meta, RT_DEVICE_META, T, 2, 16, 8));
    int64_t step_bytes = 0, base = 0, plain_peak = 0, planned_peak = 0;
    CHECK_OK(rt_time_chain_profile(rt_convlstm_seq_step, &meta.seq, meta.state0, &step_bytes, &base));
    rt_time_plan plain, planned;
    const int64_t state_bytes = rt_tensor_nbytes(meta.state0);
    CHECK_OK(rt_time_plan_plain(T, state_bytes, step_bytes, &plain));
    CHECK_OK(rt_time_chain_peak(rt_convlstm_seq_step, &meta.seq, &plain, meta.state0, 1.0f / T, &plain_peak, NULL));
    CHECK_OK(rt_time_plan_budget(T, state_bytes, step_bytes, plain_peak / 4 - base, &planned));
    CHECK_OK(rt_time_chain_peak(rt_convlstm_seq_step, &meta.seq, &planned, meta.state0, 1.0f / T, &planned_peak, NULL));
    fprintf(stderr, "  step %lld B, state %lld B, base %lld B; plain %lld B, planned (segment %d, %d slots, %.0f "
            "forwards, model %lld B) %lld B\n", (long long)step_bytes, (long long)state_bytes, (long long)base,
            (long long)plain_peak, planned.segment, planned.slots, planned.forwards, (long long)(base + planned.bytes),
            (long long)planned_peak);
    CHECK(planned_peak * 4 <= plain_peak);
    CHECK(planned.forwards <= 2 * T);
    zero_grads(meta.model);
}

/* ------------------------------------------------------------ parity */

/* tools/make_video_fixtures.py: a ConvLSTM (hidden 3, 3x3) over 4 steps of
 * 2 sequences of 6x5 frames, loss = mean over steps of mse(x̂_{t+1},
 * x_{t+1}); the predictions, the final state, the loss and every
 * parameter's gradient, under plain BPTT and a Revolve schedule. */
TU_TEST(convlstm_parity) {
    rt_st_file *f = fx_open("convlstm_seq");
    CHECK(f);
    rt_module *m = make_model(RT_DEVICE_CPU, 3, 1);
    CHECK(m);
    tu_defer(module_destroy_, m);
    for (int i = 0; i < N_PARAMS; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%s", k_params[i][0], k_params[i][1]);
        rt_tensor *src = fx_tensor(f, name, false);
        CHECK(src);
        CHECK_OK(rt_tensor_copy(param(m, i), src));
    }
    rt_tensor *frames_all = fx_tensor(f, "frames", false);
    CHECK(frames_all && frames_all->ndim == 5);
    const int T1 = (int)frames_all->shape[0], T = T1 - 1;
    const int64_t fs[4] = {frames_all->shape[1], frames_all->shape[2], frames_all->shape[3], frames_all->shape[4]};
    rt_tensor *frames[16];
    CHECK(T1 <= 16);
    for (int t = 0; t < T1; t++) {
        frames[t] = tu_own(rt_tensor_from_data(4, fs, RT_F32, rt_tensor_f32(frames_all) + t * fs[0] * fs[1] * fs[2] * fs[3],
                                               RT_MEM_DATA));
        CHECK(frames[t]);
    }
    rt_tensor *pred_ref = fx_tensor(f, "pred", false);
    rt_tensor *loss_ref = fx_tensor(f, "loss", false);
    CHECK(pred_ref && loss_ref);
    /* forward: predictions step by step */
    rt_tensor *state = tu_own(rt_tensor_zeros(4, (int64_t[]){fs[0], 6, fs[2], fs[3]}, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    rt_tensor *cur = rt_tensor_retain(state);
    bool prev = rt_grad_set_enabled(false);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        rt_tensor *next = NULL, *pred = NULL;
        rt_status st = rt_convlstm_step(m, frames[t], cur, &next, &pred);
        rt_tensor_release(cur);
        cur = next;
        if (st != RT_OK) break;
        rt_tensor *ref = tu_own(rt_tensor_from_data(4, fs, RT_F32, rt_tensor_f32(pred_ref) + t * fs[0] * fs[1] * fs[2] * fs[3],
                                                    RT_MEM_DATA));
        double rel = rt_rel_difference(pred, ref);
        if (rel > worst) worst = rel;
        rt_tensor_release(pred);
    }
    rt_grad_set_enabled(prev);
    rt_tensor *state_ref = fx_tensor(f, "state", false);
    double rs = cur && state_ref ? rt_rel_difference(cur, state_ref) : INFINITY;
    rt_tensor_release(cur);
    fprintf(stderr, "  predictions rel %.3g, final state rel %.3g\n", worst, rs);
    CHECK(worst <= PARITY_TOL && rs <= PARITY_TOL);
    /* backward under plain BPTT and a Revolve schedule */
    rt_convlstm_seq seq = {m, frames, T1};
    rt_time_plan plans[2];
    CHECK_OK(rt_time_plan_plain(T, 1, 1, &plans[0]));
    plans[1] = (rt_time_plan){T, 1, 1, 0, 0};
    for (int p = 0; p < 2; p++) {
        zero_grads(m);
        double loss = 0;
        CHECK_OK(rt_time_chain_run(rt_convlstm_seq_step, &seq, &plans[p], state, 1.0f / T, &loss));
        double lref = rt_tensor_f32(loss_ref)[0];
        CHECK(fabs(loss / T - lref) <= PARITY_TOL * fabs(lref));
        for (int i = 0; i < N_PARAMS; i++) {
            char name[64];
            snprintf(name, sizeof name, "grad.%s.%s", k_params[i][0], k_params[i][1]);
            rt_tensor *g = fx_tensor(f, name, false);
            CHECK(g);
            double rel = rt_rel_difference(param(m, i)->grad, g);
            fprintf(stderr, "  plan %d %s rel %.3g\n", p, name, rel);
            CHECK(rel <= PARITY_TOL);
        }
    }
    zero_grads(m);
}

static const rt_test_case k_cases[] = {
    {"moving_fashion_synthetic", moving_fashion_synthetic}, {"convlstm_gradcheck", convlstm_gradcheck},
    {"time_chain_equals_plain", time_chain_equals_plain},   {"time_chain_binomial_cost", time_chain_binomial_cost},
    {"time_chain_memory", time_chain_memory},               {"time_chain_memory_128", time_chain_memory_128},
    {"convlstm_parity", convlstm_parity},
};
static const rt_test_case k_fashion[] = {{"moving_fashion_real", moving_fashion_real}};

int main(int argc, char **argv) {
    return rt_test_main_with_fashion(argc, argv, k_cases, (int)(sizeof k_cases / sizeof k_cases[0]), k_fashion,
                                     (int)(sizeof k_fashion / sizeof k_fashion[0]));
}
