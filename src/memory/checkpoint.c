/* The Checkpoint wrapper: regions that keep their input and recompute in
 * backward through saved-tensor hooks (memory/checkpoint.h). */
#include "memory/checkpoint.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "autograd/recompute.h"
#include "memory/precision.h"
#include "memory/reversible.h"
#include "nn/modules.h"

/* Nesting depth of regions being run or recomputed on this thread: a
 * Checkpoint met inside one runs plainly, as part of the outer region.
 * Thread-local by design, like grad mode. */
static _Thread_local int rt_ckpt_depth;

/* A side tensor (a skip) by the stage that produced it. */
typedef struct rt_side {
    const rt_module *producer;
    rt_tensor *t;
} rt_side;

/* The region whose forward or recompute runs on this thread (NULL: none),
 * for rt_checkpoint_side_put/get; and the profile's replay table. Both
 * thread-local by design, like the depth above. */
static _Thread_local struct rt_ckpt_frame *rt_ckpt_cur;
enum { RT_SIDE_REPLAY_MAX = 16 };
static _Thread_local struct {
    bool on;
    int n;
    rt_side e[RT_SIDE_REPLAY_MAX];
} rt_side_replay;

typedef enum { RT_SLOT_DROP, RT_SLOT_INPUT, RT_SLOT_KEEP } rt_slot_kind;

/* One tensor an op of the region saved at forward. DROP: recomputed (the
 * drop-th save outside kept leaves); INPUT: the input of kept leaf call
 * `call`; KEEP: held since forward. `t` holds the tensor until the node
 * that saved it takes it (DROP/INPUT) or releases it (KEEP). */
typedef struct rt_ckpt_slot {
    rt_slot_kind kind;
    int call;
    rt_tensor *t;
    const rt_storage *storage; /* the saved tensor's storage at forward (not kept) */
    uint64_t serial;           /* and its serial: the pair names it even after a free */
    uint64_t version;          /* and its version: a consuming op (rt_add_relu_inplace) bumps it */
    int ndim;                  /* and its shape and layout */
    int64_t shape[RT_MAX_DIMS];
    rt_layout layout;
    bool dead;                 /* its node released it: a recompute leaves it empty */
    /* The leaf module call that saved it (its ordinal among the region's
     * outermost leaf calls, else -1) and its module; for a DROP slot,
     * whether that was the leaf's very input (batch norm's x, unchanged):
     * the recompute fills it from that leaf's input without running it. */
    int leaf;
    const rt_module *leaf_m;
    bool of_leaf_input;
    int saves_before, memo_before; /* what the region had saved and kept when that leaf began */
    bool chained;              /* held packed by a precision region's hooks, not in t */
    void *packed;
    rt_saved_hooks by;         /* the hooks that packed it */
} rt_ckpt_slot;

/* A kept leaf module call of a SELECTIVE region: its output replaces the
 * call in recompute, and the generator jumps to where the call left it. */
typedef struct rt_ckpt_call {
    rt_module *m;
    rt_storage *x_storage;
    int64_t x_numel;
    rt_tensor *out;
    rt_rng_state gen_after;
    /* In a precision region the output is kept as the region keeps saved
     * tensors (a half copy, shared with the slots that saved it), not out. */
    bool chained, out_requires_grad;
    void *packed;
    rt_saved_hooks by;
} rt_ckpt_call;

/* A statistic kept for the recompute, and the storage of the key (the
 * batch norm's running_mean) it was kept under. */
typedef struct rt_ckpt_memo {
    rt_tensor *t;
    const rt_storage *key;
} rt_ckpt_memo;

typedef struct rt_ckpt_frame {
    int refcount;              /* the running region + one per packed slot */
    rt_checkpoint *ck;
    int first, last;           /* stages of the region */
    rt_checkpoint_policy_fn policy; /* SELECTIVE regions, else NULL */
    void *policy_user;
    rt_tensor *input;          /* kept, booked SAVED; NULL when packed */
    bool input_requires_grad;
    /* A SELECTIVE region's input inside a precision region, kept as that
     * region keeps saved tensors (a half copy), by input_by. */
    void *input_packed;
    rt_saved_hooks input_by;
    rt_rng_state gen_at;
    rt_ckpt_slot *slots;
    int n_slots, cap_slots;
    int *save_slot;            /* save index -> slot: every save outside kept calls, in order */
    int n_save, cap_save;
    int n_drop;                /* how many of those are dropped (RT_SLOT_DROP) */
    rt_ckpt_call *calls;
    int n_calls, cap_calls;
    int cur_call;              /* kept call running at forward, or -1 */
    /* Leaf module calls (a module without children; one its forward calls
     * in turn is part of it): how many began at forward and at recompute,
     * the one running (its ordinal, or -1, and its module) at each, and at
     * forward its input as it was then. */
    int fw_leaves, rc_leaves, in_leaf, rc_in_leaf;
    const rt_module *leaf_m, *rc_leaf_m;
    const rt_tensor *leaf_x;
    uint64_t leaf_x_version;
    int leaf_saves0, leaf_memo0;
    bool recomputing;
    int rc_save, rc_call;      /* recompute cursors */
    /* The saved-tensor hooks the region was pushed over (a precision
     * region's, say): kept tensors go to them, as if the region were not
     * there; and the precision in force, which the recompute re-enters so
     * it computes what the forward computed. */
    rt_saved_hooks outer;
    bool has_outer;
    rt_dtype autocast, autocast_compute;
    rt_saved_hooks rc_outer;   /* during a recompute: its precision region's hooks */
    bool has_rc_outer;
    /* Side tensors (skips) read by the region's stages but produced before
     * it: kept from forward (booked SAVED) for the recompute. And those its
     * recompute produced itself, held until read or the recompute ends. */
    rt_side *kept;
    int n_kept, cap_kept;
    rt_side *rc_sides;
    int n_rc_sides, cap_rc_sides;
    /* What the forward's ops offered for their recompute (batch norm's
     * batch statistics, rt_saved_memo_keep), in forward order, booked
     * SAVED; handed back in that order to the recompute (cursor rc_memo)
     * and held until the frame goes (a retained graph recomputes again). */
    rt_ckpt_memo *memo;
    int n_memo, cap_memo, rc_memo;
} rt_ckpt_frame;

typedef struct rt_ckpt_handle {
    rt_ckpt_frame *f;
    int slot;
} rt_ckpt_handle;

static void rt_keep(rt_tensor *t, int delta) {
    if (t) rt_storage_mark_saved(t->storage, delta);
}

/* Lets go of what a slot holds: the tensor, or its packed form in the outer hooks. */
static void rt_ckpt_slot_clear(rt_ckpt_slot *s) {
    if (s->chained) {
        if (s->by.free_packed) s->by.free_packed(s->by.user, s->packed);
        s->chained = false;
        s->packed = NULL;
    }
    if (s->kind == RT_SLOT_KEEP) rt_keep(s->t, -1);
    rt_tensor_release(s->t);
    s->t = NULL;
}

/* Lets go of the side tensors kept from forward. */
static void rt_frame_drop_kept(rt_ckpt_frame *f) {
    for (int i = 0; i < f->n_kept; i++) {
        rt_keep(f->kept[i].t, -1);
        rt_tensor_release(f->kept[i].t);
    }
    f->n_kept = 0;
}

/* Lets go of the statistics kept for the recompute (none will run). */
static void rt_frame_drop_memo(rt_ckpt_frame *f) {
    for (int i = 0; i < f->n_memo; i++) {
        rt_keep(f->memo[i].t, -1);
        rt_tensor_release(f->memo[i].t);
    }
    f->n_memo = 0;
}

static void rt_frame_release(rt_ckpt_frame *f) {
    if (!f || --f->refcount > 0) return;
    rt_keep(f->input, -1);
    rt_tensor_release(f->input);
    if (f->input_packed && f->input_by.free_packed) f->input_by.free_packed(f->input_by.user, f->input_packed);
    rt_frame_drop_kept(f);
    free(f->kept);
    rt_frame_drop_memo(f);
    free(f->memo);
    free(f->rc_sides);
    for (int i = 0; i < f->n_slots; i++) {
        rt_ckpt_slot_clear(&f->slots[i]);
    }
    for (int i = 0; i < f->n_calls; i++) {
        rt_ckpt_call *c = &f->calls[i];
        if (c->chained && c->by.free_packed) c->by.free_packed(c->by.user, c->packed);
        rt_keep(c->out, -1);
        rt_tensor_release(c->out);
    }
    free(f->slots);
    free(f->save_slot);
    free(f->calls);
    free(f);
}

/* Grows *arr (of *cap elements of `size` bytes) to hold n + 1. */
static rt_status rt_grow(void **arr, int *cap, int n, size_t size) {
    if (n < *cap) return RT_OK;
    int c = *cap ? 2 * *cap : 8;
    void *p = realloc(*arr, (size_t)c * size);
    if (!p) return rt_error_set(RT_ERR_OOM, "out of memory in a checkpoint region");
    *arr = p;
    *cap = c;
    return RT_OK;
}

/* Whether slot s was saved from t as t is now: one storage (no offsets
 * here) at the same serial and version, seen with one shape and layout (an
 * op may save a new header for a tensor). */
static bool rt_slot_holds(const rt_ckpt_slot *s, const rt_tensor *t) {
    return t->storage && s->storage == t->storage && s->serial == t->storage->serial &&
           s->version == t->storage->version && s->ndim == t->ndim && s->layout == t->layout &&
           !memcmp(s->shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
}

static bool rt_same_as_input(const rt_ckpt_call *c, const rt_tensor *t) {
    return t->storage == c->x_storage && rt_tensor_numel(t) == c->x_numel;
}

/* ------------------------------------------------------------ recompute */

/* Fills slot s with the recomputed t: stored as the precision region the
 * forward ran in stores a saved tensor (as if it had never been dropped),
 * else held as it is. */
static rt_status rt_rc_store(rt_ckpt_frame *f, rt_ckpt_slot *s, rt_tensor *t) {
    if (f->has_rc_outer) {
        RT_TRY(f->rc_outer.pack(f->rc_outer.user, t, &s->packed));
        s->chained = true;
        s->by = f->rc_outer;
    } else {
        s->t = rt_tensor_retain(t);
    }
    return RT_OK;
}

static rt_status rt_rc_pack(void *user, rt_tensor *t, void **packed) {
    rt_ckpt_frame *f = user;
    *packed = NULL;
    if (f->rc_save >= f->n_save)
        return rt_error_set(RT_ERR_STATE, "checkpoint: the recompute saved more tensors than the forward (%d); a "
                            "checkpointed region must run the same ops in both (no data-dependent control flow)",
                            f->n_save);
    rt_ckpt_slot *s = &f->slots[f->save_slot[f->rc_save++]];
    if (s->leaf != f->rc_in_leaf || s->leaf_m != f->rc_leaf_m)
        return rt_error_set(RT_ERR_STATE, "checkpoint: the recompute's save %d came from another module than "
                            "the forward's; a checkpointed region must run the same ops in both (no "
                            "data-dependent control flow)", f->rc_save - 1);
    if (s->kind == RT_SLOT_KEEP || s->t || s->chained || s->dead) return RT_OK;
    return rt_rc_store(f, s, t);
}

/* In recompute, an op asks for what it offered at forward: the next n
 * kept tensors, which must have been kept under this key and have its
 * shape and dtype (the same op at the same place in the region). */
static rt_status rt_rc_memo_take(void *user, const rt_tensor *key, rt_tensor **out, int n, bool *found) {
    rt_ckpt_frame *f = user;
    if (f->rc_memo + n > f->n_memo)
        return rt_error_set(RT_ERR_STATE, "checkpoint: the recompute asked for more kept statistics than the "
                            "forward kept (%d); a checkpointed region must run the same ops in both (no "
                            "data-dependent control flow)", f->n_memo);
    for (int i = 0; i < n; i++) {
        const rt_tensor *t = f->memo[f->rc_memo + i].t;
        if (f->memo[f->rc_memo + i].key != key->storage || t->dtype != key->dtype || t->ndim != key->ndim ||
            memcmp(t->shape, key->shape, (size_t)key->ndim * sizeof *key->shape) != 0)
            return rt_error_set(RT_ERR_STATE, "checkpoint: the recompute's op %d asked for statistics unlike "
                                "those the forward kept there; a checkpointed region must run the same ops in "
                                "both (no data-dependent control flow)", f->rc_memo + i);
    }
    for (int i = 0; i < n; i++) out[i] = rt_tensor_retain(f->memo[f->rc_memo + i].t);
    f->rc_memo += n;
    *found = true;
    return RT_OK;
}

static rt_status rt_rc_unpack(void *user, void *packed, rt_tensor **out) {
    (void)user;
    (void)packed;
    *out = NULL;
    return rt_error_set(RT_ERR_STATE, "checkpoint: a recompute's own graph was back-propagated");
}

/* True when every slot a node may still read holds its tensor (PyTorch's
 * early stop: the rest of the region need not run again). */
static bool rt_frame_complete(const rt_ckpt_frame *f) {
    for (int i = 0; i < f->n_slots; i++)
        if (f->slots[i].kind != RT_SLOT_KEEP && !f->slots[i].dead && !f->slots[i].t && !f->slots[i].chained)
            return false;
    return true;
}

/* Whether every slot still empty was saved by leaf call `leaf` as its
 * input, so that leaf's input is all the recompute still has to give. */
static bool rt_frame_rest_is_input(const rt_ckpt_frame *f, int leaf, const rt_module *m) {
    bool any = false;
    for (int i = 0; i < f->n_slots; i++) {
        const rt_ckpt_slot *s = &f->slots[i];
        if (s->kind == RT_SLOT_KEEP || s->dead || s->t || s->chained) continue;
        if (s->kind != RT_SLOT_DROP || s->leaf != leaf || s->leaf_m != m || !s->of_leaf_input) return false;
        any = true;
    }
    return any;
}

/* Fills those slots with x (rt_rc_store), once the recompute is seen to
 * have saved and kept what the forward had when the leaf began (the check
 * the end of a full recompute makes). */
static rt_status rt_rc_fill_input(rt_ckpt_frame *f, rt_tensor *x) {
    for (int i = 0; i < f->n_slots; i++) {
        rt_ckpt_slot *s = &f->slots[i];
        if (s->kind == RT_SLOT_KEEP || s->dead || s->t || s->chained) continue;
        if (s->saves_before != f->rc_save || s->memo_before != f->rc_memo)
            return rt_error_set(RT_ERR_STATE, "checkpoint: the recompute had saved %d tensors (%d kept "
                                "statistics) where the forward had saved %d (%d) at the same op; a checkpointed "
                                "region must run the same ops in both (no data-dependent control flow)",
                                f->rc_save, f->rc_memo, s->saves_before, s->memo_before);
        rt_tensor *d = rt_tensor_detach(x); /* as an op's save hands it: without the recompute's graph */
        if (!d) return RT_ERR_OOM;
        rt_status st = rt_rc_store(f, s, d);
        rt_tensor_release(d);
        if (st != RT_OK) return st;
    }
    return RT_OK;
}

/* In recompute, a leaf whose input is the last tensor the slots wait for
 * is not run: its input fills them (in a checkpointed Bottleneck, bn3's or
 * the downsample's batch norm, whose wide output nothing would read). A
 * kept leaf call returns its forward output instead of running, and fills
 * the slots that saved its input. */
static rt_status rt_rc_before(void *user, rt_module *m, rt_tensor *x, rt_tensor **y, bool *handled) {
    rt_ckpt_frame *f = user;
    /* Every slot filled: the rest of the stage would compute what no node
     * reads. RT_STOPPED unwinds the stage's forward (its containers free
     * what they hold, as on any failure) and rt_frame_recompute ends. */
    if (rt_frame_complete(f)) return RT_STOPPED;
    if (m->n_children == 0 && f->rc_in_leaf < 0) {
        f->rc_in_leaf = f->rc_leaves++;
        f->rc_leaf_m = m;
        if (rt_frame_rest_is_input(f, f->rc_in_leaf, m)) {
            RT_TRY(rt_rc_fill_input(f, x));
            return RT_STOPPED;
        }
    }
    if (f->rc_call >= f->n_calls || f->calls[f->rc_call].m != m) return RT_OK;
    int k = f->rc_call++;
    rt_ckpt_call *c = &f->calls[k];
    rt_tensor *o = NULL;
    if (c->chained) {
        RT_TRY(c->by.unpack(c->by.user, c->packed, &o));
    } else if (!(o = rt_tensor_detach(c->out))) {
        return RT_ERR_OOM;
    }
    o->requires_grad = c->out_requires_grad;
    for (int i = 0; i < f->n_slots; i++) {
        rt_ckpt_slot *s = &f->slots[i];
        if (s->kind != RT_SLOT_INPUT || s->call != k || s->t || s->chained || s->dead) continue;
        rt_status st = rt_rc_store(f, s, x);
        if (st != RT_OK) {
            rt_tensor_release(o);
            return st;
        }
    }
    rt_status st = rt_recompute_rewind(&f->calls[k].gen_after);
    if (st != RT_OK) {
        rt_tensor_release(o);
        return st;
    }
    *y = o;
    *handled = true;
    f->rc_in_leaf = -1; /* it does not run: rt_rc_after is not called */
    f->rc_leaf_m = NULL;
    return RT_OK;
}

/* After a module of the recompute: with every slot filled, the rest of
 * the stage (a Bottleneck's residual sum after its last batch norm, whose
 * result the region keeps as its output) would compute what no node
 * reads; RT_STOPPED ends it as in rt_rc_before. */
static rt_status rt_rc_after(void *user, rt_module *m, rt_tensor *x, rt_tensor *y, rt_status st) {
    (void)x;
    (void)y;
    rt_ckpt_frame *f = user;
    if (m == f->rc_leaf_m) {
        f->rc_in_leaf = -1;
        f->rc_leaf_m = NULL;
    }
    if (st != RT_OK) return st;
    return rt_frame_complete(f) ? RT_STOPPED : RT_OK;
}

/* Re-runs the region's stages on a detached copy of its input with grad
 * and recompute mode on, from the generator position of the forward,
 * storing every tensor its ops save into the slots still empty (not those
 * whose node has already run), and stopping after the stage that fills
 * the last one. */
static rt_status rt_frame_recompute(rt_ckpt_frame *f) {
    if (f->recomputing)
        return rt_error_set(RT_ERR_STATE, "checkpoint: a saved tensor of a region was read during its own recompute");
    f->recomputing = true;
    f->rc_save = f->rc_call = f->rc_memo = f->rc_leaves = 0;
    f->rc_in_leaf = -1;
    f->rc_leaf_m = NULL;
    rt_tensor *h = NULL;
    rt_status st = RT_OK;
    if (f->input_packed) { /* the half copy back in f32, as an alias the recompute may mark */
        rt_tensor *u = NULL;
        st = f->input_by.unpack(f->input_by.user, f->input_packed, &u);
        if (st == RT_OK) h = rt_tensor_detach(u);
        rt_tensor_release(u);
    } else {
        h = rt_tensor_detach(f->input);
    }
    if (st == RT_OK && !h) st = RT_ERR_OOM;
    if (h) h->requires_grad = f->input_requires_grad;
    rt_recompute_scope scope;
    rt_recompute_begin(&scope);
    if (st == RT_OK) st = rt_recompute_rewind(&f->gen_at);
    bool grad = rt_grad_set_enabled(true);
    /* The precision region the forward ran in, entered again: the ops
     * compute what they computed then, and what they save is stored as
     * that region stored it (rt_rc_pack hands it to the region's hooks). */
    rt_precision_region region = {0};
    if (st == RT_OK) st = rt_precision_region_begin(&region, f->autocast, f->autocast_compute == f->autocast);
    f->has_rc_outer = region.active && rt_saved_tensors_hooks_top(&f->rc_outer);
    rt_saved_hooks hooks = {.pack = rt_rc_pack, .unpack = rt_rc_unpack, .user = f, .memo_take = rt_rc_memo_take};
    bool pushed = false;
    if (st == RT_OK) st = rt_saved_tensors_hooks_push(&hooks);
    pushed = st == RT_OK;
    rt_module_interceptor prev = rt_module_set_interceptor((rt_module_interceptor){rt_rc_before, rt_rc_after, f});
    rt_ckpt_depth++;
    rt_ckpt_frame *prev_cur = rt_ckpt_cur;
    rt_ckpt_cur = f;
    bool early = false;
    for (int i = f->first; i <= f->last && st == RT_OK; i++) {
        if (i > f->first && rt_frame_complete(f)) {
            early = true;
            break;
        }
        rt_tensor *next = NULL;
        st = rt_module_forward(f->ck->stages[i], h, &next);
        rt_tensor_release(h);
        h = next;
    }
    rt_ckpt_depth--;
    rt_ckpt_cur = prev_cur;
    for (int i = 0; i < f->n_rc_sides; i++) rt_tensor_release(f->rc_sides[i].t); /* skips no stage read (early stop) */
    f->n_rc_sides = 0;
    rt_module_set_interceptor(prev);
    if (pushed) rt_saved_tensors_hooks_pop();
    rt_precision_region_end(&region);
    f->has_rc_outer = false;
    rt_grad_set_enabled(grad);
    rt_recompute_end(&scope);
    rt_tensor_release(h);
    if (st == RT_STOPPED) { /* rt_rc_before / rt_rc_after: every slot filled inside a stage */
        st = RT_OK;
        early = true;
    }
    if (st == RT_OK && !early &&
        (f->rc_save != f->n_save || f->rc_call != f->n_calls || f->rc_memo != f->n_memo))
        st = rt_error_set(RT_ERR_STATE, "checkpoint: the recompute saved %d tensors (%d kept calls, %d kept "
                          "statistics) where the forward saved %d (%d, %d); a checkpointed region must run the "
                          "same ops in both (no data-dependent control flow)", f->rc_save, f->rc_call, f->rc_memo,
                          f->n_save, f->n_calls, f->n_memo);
    f->recomputing = false;
    return st;
}

/* ------------------------------------------------------------ the hooks of a region's forward */

/* Whether a region keeps t by alias at no cost instead of dropping it: a
 * parameter or the batch (not an activation), a kept statistic (any
 * region), and in a SELECTIVE region also its input or a kept call's
 * output — batch norm saving a kept convolution output, its weight and
 * its statistics. The recompute then need not run the op that saved it,
 * and stops as soon as every slot is filled (rt_rc_before): in a selective
 * Bottleneck after conv3's input is rebuilt, so the wide bn3 and the
 * residual sum are not run again; in a checkpointed one before bn3 (or
 * the downsample's batch norm), whose input is all it still needs. A
 * CHECKPOINT region drops every activation (its recompute runs from its
 * input anyway). */
static bool rt_frame_holds(const rt_ckpt_frame *f, const rt_tensor *t) {
    const rt_storage *st = t->storage;
    if (st->category == RT_MEM_PARAM || st->category == RT_MEM_DATA) return true;
    for (int i = 0; i < f->n_memo; i++)
        if (f->memo[i].t->storage == st) return true;
    if (!f->policy) return false;
    /* (inside a precision region the input is let go for a half copy at
     * the region's end, rt_region_end, so an alias would keep it alive) */
    if (f->input && !f->has_outer && f->input->storage == st) return true;
    for (int i = 0; i < f->n_calls; i++)
        if (f->calls[i].out && f->calls[i].out->storage == st) return true;
    return false;
}

static rt_status rt_fw_pack(void *user, rt_tensor *t, void **packed) {
    rt_ckpt_frame *f = user;
    *packed = NULL;
    RT_TRY(rt_grow((void **)&f->slots, &f->cap_slots, f->n_slots, sizeof *f->slots));
    rt_ckpt_handle *h = malloc(sizeof *h);
    if (!h) return rt_error_set(RT_ERR_OOM, "out of memory in a checkpoint region");
    rt_ckpt_slot s = {.kind = RT_SLOT_DROP, .call = -1, .leaf = f->in_leaf, .leaf_m = f->leaf_m,
                      .storage = t->storage, .serial = t->storage->serial, .version = t->storage->version,
                      .ndim = t->ndim, .layout = t->layout};
    memcpy(s.shape, t->shape, sizeof s.shape);
    if (f->cur_call >= 0) {
        s.call = f->cur_call;
        if (rt_same_as_input(&f->calls[f->cur_call], t)) {
            s.kind = RT_SLOT_INPUT;
        } else {
            s.kind = RT_SLOT_KEEP;
            if (f->has_outer) { /* as the precision region keeps it (a half copy) */
                rt_status st = f->outer.pack(f->outer.user, t, &s.packed);
                if (st != RT_OK) {
                    free(h);
                    return st;
                }
                s.chained = true;
                s.by = f->outer;
            } else {
                s.t = rt_tensor_retain(t);
                rt_keep(t, +1);
            }
        }
    } else {
        rt_status st = rt_grow((void **)&f->save_slot, &f->cap_save, f->n_save, sizeof *f->save_slot);
        if (st != RT_OK) {
            free(h);
            return st;
        }
        f->save_slot[f->n_save++] = f->n_slots;
        if (rt_frame_holds(f, t)) {
            s.kind = RT_SLOT_KEEP;
            s.t = rt_tensor_retain(t);
            rt_keep(t, +1);
        } else {
            f->n_drop++;
            /* the leaf's input, not written since the leaf received it */
            s.of_leaf_input = f->in_leaf >= 0 && rt_slot_holds(&s, f->leaf_x) && s.version == f->leaf_x_version;
            s.saves_before = f->leaf_saves0;
            s.memo_before = f->leaf_memo0;
        }
    }
    f->slots[f->n_slots] = s;
    h->f = f;
    h->slot = f->n_slots++;
    f->refcount++;
    *packed = h;
    return RT_OK;
}

/* At forward, an op offers what its recompute may reuse; kept unless it
 * runs inside a kept call (which the recompute does not run again). */
static rt_status rt_fw_memo_keep(void *user, const rt_tensor *key, rt_tensor *const *ts, int n) {
    rt_ckpt_frame *f = user;
    if (f->cur_call >= 0) return RT_OK;
    for (int i = 0; i < n; i++) {
        RT_TRY(rt_grow((void **)&f->memo, &f->cap_memo, f->n_memo, sizeof *f->memo));
        f->memo[f->n_memo++] = (rt_ckpt_memo){rt_tensor_retain(ts[i]), key->storage};
        rt_keep(ts[i], +1);
    }
    return RT_OK;
}

static rt_status rt_fw_unpack(void *user, void *packed, rt_tensor **out) {
    (void)user;
    rt_ckpt_handle *h = packed;
    rt_ckpt_frame *f = h->f;
    rt_ckpt_slot *s = &f->slots[h->slot];
    if (s->kind == RT_SLOT_KEEP) {
        if (s->chained) return s->by.unpack(s->by.user, s->packed, out);
        *out = rt_tensor_retain(s->t);
        return RT_OK;
    }
    if (!s->t && !s->chained) RT_TRY(rt_frame_recompute(f));
    if (s->chained) { /* unpacked by the precision hooks; the slot lets go of the packed form */
        rt_status st = s->by.unpack(s->by.user, s->packed, out);
        if (s->by.free_packed) s->by.free_packed(s->by.user, s->packed);
        s->chained = false;
        s->packed = NULL;
        return st;
    }
    if (!s->t)
        return rt_error_set(RT_ERR_STATE, "checkpoint: the recompute did not rebuild a tensor the forward saved");
    *out = s->t; /* the node that saved it owns it now and frees it once it has run */
    s->t = NULL;
    return RT_OK;
}

static void rt_fw_free(void *user, void *packed) {
    (void)user;
    rt_ckpt_handle *h = packed;
    if (!h) return;
    rt_ckpt_frame *f = h->f;
    rt_ckpt_slot *s = &f->slots[h->slot];
    rt_ckpt_slot_clear(s);
    s->dead = true;
    free(h);
    rt_frame_release(f);
}

/* ------------------------------------------------------------ the wrapper's forward */

static int rt_stage_index(rt_checkpoint *ck, const rt_module *m) {
    for (int k = 0; k < ck->n_stages; k++) {
        int i = (ck->cursor + k) % ck->n_stages;
        if (ck->stages[i] == m) {
            ck->cursor = i;
            return i;
        }
    }
    return -1;
}

static bool rt_region_kind(rt_stage_kind k) { return k == RT_STAGE_CHECKPOINT || k == RT_STAGE_SELECTIVE; }

/* The last stage of the region that starts at stage i: the run of stages
 * of its kind (CHECKPOINT or SELECTIVE) with its segment number. */
static int rt_region_last(const rt_checkpoint *ck, int i) {
    int e = i;
    if (rt_region_kind(ck->kind[i]))
        while (e + 1 < ck->n_stages && ck->kind[e + 1] == ck->kind[i] && ck->segment[e + 1] == ck->segment[i]) e++;
    return e;
}

static rt_status rt_region_begin(rt_checkpoint *ck, int i, rt_tensor *x) {
    rt_ckpt_frame *f = calloc(1, sizeof *f);
    if (!f) return rt_error_set(RT_ERR_OOM, "out of memory in a checkpoint region");
    f->refcount = 1;
    f->ck = ck;
    f->first = i;
    f->last = rt_region_last(ck, i);
    if (ck->kind[i] == RT_STAGE_SELECTIVE) {
        f->policy = ck->policy ? ck->policy : rt_checkpoint_policy_default;
        f->policy_user = ck->policy_user;
    }
    f->input = rt_tensor_detach(x); /* without the graph that produced it */
    if (!f->input) {
        free(f);
        return RT_ERR_OOM;
    }
    rt_keep(x, +1);
    f->input_requires_grad = x->requires_grad;
    f->gen_at = rt_rng_state_get();
    f->cur_call = -1;
    f->in_leaf = -1;
    f->has_outer = rt_saved_tensors_hooks_top(&f->outer);
    f->autocast = rt_autocast_dtype();
    f->autocast_compute = rt_autocast_compute_dtype();
    rt_saved_hooks hooks = {.pack = rt_fw_pack, .unpack = rt_fw_unpack, .free_packed = rt_fw_free, .user = f,
                            .memo_keep = rt_fw_memo_keep};
    rt_status st = rt_saved_tensors_hooks_push(&hooks);
    if (st != RT_OK) {
        rt_frame_release(f);
        return st;
    }
    ck->frame = f;
    rt_ckpt_depth++;
    rt_ckpt_cur = f;
    return RT_OK;
}

/* Tensors the region saved that are its output y (an add+ReLU keeps its
 * result): y lives on after the region (the next one keeps it, or the
 * loss), so those slots keep it instead of recomputing a second copy. */
static void rt_keep_output(rt_ckpt_frame *f, rt_tensor *y) {
    for (int i = 0; y && i < f->n_slots; i++) {
        rt_ckpt_slot *s = &f->slots[i];
        if (s->kind != RT_SLOT_DROP || !rt_slot_holds(s, y)) continue;
        rt_tensor *a = rt_tensor_detach(y);
        if (!a) return; /* out of memory: the slot is recomputed instead */
        if (f->has_outer) { /* inside a precision region: kept as the region keeps it */
            void *packed = NULL;
            rt_status st = f->outer.pack(f->outer.user, a, &packed);
            rt_tensor_release(a);
            if (st != RT_OK) return; /* the slot is recomputed instead */
            s->kind = RT_SLOT_KEEP;
            s->chained = true;
            s->packed = packed;
            s->by = f->outer;
            continue;
        }
        s->kind = RT_SLOT_KEEP;
        s->t = a;
        rt_keep(a, +1);
    }
}

static void rt_region_end(rt_checkpoint *ck, rt_tensor *y) {
    rt_ckpt_frame *f = ck->frame;
    if (!f) return;
    rt_keep_output(f, y);
    bool needs_input = f->n_drop > 0;
    for (int i = 0; i < f->n_slots && !needs_input; i++) needs_input = f->slots[i].kind == RT_SLOT_INPUT;
    if (!needs_input) { /* nothing to recompute: everything saved was kept */
        rt_keep(f->input, -1);
        rt_tensor_release(f->input);
        f->input = NULL;
        rt_frame_drop_kept(f);
        rt_frame_drop_memo(f);
    }
    /* A region keeps its input exact (f32) also inside a precision region,
     * as torch.utils.checkpoint under autocast does: a recompute from the
     * rounded input drifted through batch norm to 28x the region's own
     * gradient error (resnet20, fp16, 2 segments). A SELECTIVE region is
     * the exception: it is one stage or unit whose recompute starts from
     * kept outputs that are half copies already, and plain backpropagation
     * in the precision region keeps its input as a half copy too; an
     * f32 input made selective recompute need more than plain (ResNet-50
     * bf16: 747 against 589 MiB). Its input is packed by the precision
     * region's hooks (shared with any half copy of the same storage). */
    if (f->input && f->has_outer && f->ck->kind[f->first] == RT_STAGE_SELECTIVE) {
        rt_keep(f->input, -1); /* else the hooks would see an f32 keeper and share it */
        void *packed = NULL;
        if (f->outer.pack(f->outer.user, f->input, &packed) == RT_OK) {
            rt_tensor_release(f->input);
            f->input = NULL;
            f->input_packed = packed;
            f->input_by = f->outer;
        } else {
            rt_error_clear();
            rt_keep(f->input, +1); /* out of memory for the copy: stays f32 */
        }
    }
    rt_saved_tensors_hooks_pop();
    rt_ckpt_depth--;
    rt_ckpt_cur = NULL;
    rt_frame_release(ck->frame);
    ck->frame = NULL;
}

static rt_status rt_ck_regions(rt_checkpoint *ck, rt_module *m, rt_tensor *x);

/* The wrapper's interceptor: regions and kept calls, then the interceptor
 * that was installed before (a profiler's, or an outer wrapper's). */
/* The forward's leaf call ends: saves after it belong to no leaf. */
static void rt_frame_leaf_done(rt_ckpt_frame *f) {
    f->in_leaf = -1;
    f->leaf_m = NULL;
    f->leaf_x = NULL;
}

static rt_status rt_ck_before(void *user, rt_module *m, rt_tensor *x, rt_tensor **y, bool *handled) {
    rt_checkpoint *ck = user;
    RT_TRY(rt_ck_regions(ck, m, x));
    if (!ck->outer.before) return RT_OK;
    rt_status st = ck->outer.before(ck->outer.user, m, x, y, handled);
    /* answered without running: rt_ck_after will not be called for it */
    if (*handled && ck->frame && ck->frame->leaf_m == m) rt_frame_leaf_done(ck->frame);
    return st;
}

static rt_status rt_ck_regions(rt_checkpoint *ck, rt_module *m, rt_tensor *x) {
    if (!ck->frame) {
        int i = rt_stage_index(ck, m);
        if (i < 0 || !rt_region_kind(ck->kind[i])) return RT_OK;
        RT_TRY(rt_region_begin(ck, i, x));
    }
    rt_ckpt_frame *f = ck->frame;
    if (m->n_children == 0 && f->in_leaf < 0) {
        f->in_leaf = f->fw_leaves++;
        f->leaf_m = m;
        f->leaf_x = x;
        f->leaf_x_version = x && x->storage ? x->storage->version : 0;
        f->leaf_saves0 = f->n_save;
        f->leaf_memo0 = f->n_memo;
    }
    if (f->policy && f->cur_call < 0 && m->n_children == 0) {
        rt_checkpoint_policy p = f->policy(f->policy_user, m);
        if (p == RT_CKPT_MUST_SAVE || p == RT_CKPT_PREFER_SAVE) {
            RT_TRY(rt_grow((void **)&f->calls, &f->cap_calls, f->n_calls, sizeof *f->calls));
            f->calls[f->n_calls] = (rt_ckpt_call){m, x->storage, rt_tensor_numel(x), NULL, {0}, false, false, NULL, {0}};
            f->cur_call = f->n_calls++;
        }
    }
    return RT_OK;
}

static rt_status rt_ck_after(void *user, rt_module *m, rt_tensor *x, rt_tensor *y, rt_status st) {
    rt_checkpoint *ck = user;
    rt_status so = ck->outer.after ? ck->outer.after(ck->outer.user, m, x, y, st) : RT_OK;
    rt_ckpt_frame *f = ck->frame;
    if (!f) return so;
    if (m == f->leaf_m) rt_frame_leaf_done(f);
    if (f->cur_call >= 0 && f->calls[f->cur_call].m == m) {
        rt_ckpt_call *c = &f->calls[f->cur_call];
        f->cur_call = -1;
        if (st == RT_OK) { /* detached: the output's graph holds this frame */
            rt_tensor *d = rt_tensor_detach(y);
            if (!d) return RT_ERR_OOM;
            c->out_requires_grad = y->requires_grad;
            c->gen_after = rt_rng_state_get();
            if (f->has_outer) {
                rt_status sp = f->outer.pack(f->outer.user, d, &c->packed);
                rt_tensor_release(d);
                if (sp != RT_OK) return sp;
                c->chained = true;
                c->by = f->outer;
            } else {
                c->out = d;
                rt_keep(y, +1);
            }
        }
    }
    if (m == ck->stages[f->last]) rt_region_end(ck, st == RT_OK ? y : NULL);
    return so;
}

static bool rt_ckpt_any_region(const rt_checkpoint *ck, int first, int last) {
    for (int i = first; i <= last; i++)
        if (rt_region_kind(ck->kind[i])) return true;
    return false;
}

/* y = stage_last(…stage_first(x)), each stage an ordinary module call. */
static rt_status rt_stage_chain(rt_checkpoint *ck, int first, int last, rt_tensor *x, rt_tensor **y) {
    rt_status st = RT_OK;
    rt_tensor *h = rt_tensor_retain(x);
    for (int i = first; i <= last && st == RT_OK; i++) {
        rt_tensor *next = NULL;
        st = rt_module_forward(ck->stages[i], h, &next);
        rt_tensor_release(h);
        h = next;
    }
    if (st == RT_OK) *y = h;
    else rt_tensor_release(h);
    return st;
}

/* Runs `child` (the whole module) or, when child is NULL, stages
 * first..last, with the wrapper's interceptor installed. */
static rt_status rt_ckpt_run(rt_checkpoint *ck, rt_module *child, int first, int last, rt_tensor *x, rt_tensor **y) {
    ck->cursor = first;
    ck->outer = rt_module_set_interceptor((rt_module_interceptor){rt_ck_before, rt_ck_after, ck});
    rt_status st = RT_OK;
    if (child) st = rt_module_forward(child, x, y);
    else st = rt_stage_chain(ck, first, last, x, y);
    rt_module_set_interceptor(ck->outer);
    ck->outer = (rt_module_interceptor){0};
    rt_region_end(ck, NULL); /* a forward that failed inside a region */
    return st;
}

static rt_status rt_ckpt_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_checkpoint *ck = (rt_checkpoint *)m;
    rt_module *child = m->children[0].module;
    if (!rt_ckpt_any_region(ck, 0, ck->n_stages - 1) || !rt_grad_is_enabled() || rt_ckpt_depth > 0 || ck->frame)
        return rt_module_forward(child, x, y);
    return rt_ckpt_run(ck, child, 0, ck->n_stages - 1, x, y);
}

rt_status rt_checkpoint_run_stages(rt_module *m, int first, int last, rt_tensor *x, rt_tensor **y) {
    rt_checkpoint *ck = rt_checkpoint_of(m);
    if (y) *y = NULL;
    if (!ck || !x || !y)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_run_stages: %s", !ck ? "the module is not a Checkpoint"
                            : !x ? "x is NULL" : "y is NULL");
    if (first < 0 || last >= ck->n_stages || first > last)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_run_stages: stages %d..%d outside 0..%d", first, last,
                            ck->n_stages - 1);
    if (ck->frame) return rt_error_set(RT_ERR_STATE, "rt_checkpoint_run_stages: the wrapper is running");
    /* inside a region of the model's precision already (the stage profile
     * runs the chain in one, as a forward does): its half copies are
     * shared with the stages run before in it; else a region of its own */
    rt_precision_region region = {0};
    bool inside = rt_autocast_dtype() == ck->region_dtype && rt_autocast_compute_dtype() == ck->region_dtype;
    if (!inside) RT_TRY(rt_precision_region_begin(&region, ck->region_dtype, true));
    rt_status st = RT_OK;
    if (!rt_ckpt_any_region(ck, first, last) || !rt_grad_is_enabled() || rt_ckpt_depth > 0)
        st = rt_stage_chain(ck, first, last, x, y);
    else
        st = rt_ckpt_run(ck, NULL, first, last, x, y);
    rt_precision_region_end(&region);
    return st;
}

static void rt_ckpt_destroy(rt_module *m) {
    rt_checkpoint *ck = (rt_checkpoint *)m;
    free(ck->stages);
    free(ck->reads);
    free(ck->unit);
    free(ck->kind);
    free(ck->segment);
}

static const rt_module_class rt_checkpoint_class = {"Checkpoint", rt_ckpt_forward, rt_ckpt_destroy, NULL};

rt_checkpoint *rt_checkpoint_of(rt_module *m) {
    return rt_module_is(m, &rt_checkpoint_class) ? (rt_checkpoint *)m : NULL;
}

/* ------------------------------------------------------------ construction and plans */

static bool rt_is_sequential(const rt_module *m) { return !strcmp(m->cls->type, "Sequential"); }

/* Room for one more stage (stages, reads and unit grow together). */
static rt_status rt_stages_reserve(rt_checkpoint *ck, int *cap) {
    if (ck->n_stages < *cap) return RT_OK;
    int c = *cap ? 2 * *cap : 16;
    rt_module **s = realloc(ck->stages, (size_t)c * sizeof *s);
    if (s) ck->stages = s;
    int *r = realloc(ck->reads, (size_t)c * sizeof *r);
    if (r) ck->reads = r;
    int *u = realloc(ck->unit, (size_t)c * sizeof *u);
    if (u) ck->unit = u;
    if (!s || !r || !u) return rt_error_set(RT_ERR_OOM, "out of memory creating a Checkpoint");
    *cap = c;
    return RT_OK;
}

/* Appends m as stages of unit `unit`: a Sequential's leaves (looking
 * through nested Sequentials), else m itself. */
static rt_status rt_collect_leaves(rt_checkpoint *ck, rt_module *m, int unit, int *cap) {
    if (rt_is_sequential(m) && m->n_children > 0) {
        for (int i = 0; i < m->n_children; i++) RT_TRY(rt_collect_leaves(ck, m->children[i].module, unit, cap));
        return RT_OK;
    }
    RT_TRY(rt_stages_reserve(ck, cap));
    ck->stages[ck->n_stages] = m;
    ck->reads[ck->n_stages] = -1;
    ck->unit[ck->n_stages++] = unit;
    return RT_OK;
}

/* The stages of a module that lists them itself (a U-Net's levels, with
 * the skips they read): each listed stage is a unit, and a listed
 * Sequential contributes its leaves, so that the planner may cut inside a
 * level while checkpoint_sequential and selective recompute still work by
 * level; a reader's skip comes from the last stage of its producer's unit. */
static rt_status rt_collect_listed(rt_checkpoint *ck, rt_module *m, int *cap) {
    int n = m->stages(m, NULL, NULL, 0);
    if (n < 1) return rt_error_set(RT_ERR_STATE, "Checkpoint: a %s listed no stages", m->cls->type);
    rt_module **listed = malloc((size_t)n * sizeof *listed);
    int *reads = malloc((size_t)n * sizeof *reads), *last = malloc((size_t)n * sizeof *last);
    rt_status st = listed && reads && last ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory creating a Checkpoint");
    if (st == RT_OK && m->stages(m, listed, reads, n) != n)
        st = rt_error_set(RT_ERR_STATE, "Checkpoint: a %s listed a varying number of stages", m->cls->type);
    for (int i = 0; i < n && st == RT_OK; i++) {
        if (reads[i] >= i) {
            st = rt_error_set(RT_ERR_STATE, "Checkpoint: stage %d of a %s reads stage %d, not an earlier one", i,
                              m->cls->type, reads[i]);
            break;
        }
        int first = ck->n_stages;
        st = rt_collect_leaves(ck, listed[i], i, cap);
        last[i] = ck->n_stages - 1;
        if (st == RT_OK && reads[i] >= 0) ck->reads[first] = last[reads[i]];
    }
    free(listed);
    free(reads);
    free(last);
    return st;
}

/* Appends module m's stages: a precision region's model, a listing
 * module's (rt_collect_listed), a Sequential's children (looking through
 * nested Sequentials), or m itself; each of the last kind is a unit. */
static rt_status rt_collect_stages(rt_checkpoint *ck, rt_module *m, int *cap) {
    if (!strcmp(m->cls->type, "Autocast") && m->n_children == 1 && ck->n_stages == 0) {
        /* a precision region around the model: the stages are the model's */
        ck->region_dtype = rt_precision_dtype(rt_autocast_precision(m));
        return rt_collect_stages(ck, m->children[0].module, cap);
    }
    if (m->stages && ck->n_stages == 0) return rt_collect_listed(ck, m, cap);
    if (rt_is_sequential(m) && m->n_children > 0) {
        for (int i = 0; i < m->n_children; i++) RT_TRY(rt_collect_stages(ck, m->children[i].module, cap));
        return RT_OK;
    }
    return rt_collect_leaves(ck, m, ck->n_stages ? ck->unit[ck->n_stages - 1] + 1 : 0, cap);
}

rt_status rt_checkpoint_create(rt_module *m, rt_module **out) {
    if (out) *out = NULL;
    if (!m || !out) {
        rt_module_destroy(m);
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_create: %s is NULL", !m ? "the module" : "out");
    }
    rt_checkpoint *ck = (rt_checkpoint *)rt_module_alloc(sizeof *ck, &rt_checkpoint_class);
    if (!ck) {
        rt_module_destroy(m);
        return rt_error_last_status();
    }
    ck->base.training = m->training;
    ck->region_dtype = RT_F32;
    rt_status st = rt_module_add_child(&ck->base, "", m);
    int cap = 0;
    if (st == RT_OK) st = rt_collect_stages(ck, m, &cap);
    if (st == RT_OK) {
        ck->kind = calloc((size_t)ck->n_stages, sizeof *ck->kind);
        ck->segment = calloc((size_t)ck->n_stages, sizeof *ck->segment);
        if (!ck->kind || !ck->segment) st = rt_error_set(RT_ERR_OOM, "out of memory creating a Checkpoint");
    }
    if (st != RT_OK) {
        rt_module_destroy(&ck->base);
        return st;
    }
    for (int i = 0; i < ck->n_stages; i++) ck->kind[i] = RT_STAGE_CHECKPOINT;
    *out = &ck->base;
    return RT_OK;
}

static rt_status rt_ckpt_arg(rt_module *m, const char *fn, rt_checkpoint **ck) {
    *ck = rt_checkpoint_of(m);
    if (!*ck)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: the module is %s, not a Checkpoint (wrap it with "
                            "rt_checkpoint_create)", fn, m ? m->cls->type : "NULL");
    return RT_OK;
}

/* Reversible stages run reversible exactly when REBUILD. */
static void rt_ckpt_sync_reversible(rt_checkpoint *ck) {
    for (int i = 0; i < ck->n_stages; i++) {
        rt_rev_sequence *s = rt_rev_sequence_of(ck->stages[i]);
        if (s) s->reversible = ck->kind[i] == RT_STAGE_REBUILD;
    }
}

rt_status rt_checkpoint_set_segments(rt_module *m, int segments) {
    rt_checkpoint *ck;
    RT_TRY(rt_ckpt_arg(m, "rt_checkpoint_set_segments", &ck));
    if (segments < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "checkpoint segments must be >= 1, got %d", segments);
    /* equal runs of units (a U-Net level is one), as torch's
     * checkpoint_sequential splits a Sequential's children */
    int n = ck->n_stages, units = ck->unit[n - 1] + 1, k = segments < units ? segments : units, len = units / k;
    for (int i = 0; i < n; i++) {
        ck->kind[i] = RT_STAGE_CHECKPOINT;
        ck->segment[i] = ck->unit[i] / len < k ? ck->unit[i] / len : k - 1;
    }
    rt_ckpt_sync_reversible(ck);
    return RT_OK;
}

rt_status rt_checkpoint_sequential(rt_module *seq, int segments, rt_module **out) {
    if (out) *out = NULL;
    if (segments < 1) {
        rt_module_destroy(seq);
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_sequential: segments must be >= 1, got %d", segments);
    }
    RT_TRY(rt_checkpoint_create(seq, out));
    return rt_checkpoint_set_segments(*out, segments);
}

rt_status rt_checkpoint_set_selective(rt_module *m, rt_checkpoint_policy_fn policy, void *user) {
    rt_checkpoint *ck;
    RT_TRY(rt_ckpt_arg(m, "rt_checkpoint_set_selective", &ck));
    for (int i = 0; i < ck->n_stages; i++) { /* one region per unit */
        ck->kind[i] = RT_STAGE_SELECTIVE;
        ck->segment[i] = ck->unit[i];
    }
    ck->policy = policy;
    ck->policy_user = user;
    rt_ckpt_sync_reversible(ck);
    return RT_OK;
}

rt_status rt_checkpoint_set_plain(rt_module *m) {
    rt_checkpoint *ck;
    RT_TRY(rt_ckpt_arg(m, "rt_checkpoint_set_plain", &ck));
    for (int i = 0; i < ck->n_stages; i++) {
        ck->kind[i] = RT_STAGE_STORE;
        ck->segment[i] = i;
    }
    rt_ckpt_sync_reversible(ck);
    return RT_OK;
}

rt_status rt_checkpoint_set_plan(rt_module *m, const rt_stage_kind *kind, const int *segment, int n) {
    rt_checkpoint *ck;
    RT_TRY(rt_ckpt_arg(m, "rt_checkpoint_set_plan", &ck));
    if (!kind || !segment)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_set_plan: %s is NULL", !kind ? "kind" : "segment");
    if (n != ck->n_stages)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_set_plan: the plan has %d stages, the module %d", n,
                            ck->n_stages);
    for (int i = 0; i < n; i++) {
        if (kind[i] < RT_STAGE_STORE || kind[i] > RT_STAGE_REBUILD)
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_set_plan: unknown kind %d at stage %d",
                                (int)kind[i], i);
        if (kind[i] == RT_STAGE_REBUILD && !rt_rev_sequence_of(ck->stages[i])) {
            char path[128];
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_set_plan: stage %d ('%s', a %s) cannot be "
                                "rebuilt: only ReversibleSequence stages are reversible", i,
                                rt_module_path(ck->stages[i], path, sizeof path), ck->stages[i]->cls->type);
        }
    }
    memcpy(ck->kind, kind, (size_t)n * sizeof *kind);
    memcpy(ck->segment, segment, (size_t)n * sizeof *segment);
    rt_ckpt_sync_reversible(ck);
    return RT_OK;
}

const char *rt_stage_kind_str(rt_stage_kind k) {
    switch (k) {
    case RT_STAGE_STORE: return "store";
    case RT_STAGE_CHECKPOINT: return "checkpoint";
    case RT_STAGE_SELECTIVE: return "selective";
    case RT_STAGE_REBUILD: return "rebuild";
    }
    return "?";
}

rt_checkpoint_policy rt_checkpoint_policy_default(void *user, const rt_module *leaf) {
    (void)user;
    if (!leaf || !leaf->cls) return RT_CKPT_PREFER_RECOMPUTE;
    const char *t = leaf->cls->type;
    if (!strcmp(t, "Conv2d") || !strcmp(t, "Conv3d") || !strcmp(t, "ConvTranspose3d") || !strcmp(t, "Linear"))
        return RT_CKPT_MUST_SAVE;
    return RT_CKPT_PREFER_RECOMPUTE;
}

/* ------------------------------------------------------------ side tensors (skips) */

static bool rt_frame_has_stage(const rt_ckpt_frame *f, const rt_module *m) {
    for (int i = f->first; i <= f->last; i++)
        if (f->ck->stages[i] == m) return true;
    return false;
}

static rt_side *rt_side_find(rt_side *list, int n, const rt_module *producer) {
    for (int i = 0; i < n; i++)
        if (list[i].producer == producer && list[i].t) return &list[i];
    return NULL;
}

rt_status rt_checkpoint_side_put(const rt_module *producer, rt_tensor *t, bool *stash) {
    if (stash) *stash = true;
    if (!producer || !t || !stash)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_side_put: %s is NULL",
                            !producer ? "producer" : !t ? "t" : "stash");
    rt_ckpt_frame *f = rt_ckpt_cur;
    if (!f || !f->recomputing) return RT_OK;
    /* a recompute: the region holds it for its reader, the model's table
     * (empty since forward ended) is not touched */
    RT_TRY(rt_grow((void **)&f->rc_sides, &f->cap_rc_sides, f->n_rc_sides, sizeof *f->rc_sides));
    f->rc_sides[f->n_rc_sides++] = (rt_side){producer, rt_tensor_retain(t)};
    *stash = false;
    return RT_OK;
}

static rt_status rt_side_missing(const rt_module *producer) {
    char path[128];
    return rt_error_set(RT_ERR_STATE, "checkpoint: the tensor stage '%s' hands to a later stage is gone (run the "
                        "stages in order, each producer before its reader)",
                        rt_module_path(producer, path, sizeof path));
}

rt_status rt_checkpoint_side_get(const rt_module *producer, rt_tensor *stashed, rt_tensor **out) {
    if (out) *out = NULL;
    if (!producer || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_side_get: %s is NULL", !producer ? "producer" : "out");
    if (rt_side_replay.on) {
        /* profiling: every run of the reader gets one detached copy (a
         * stage's backward run alone must not reach into the graph of the
         * chain that produced the skip) */
        rt_side *r = rt_side_find(rt_side_replay.e, rt_side_replay.n, producer);
        if (!r && stashed && rt_side_replay.n < RT_SIDE_REPLAY_MAX) {
            rt_tensor *d = rt_tensor_detach(stashed);
            if (!d) return RT_ERR_OOM;
            d->requires_grad = stashed->requires_grad;
            r = &rt_side_replay.e[rt_side_replay.n++];
            *r = (rt_side){producer, d};
        }
        if (r) stashed = r->t;
    }
    rt_ckpt_frame *f = rt_ckpt_cur;
    if (f && f->recomputing) {
        if (rt_frame_has_stage(f, producer)) { /* recomputed in this region: the reader takes it */
            rt_side *s = rt_side_find(f->rc_sides, f->n_rc_sides, producer);
            if (!s) return rt_side_missing(producer);
            *out = s->t;
            s->t = NULL;
            return RT_OK;
        }
        rt_side *k = rt_side_find(f->kept, f->n_kept, producer);
        if (!k) return rt_side_missing(producer);
        *out = rt_tensor_retain(k->t);
        return RT_OK;
    }
    if (!stashed) return rt_side_missing(producer);
    if (f && !rt_frame_has_stage(f, producer) && !rt_side_find(f->kept, f->n_kept, producer)) {
        /* produced before the region: kept for its recompute, exact, like the region's input */
        RT_TRY(rt_grow((void **)&f->kept, &f->cap_kept, f->n_kept, sizeof *f->kept));
        rt_tensor *a = rt_tensor_detach(stashed);
        if (!a) return RT_ERR_OOM;
        rt_keep(a, +1);
        f->kept[f->n_kept++] = (rt_side){producer, a};
    }
    *out = rt_tensor_retain(stashed);
    return RT_OK;
}

void rt_checkpoint_side_replay(bool on) {
    if (!on)
        for (int i = 0; i < rt_side_replay.n; i++) rt_tensor_release(rt_side_replay.e[i].t);
    if (!on) rt_side_replay.n = 0;
    rt_side_replay.on = on;
}
