#include "nn/module.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rt_init_ctx rt_init_ctx_make(rt_device device, uint64_t seed) {
    return (rt_init_ctx){.device = device, .gen = {.seed = seed, .offset = 0}};
}

rt_module *rt_module_alloc(size_t size, const rt_module_class *cls) {
    if (!cls || !cls->forward || !cls->type) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_module_alloc: %s is NULL",
                     !cls ? "the class" : !cls->forward ? "the class's forward function" : "the class's type name");
        return NULL;
    }
    if (size < sizeof(rt_module)) size = sizeof(rt_module);
    rt_module *m = calloc(1, size);
    if (!m) {
        rt_error_set(RT_ERR_OOM, "out of memory creating a %s module", cls->type);
        return NULL;
    }
    m->cls = cls;
    m->training = true;
    return m;
}

void rt_module_destroy(rt_module *m) {
    if (!m) return;
    for (int i = 0; i < m->n_children; i++) {
        rt_module_destroy(m->children[i].module);
        free(m->children[i].name);
    }
    free(m->children);
    for (int i = 0; i < m->n_entries; i++) {
        free(m->entries[i].name);
        rt_tensor_release(m->entries[i].tensor);
    }
    free(m->entries);
    if (m->cls && m->cls->destroy) m->cls->destroy(m);
    free(m);
}

/* This thread's forward interceptor (nn/module.h; none by default). */
static _Thread_local rt_module_interceptor rt_tls_interceptor;

rt_module_interceptor rt_module_set_interceptor(rt_module_interceptor ic) {
    rt_module_interceptor prev = rt_tls_interceptor;
    rt_tls_interceptor = ic;
    return prev;
}

/* Both forwards: consume says x's reference is the callee's to release. */
static rt_status rt_module_run(rt_module *m, rt_tensor *x, rt_tensor **y, bool consume) {
    const char *fn = consume ? "rt_module_forward_consume" : "rt_module_forward";
    rt_status st = RT_OK;
    if (!y) st = rt_error_set(RT_ERR_INVALID_ARG, "%s: the output pointer is NULL", fn);
    else if (!m || !x) st = rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, m ? "the input" : "the module");
    else if (!m->cls || !m->cls->forward)
        st = rt_error_set(RT_ERR_INVALID_ARG, "%s: the module has no class or no forward function (allocate "
                          "modules with rt_module_alloc)", fn);
    if (y) *y = NULL;
    if (st != RT_OK) {
        if (consume) rt_tensor_release(x);
        return st;
    }
    /* The module stack of this thread: the tracker's module slot names the
     * innermost module running, the previous one is kept here on the C call
     * stack and restored on the way out (see core/mem.h). Allocations that
     * no op names take the module's type as their op. */
    char path[256];
    const char *interned = rt_mem_intern(rt_module_path(m, path, sizeof path));
    const char *prev_module = rt_mem_set_module(interned ? interned : rt_mem_module());
    const char *prev_op = rt_mem_set_op(m->cls->type);
    rt_module_interceptor ic = rt_tls_interceptor;
    /* A container under an interceptor hands x on as well (its children,
     * each seen by the interceptor, are then called without consuming), so
     * it does not hold x for its whole forward; after() then gets x NULL */
    bool consumes = consume && m->cls->forward_consume && !m->hook &&
                    ((!ic.before && !ic.after) || m->n_children > 0);
    bool handled = false;
    st = ic.before ? ic.before(ic.user, m, x, y, &handled) : RT_OK;
    if (st == RT_OK && !handled && consumes) {
        st = m->cls->forward_consume(m, x, y); /* releases x */
        x = NULL;
        consume = false;
    } else if (st == RT_OK && !handled) {
        st = m->cls->forward(m, x, y);
        if (st == RT_OK && m->hook) st = m->hook(m, x, *y, m->hook_user);
    }
    if (!handled && ic.after) { /* x NULL once consumed */
        if (st != RT_OK) {
            rt_tensor_release(*y);
            *y = NULL;
        }
        rt_status s2 = ic.after(ic.user, m, x, *y, st);
        if (st == RT_OK) st = s2;
    }
    if (consume) rt_tensor_release(x);
    if (st != RT_OK) {
        rt_tensor_release(*y);
        *y = NULL;
    }
    rt_mem_set_op(prev_op);
    rt_mem_set_module(prev_module);
    return st;
}

rt_status rt_module_forward(rt_module *m, rt_tensor *x, rt_tensor **y) { return rt_module_run(m, x, y, false); }

rt_status rt_module_forward_consume(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_module_run(m, x, y, true);
}

static bool rt_module_name_taken(const rt_module *m, const char *name) {
    if (!name[0]) return false;
    for (int i = 0; i < m->n_children; i++)
        if (!strcmp(m->children[i].name, name)) return true;
    for (int i = 0; i < m->n_entries; i++)
        if (!strcmp(m->entries[i].name, name)) return true;
    return false;
}

rt_status rt_module_add_child(rt_module *m, const char *name, rt_module *child) {
    rt_status st = RT_OK;
    if (!m || !name || !child)
        st = rt_error_set(RT_ERR_INVALID_ARG, "rt_module_add_child: %s is NULL",
                          !m ? "the parent" : !name ? "the name" : "the child");
    else if (strchr(name, '.'))
        st = rt_error_set(RT_ERR_INVALID_ARG, "module name '%s' contains a '.'", name);
    else if (rt_module_name_taken(m, name))
        st = rt_error_set(RT_ERR_INVALID_ARG, "a %s already has a child or tensor named '%s'", m->cls->type, name);
    if (st == RT_OK && m->n_children == m->cap_children) {
        int cap = m->cap_children ? 2 * m->cap_children : 4;
        rt_module_child *p = realloc(m->children, (size_t)cap * sizeof *p);
        if (!p) st = rt_error_set(RT_ERR_OOM, "out of memory adding module '%s'", name);
        else {
            m->children = p;
            m->cap_children = cap;
        }
    }
    char *copy = st == RT_OK ? strdup(name) : NULL;
    if (st == RT_OK && !copy) st = rt_error_set(RT_ERR_OOM, "out of memory adding module '%s'", name);
    if (st != RT_OK) {
        rt_module_destroy(child);
        return st;
    }
    m->children[m->n_children++] = (rt_module_child){.name = copy, .module = child};
    child->parent = m;
    child->name = copy;
    return RT_OK;
}

rt_status rt_module_append(rt_module *m, rt_module *child) {
    int named = 0;
    for (int i = 0; m && i < m->n_children; i++) named += m->children[i].name[0] != '\0';
    char name[16];
    snprintf(name, sizeof name, "%d", named);
    return rt_module_add_child(m, name, child);
}

static rt_status rt_module_push_entry(rt_module *m, rt_state_entry e) {
    if (rt_module_name_taken(m, e.name))
        return rt_error_set(RT_ERR_INVALID_ARG, "a %s already has a child or tensor named '%s'", m->cls->type,
                            e.name);
    if (m->n_entries == m->cap_entries) {
        int cap = m->cap_entries ? 2 * m->cap_entries : 4;
        rt_state_entry *p = realloc(m->entries, (size_t)cap * sizeof *p);
        if (!p) return rt_error_set(RT_ERR_OOM, "out of memory registering '%s'", e.name);
        m->entries = p;
        m->cap_entries = cap;
    }
    e.name = strdup(e.name);
    if (!e.name) return rt_error_set(RT_ERR_OOM, "out of memory registering a tensor");
    m->entries[m->n_entries++] = e;
    return RT_OK;
}

rt_status rt_module_register(rt_module *m, rt_init_ctx *ctx, const char *name, rt_entry_kind kind, int ndim,
                             const int64_t *shape, rt_tensor **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_register: out is NULL");
    *out = NULL;
    if (!m || !ctx || !name || (!shape && ndim > 0))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_register: %s is NULL",
                            !m ? "the module" : !ctx ? "the init context" : !name ? "the name" : "the shape");
    if (kind != RT_ENTRY_PARAM && kind != RT_ENTRY_BUFFER)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_register: '%s' must be a PARAM or a BUFFER (kind %d); "
                            "counters go through rt_module_register_counter", name, (int)kind);
    rt_tensor *t = rt_tensor_zeros(ndim, shape, RT_F32, ctx->device, RT_MEM_PARAM);
    if (!t) return rt_error_last_status();
    if (kind == RT_ENTRY_PARAM) rt_tensor_set_requires_grad(t, true);
    rt_status st = rt_module_push_entry(m, (rt_state_entry){.name = (char *)name, .kind = kind, .tensor = t});
    if (st != RT_OK) {
        rt_tensor_release(t);
        return st;
    }
    *out = t;
    return RT_OK;
}

rt_status rt_module_register_counter(rt_module *m, const char *name, int64_t *counter) {
    if (!m || !name || !counter)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_register_counter: %s is NULL",
                            !m ? "the module" : !name ? "the name" : "the counter");
    return rt_module_push_entry(m, (rt_state_entry){.name = (char *)name, .kind = RT_ENTRY_COUNTER, .counter = counter});
}

rt_tensor *rt_module_tensor(const rt_module *m, const char *name) {
    if (!m || !name) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_module_tensor: %s is NULL", !m ? "the module" : "the name");
        return NULL;
    }
    for (int i = 0; i < m->n_entries; i++)
        if (!strcmp(m->entries[i].name, name)) return m->entries[i].tensor;
    return NULL;
}

/* The child named exactly `name` (len bytes), looking through inline children. */
static rt_module *rt_module_child_named(rt_module *m, const char *name, size_t len) {
    for (int i = 0; i < m->n_children; i++) {
        const char *cn = m->children[i].name;
        if (!cn[0]) {
            rt_module *found = rt_module_child_named(m->children[i].module, name, len);
            if (found) return found;
        } else if (strlen(cn) == len && !strncmp(cn, name, len)) {
            return m->children[i].module;
        }
    }
    return NULL;
}

rt_module *rt_module_find(rt_module *m, const char *path) {
    if (!m || !path) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_module_find: %s is NULL", !m ? "the module" : "the path");
        return NULL;
    }
    while (*path && m) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        m = rt_module_child_named(m, path, len);
        path += len + (dot ? 1 : 0);
    }
    return m;
}

void rt_module_train(rt_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) rt_module_train(m->children[i].module, training);
}

static rt_status rt_module_visit_at(rt_module *m, char *path, size_t cap, rt_module_visit_fn fn, void *user) {
    RT_TRY(fn(m, path, user));
    size_t len = strlen(path);
    for (int i = 0; i < m->n_children; i++) {
        const char *name = m->children[i].name;
        if (name[0]) snprintf(path + len, cap - len, "%s%s", len ? "." : "", name);
        rt_status st = rt_module_visit_at(m->children[i].module, path, cap, fn, user);
        path[len] = '\0';
        if (st != RT_OK) return st;
    }
    return RT_OK;
}

rt_status rt_module_visit(rt_module *m, rt_module_visit_fn fn, void *user) {
    if (!m || !fn) return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_visit: NULL %s", m ? "function" : "module");
    char path[256] = "";
    return rt_module_visit_at(m, path, sizeof path, fn, user);
}

static rt_status rt_state_dict_collect(rt_module *m, const char *path, void *user) {
    for (int i = 0; i < m->n_entries; i++) RT_TRY(rt_state_dict_push(user, path, m->entries[i]));
    return RT_OK;
}

rt_status rt_module_state_dict(rt_module *m, rt_state_dict **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_state_dict: out is NULL");
    *out = NULL;
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_state_dict: the module is NULL");
    rt_state_dict *sd = rt_state_dict_create();
    if (!sd) return RT_ERR_OOM;
    rt_status st = rt_module_visit(m, rt_state_dict_collect, sd);
    if (st != RT_OK) {
        rt_state_dict_destroy(sd);
        return st;
    }
    *out = sd;
    return RT_OK;
}

void rt_module_set_forward_hook(rt_module *m, rt_forward_hook fn, void *user) {
    if (!m) return;
    m->hook = fn;
    m->hook_user = user;
}

char *rt_module_path(const rt_module *m, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    if (!m) return buf;
    const rt_module *chain[64];
    int depth = 0;
    for (const rt_module *p = m; p->parent && depth < 64; p = p->parent)
        if (p->name && p->name[0]) chain[depth++] = p;
    if (depth == 0) {
        snprintf(buf, n, "%s", m->cls && m->cls->type ? m->cls->type : "?");
        return buf;
    }
    size_t len = 0;
    for (int i = depth - 1; i >= 0 && len < n; i--)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i == depth - 1 ? "" : ".", chain[i]->name);
    return buf;
}
