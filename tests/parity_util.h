/* Fixture access for the PyTorch parity tests (test_parity.c, test_ops3d.c,
 * test_superres.c):
 * opening tests/fixtures files written by tools/make_fixtures.py, reading
 * their tensors and metadata, and comparing revtorch's results with
 *     max|a - b| / max(max|b|, 1e-6) <= PARITY_TOL = 1e-4   per tensor.
 * The includer defines FIXTURE_DIR (the folder of its .safetensors files)
 * first. Include after rt_test.h and test_util.h. */
#ifndef RT_PARITY_UTIL_H
#define RT_PARITY_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "rt_test.h"
#include "test_util.h"

#ifndef FIXTURE_DIR
#error "define FIXTURE_DIR before including parity_util.h"
#endif
#define PARITY_TOL 1e-4

/* ------------------------------------------------------------ fixture access */

static void fx_close_(void *f) { rt_st_close(f); }

/* Opens tests/fixtures/<name>.safetensors for the rest of the test. */
static inline rt_st_file *fx_open(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.safetensors", FIXTURE_DIR, name);
    rt_st_file *f = NULL;
    if (rt_st_open(path, &f) != RT_OK) {
        fprintf(stderr, "  cannot open fixture %s: %s\n", path, rt_error_last());
        return NULL;
    }
    tu_defer(fx_close_, f);
    const char *c = rt_st_metadata(f, "case");
    if (!c || strcmp(c, name) != 0) {
        fprintf(stderr, "  fixture %s: metadata case is %s\n", path, c ? c : "(missing)");
        return NULL;
    }
    return f;
}

static inline const rt_st_entry *fx_entry(rt_st_file *f, const char *name) {
    const rt_st_entry *e = rt_st_find(f, name);
    if (!e) fprintf(stderr, "  fixture has no tensor '%s'\n", name);
    return e;
}

/* The fixture tensor `name` as a new owned tensor: F32 stays f32, I64 becomes
 * i32 (class indices). requires_grad makes it a leaf that collects .grad. */
static inline rt_tensor *fx_tensor(rt_st_file *f, const char *name, bool requires_grad) {
    const rt_st_entry *e = fx_entry(f, name);
    if (!e) return NULL;
    if (e->ndim > RT_MAX_DIMS) {
        fprintf(stderr, "  fixture tensor '%s' has %d dims\n", name, e->ndim);
        return NULL;
    }
    rt_tensor *t = NULL;
    if (strcmp(e->dtype, "F32") == 0) {
        t = rt_tensor_from_data(e->ndim, e->shape, RT_F32, e->data, RT_MEM_DATA);
    } else if (strcmp(e->dtype, "I64") == 0) {
        t = rt_tensor_create(e->ndim, e->shape, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
        if (t) {
            int32_t *p = rt_tensor_data(t);
            for (int64_t i = 0; i < rt_tensor_numel(t); i++) {
                int64_t v;
                memcpy(&v, (const char *)e->data + i * 8, 8);
                p[i] = (int32_t)v;
            }
        }
    } else {
        fprintf(stderr, "  fixture tensor '%s' has dtype %s\n", name, e->dtype);
        return NULL;
    }
    if (!t) {
        fprintf(stderr, "  cannot create tensor '%s': %s\n", name, rt_error_last());
        return NULL;
    }
    tu_own(t);
    if (requires_grad && rt_tensor_set_requires_grad(t, true) != RT_OK) return NULL;
    return t;
}

/* A 0-d I64 fixture value (num_batches_tracked); -1 when absent. */
static inline int64_t fx_i64(rt_st_file *f, const char *name) {
    const rt_st_entry *e = fx_entry(f, name);
    int64_t v = -1;
    if (e && strcmp(e->dtype, "I64") == 0 && e->nbytes == 8) memcpy(&v, e->data, 8);
    return v;
}

/* Metadata `key` as up to n comma-separated integers into out (a single value
 * fills all n). false when absent or malformed. */
static inline bool fx_ints(rt_st_file *f, const char *key, int n, int64_t *out) {
    const char *s = rt_st_metadata(f, key);
    if (!s) {
        fprintf(stderr, "  fixture metadata has no '%s'\n", key);
        return false;
    }
    int m = 0;
    for (const char *p = s;;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || m == n) m = -1;
        if (m < 0) break;
        out[m++] = v;
        if (*end == '\0') break;
        if (*end != ',') m = -1;
        if (m < 0) break;
        p = end + 1;
    }
    if (m == 1)
        for (int i = 1; i < n; i++) out[i] = out[0];
    else if (m != n) {
        fprintf(stderr, "  fixture metadata '%s' is not %d integers: %s\n", key, n, s);
        return false;
    }
    return true;
}

static inline double fx_double(rt_st_file *f, const char *key) {
    const char *s = rt_st_metadata(f, key);
    if (!s) fprintf(stderr, "  fixture metadata has no '%s'\n", key);
    return s ? strtod(s, NULL) : NAN;
}

/* Compares t with fixture tensor `name`: same shape, relative error
 * max|a-b| / max(max|b|, floor) within PARITY_TOL. Marks the test failed (and
 * goes on) otherwise. `label` names the comparison in the report. */
static void fx_compare_ex(rt_st_file *f, const char *name, const char *label, const rt_tensor *t,
                          double floor) {
    const char *c = rt_st_metadata(f, "case");
    const rt_st_entry *e = fx_entry(f, name);
    if (!e || !t) {
        fprintf(stderr, "  %s: %s: %s\n", c, name, t ? "missing in fixture" : "revtorch produced no tensor");
        rt_test_failed_ = 1;
        return;
    }
    bool shape_ok = strcmp(e->dtype, "F32") == 0 && t->dtype == RT_F32 && e->ndim == t->ndim;
    for (int i = 0; shape_ok && i < t->ndim; i++) shape_ok = e->shape[i] == t->shape[i];
    if (!shape_ok) {
        char buf[64];
        fprintf(stderr, "  %s: %s: revtorch shape %s differs from the fixture's (%d dims)\n", c, name,
                rt_tensor_shape_str(t, buf, sizeof buf), e->ndim);
        rt_test_failed_ = 1;
        return;
    }
    int64_t n = rt_tensor_numel(t);
    float *ref = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!ref) abort();
    memcpy(ref, e->data, e->nbytes);
    double scale = tu_max_abs(n, ref), err = tu_max_abs_diff(n, rt_tensor_f32(t), ref);
    double rel = err / (scale > floor ? scale : floor);
    free(ref);
    bool ok = rel <= PARITY_TOL;
    printf("  parity %-24s %-22s max rel err %.3g (max|ref| %.3g", c, label, rel, scale);
    if (floor > 1e-6) printf(", scale floor %.3g", floor);
    printf(")%s\n", ok ? "" : "  FAIL");
    if (!ok) rt_test_failed_ = 1;
}

static inline void fx_compare(rt_st_file *f, const char *name, const rt_tensor *t) {
    fx_compare_ex(f, name, name, t, 1e-6);
}

/* Backward of sum(y * grad_y) with the fixture's grad_y, after checking y. */
static inline void fx_forward_backward(rt_st_file *f, rt_tensor *y, const char *y_name, const char *grad_name) {
    fx_compare(f, y_name, y);
    rt_tensor *gy = fx_tensor(f, grad_name, false);
    CHECK(y && gy);
    CHECK_OK(rt_backward(y, gy, false));
}

/* Compares the .grad of each leaf with fixture grad_<name> (leaf NULL: the
 * fixture must not have that gradient either). */
static inline void fx_compare_grad(rt_st_file *f, const char *grad_name, const rt_tensor *leaf) {
    if (!leaf) {
        if (rt_st_find(f, grad_name)) {
            fprintf(stderr, "  fixture has %s but the case ran without that input\n", grad_name);
            rt_test_failed_ = 1;
        }
        return;
    }
    fx_compare(f, grad_name, leaf->grad);
}

/* A single-input case: run(f, x, &y) builds y from the fixture's x (a leaf
 * that collects .grad) and its metadata; y, then x's gradient under the
 * fixture's grad_y, are compared with the fixture's y and grad_x. */
typedef rt_status (*fx_unary_fn)(rt_st_file *f, rt_tensor *x, rt_tensor **y);

static inline void fx_parity_unary(const char *name, fx_unary_fn run) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    rt_tensor *x = fx_tensor(f, "x", true), *y = NULL;
    CHECK(x);
    CHECK_OK(run(f, x, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
}

/* Every .safetensors file in FIXTURE_DIR has a case in names[0..n_cases-1]
 * and vice versa (a case without its file also fails in its own test). */
static inline void fx_all_covered(const char *const *names, int n_cases) {
    DIR *d = opendir(FIXTURE_DIR);
    CHECK(d);
    int n_files = 0, missing = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name), ext = strlen(".safetensors");
        if (len <= ext || strcmp(de->d_name + len - ext, ".safetensors") != 0) continue;
        n_files++;
        bool found = false;
        for (int i = 0; i < n_cases && !found; i++)
            found = strlen(names[i]) == len - ext && strncmp(names[i], de->d_name, len - ext) == 0;
        if (!found) {
            fprintf(stderr, "  fixture %s has no parity case\n", de->d_name);
            missing++;
        }
    }
    closedir(d);
    printf("  %d fixture files, %d parity cases\n", n_files, n_cases);
    CHECK_EQ_INT(missing, 0);
    CHECK_EQ_INT(n_files, n_cases);
}

#endif
