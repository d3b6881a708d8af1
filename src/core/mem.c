#include "core/mem.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A cached block: the freed storage of size class `size`. */
typedef struct rt_block {
    struct rt_block *next;
    size_t size;
} rt_block;

/* Size classes: multiples of 512 bytes up to 1 MiB, then of 64 KiB
 * (PyTorch's caching allocator rounds similarly), so shapes that recur each
 * step map to the same class. Bins are a small open hash of singly linked
 * free lists keyed by class size. */
#define RT_CACHE_BINS 1024

/* The per-thread tracker (see mem.h for why thread-local). */
typedef struct rt_tracker {
    rt_block *bins[RT_CACHE_BINS];
    int64_t cache_limit; /* < 0: automatic (see rt_cache_limit) */
    int64_t ceiling;     /* 0 until first needed: see rt_mem_ceiling */
    int64_t high_water;  /* most live bytes ever (never reset, unlike the peaks) */
    rt_memstats stats;
    int64_t limit;
    const char *op;
    const char *module;
    int tracing;
    double trace_t0;
    rt_mem_event *events;
    size_t n_events, cap_events;
} rt_tracker;

static _Thread_local rt_tracker rt_tls_tracker = {.cache_limit = -1};

#define RT_CACHE_FLOOR ((int64_t)1 << 30)

/* The automatic cap is the larger of 1 GiB and twice the most bytes ever
 * live, so a training step finds the blocks of the previous step in the
 * cache however large the step is. With a fixed 1 GiB, ResNet-50 at batch 16
 * returned and re-faulted ~200 MB a step; a cap of the high-water mark alone
 * still missed 17 blocks a step, because the cache holds whole size classes
 * and the classes free at one moment are not the ones asked for next. */
static int64_t rt_cache_limit(const rt_tracker *t) {
    if (t->cache_limit >= 0) return t->cache_limit;
    return 2 * t->high_water > RT_CACHE_FLOOR ? 2 * t->high_water : RT_CACHE_FLOOR;
}

/* The most bytes this process should hold, live and cached together, before
 * the cache is emptied rather than grown: 3/4 of the machine's memory, or of
 * the cgroup's limit when that is lower (containers, CI runners). The rest is
 * for what the tracker does not see (oneDNN primitives, libraries, other
 * processes). Without it, one 15 GiB step on a 24 GiB machine (prunet3d on the
 * whole 0.5 mm Colin27 volume) cached the blocks of its first layers, whose
 * size classes its later layers did not ask for again, and the process was
 * killed by the kernel at 23 GB resident. Read once per thread. */
static int64_t rt_mem_ceiling(rt_tracker *t) {
    if (t->ceiling > 0) return t->ceiling;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t total = pages > 0 && page > 0 ? (int64_t)pages * page : INT64_MAX / 2;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r"); /* cgroup v2; "max" when unlimited */
    if (f) {
        long long v;
        if (fscanf(f, "%lld", &v) == 1 && v > 0 && v < total) total = v;
        fclose(f);
    }
    t->ceiling = total / 4 * 3;
    return t->ceiling;
}

static size_t rt_size_class(size_t n) {
    if (n == 0) return 512;
    if (n <= ((size_t)1 << 20)) return (n + 511) / 512 * 512;
    return (n + 65535) / 65536 * 65536;
}

static rt_block **rt_bin(size_t cls) { return &rt_tls_tracker.bins[(cls / 512) % RT_CACHE_BINS]; }

/* A cached block of exactly class `cls`, or NULL. */
static void *rt_cache_take(size_t cls) {
    rt_block **pp = rt_bin(cls);
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->size == cls) {
            rt_block *b = *pp;
            *pp = b->next;
            rt_tls_tracker.stats.cached_bytes -= (int64_t)cls;
            return b;
        }
    return NULL;
}

/* Process-wide key whose destructor empties a thread's cache when the thread
 * exits (worker threads that allocated tensors). Written once under
 * pthread_once, read-only afterwards. */
static pthread_once_t rt_cache_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t rt_cache_exit_key;
static int rt_cache_key_ok;

static void rt_cache_thread_exit(void *unused) {
    (void)unused;
    rt_mem_release_cache();
}

static void rt_cache_make_key(void) {
    rt_cache_key_ok = pthread_key_create(&rt_cache_exit_key, rt_cache_thread_exit) == 0;
}

static void rt_cache_put(void *p, size_t cls) {
    rt_tracker *t = &rt_tls_tracker;
    if (t->stats.cached_bytes == 0) { /* first block cached on this thread: arrange the exit hook */
        pthread_once(&rt_cache_key_once, rt_cache_make_key);
        if (rt_cache_key_ok) pthread_setspecific(rt_cache_exit_key, (void *)1);
    }
    if (t->stats.cached_bytes + (int64_t)cls > rt_cache_limit(t)) {
        free(p);
        t->stats.n_sys_free++;
        return;
    }
    rt_block *b = p;
    b->size = cls;
    rt_block **bin = rt_bin(cls);
    b->next = *bin;
    *bin = b;
    t->stats.cached_bytes += (int64_t)cls;
}

void rt_mem_release_cache(void) {
    rt_tracker *t = &rt_tls_tracker;
    for (int i = 0; i < RT_CACHE_BINS; i++)
        while (t->bins[i]) {
            rt_block *b = t->bins[i];
            t->bins[i] = b->next;
            free(b);
            t->stats.n_sys_free++;
        }
    t->stats.cached_bytes = 0;
}

void rt_mem_set_ceiling(int64_t bytes) { rt_tls_tracker.ceiling = bytes > 0 ? bytes : 0; }

void rt_mem_set_cache_limit(int64_t bytes) {
    rt_tls_tracker.cache_limit = bytes < 0 ? -1 : bytes;
    if (rt_tls_tracker.stats.cached_bytes > rt_cache_limit(&rt_tls_tracker)) rt_mem_release_cache();
}

static double rt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *rt_mem_category_str(rt_mem_category c) {
    static const char *names[RT_MEM_NCAT] = {"PARAM", "GRAD", "OPTIM", "SAVED", "TEMP", "DATA"};
    return (c >= 0 && c < RT_MEM_NCAT) ? names[c] : "?";
}

void rt_memstats_get(rt_memstats *out) {
    if (out) *out = rt_tls_tracker.stats;
}

/* Whether c names a category (the books are indexed by it). */
static bool rt_category_ok(rt_mem_category c) { return (int)c >= 0 && c < RT_MEM_NCAT; }

void rt_memstats_reset_peaks(void) {
    rt_memstats *s = &rt_tls_tracker.stats;
    for (int c = 0; c < RT_MEM_NCAT; c++) s->peak[c] = s->live[c];
    s->peak_total = s->live_total;
}

void rt_mem_set_limit(int64_t bytes) { rt_tls_tracker.limit = bytes > 0 ? bytes : 0; }
int64_t rt_mem_get_limit(void) { return rt_tls_tracker.limit; }

const char *rt_mem_set_op(const char *op_name) {
    const char *prev = rt_tls_tracker.op;
    rt_tls_tracker.op = op_name;
    return prev;
}

const char *rt_mem_set_module(const char *module_path) {
    const char *prev = rt_tls_tracker.module;
    rt_tls_tracker.module = module_path;
    return prev;
}

const char *rt_mem_module(void) { return rt_tls_tracker.module; }

/* The intern table: a process-wide hash of strings that are never freed
 * (module paths and backward op names: a few hundred per model). */
#define RT_INTERN_BINS 1024
typedef struct rt_interned {
    struct rt_interned *next;
    char s[];
} rt_interned;
static pthread_mutex_t rt_intern_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_interned *rt_intern_bins[RT_INTERN_BINS];

const char *rt_mem_intern(const char *s) {
    if (!s) return NULL;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ull;
    rt_interned **bin = &rt_intern_bins[h % RT_INTERN_BINS];
    const char *found = NULL;
    pthread_mutex_lock(&rt_intern_lock);
    for (rt_interned *e = *bin; e && !found; e = e->next)
        if (!strcmp(e->s, s)) found = e->s;
    if (!found) {
        size_t len = strlen(s);
        rt_interned *e = malloc(sizeof *e + len + 1);
        if (e) {
            memcpy(e->s, s, len + 1);
            e->next = *bin;
            *bin = e;
            found = e->s;
        }
    }
    pthread_mutex_unlock(&rt_intern_lock);
    return found;
}

static void rt_trace_push(int64_t delta, rt_mem_category cat) {
    rt_tracker *t = &rt_tls_tracker;
    if (!t->tracing) return;
    if (t->n_events == t->cap_events) {
        size_t cap = t->cap_events ? 2 * t->cap_events : 4096;
        rt_mem_event *ev = realloc(t->events, cap * sizeof *ev);
        if (!ev) return; /* tracing is best effort; never fail an allocation for it */
        t->events = ev;
        t->cap_events = cap;
    }
    t->events[t->n_events++] = (rt_mem_event){rt_now_s() - t->trace_t0, delta, cat,
                                              t->op ? t->op : "", t->module ? t->module : "-",
                                              t->stats.live_total};
}

static void rt_book(int64_t delta, rt_mem_category cat) {
    rt_memstats *s = &rt_tls_tracker.stats;
    s->live[cat] += delta;
    s->live_total += delta;
    if (s->live[cat] > s->peak[cat]) s->peak[cat] = s->live[cat];
    if (s->live_total > s->peak_total) s->peak_total = s->live_total;
    if (s->live_total > rt_tls_tracker.high_water) rt_tls_tracker.high_water = s->live_total;
    if (delta > 0) s->n_alloc++; else if (delta < 0) s->n_free++;
    rt_trace_push(delta, cat);
}

static rt_status rt_check_limit(size_t nbytes, rt_mem_category cat) {
    rt_tracker *t = &rt_tls_tracker;
    if (t->limit > 0 && t->stats.live_total + (int64_t)nbytes > t->limit)
        return rt_error_set(RT_ERR_OOM,
                            "out of memory: allocating %zu bytes (%s) in op '%s' of module '%s' would "
                            "bring live bytes to %lld, over the limit of %lld bytes; lower the batch size, "
                            "use a memory-saving strategy or raise the limit",
                            nbytes, rt_mem_category_str(cat), t->op ? t->op : "?", t->module ? t->module : "-",
                            (long long)(t->stats.live_total + (int64_t)nbytes),
                            (long long)t->limit);
    return RT_OK;
}

rt_status rt_mem_alloc(size_t nbytes, rt_mem_category cat, void **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_mem_alloc: out is NULL");
    *out = NULL;
    if (!rt_category_ok(cat))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_mem_alloc: unknown memory category %d", (int)cat);
    RT_TRY(rt_check_limit(nbytes, cat));
    size_t cls = rt_size_class(nbytes);
    void *p = rt_cache_take(cls);
    if (!p) {
        /* a miss: rather than grow the process past the ceiling, give the
         * cached blocks of other sizes back first (PyTorch's caching
         * allocator frees its cache and retries when an allocation fails) */
        rt_tracker *t = &rt_tls_tracker;
        if (t->stats.cached_bytes > 0 &&
            t->stats.live_total + t->stats.cached_bytes + (int64_t)cls > rt_mem_ceiling(t))
            rt_mem_release_cache();
        p = aligned_alloc(64, cls);
        if (!p) { /* give the cache back to the system and try once more */
            rt_mem_release_cache();
            p = aligned_alloc(64, cls);
        }
        if (!p)
            return rt_error_set(RT_ERR_OOM, "out of memory: malloc of %zu bytes (%s) in op '%s' of module '%s' "
                                "failed", nbytes, rt_mem_category_str(cat),
                                rt_tls_tracker.op ? rt_tls_tracker.op : "?",
                                rt_tls_tracker.module ? rt_tls_tracker.module : "-");
        rt_tls_tracker.stats.n_sys_alloc++;
    }
    rt_book((int64_t)nbytes, cat);
    *out = p;
    return RT_OK;
}

void rt_mem_free(void *p, size_t nbytes, rt_mem_category cat) {
    if (!p) return;
    rt_cache_put(p, rt_size_class(nbytes));
    if (rt_category_ok(cat)) rt_book(-(int64_t)nbytes, cat);
}

rt_status rt_mem_account(size_t nbytes, rt_mem_category cat) {
    if (!rt_category_ok(cat))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_mem_account: unknown memory category %d", (int)cat);
    RT_TRY(rt_check_limit(nbytes, cat));
    rt_book((int64_t)nbytes, cat);
    return RT_OK;
}

void rt_mem_unaccount(size_t nbytes, rt_mem_category cat) {
    if (rt_category_ok(cat)) rt_book(-(int64_t)nbytes, cat);
}

void rt_mem_move(int64_t nbytes, rt_mem_category from, rt_mem_category to) {
    if (from == to || nbytes == 0 || !rt_category_ok(from) || !rt_category_ok(to)) return;
    rt_memstats *s = &rt_tls_tracker.stats;
    s->live[from] -= nbytes;
    s->live[to] += nbytes;
    if (s->live[to] > s->peak[to]) s->peak[to] = s->live[to];
    rt_trace_push(-nbytes, from);
    rt_trace_push(nbytes, to);
}

void rt_mem_trace_enable(int on) {
    rt_tracker *t = &rt_tls_tracker;
    if (on) {
        t->n_events = 0;
        t->trace_t0 = rt_now_s();
    } else {
        free(t->events);
        t->events = NULL;
        t->n_events = t->cap_events = 0;
    }
    t->tracing = on;
}

int rt_mem_trace_enabled(void) { return rt_tls_tracker.tracing ? 1 : 0; }

void rt_mem_trace_truncate(size_t n) {
    if (n < rt_tls_tracker.n_events) rt_tls_tracker.n_events = n;
}

const rt_mem_event *rt_mem_trace_events(size_t *count) {
    if (count) *count = rt_tls_tracker.n_events;
    return rt_tls_tracker.events;
}

rt_status rt_mem_trace_write_csv(const char *path) {
    if (!path) return rt_error_set(RT_ERR_INVALID_ARG, "rt_mem_trace_write_csv: the path is NULL");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return rt_error_set(RT_ERR_IO, "cannot write memory trace '%s': %s", tmp, strerror(errno));
    size_t n;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    rt_mem_events_write_csv(f, ev, n);
    /* a write error (a full disk, a file-size limit) sticks to the stream */
    int failed = ferror(f);
    if (fclose(f) != 0 || failed || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return rt_error_set(RT_ERR_IO, "cannot write memory trace '%s': %s", path,
                            failed && !e ? "write error" : strerror(e));
    }
    return RT_OK;
}

void rt_mem_events_write_csv(void *file, const rt_mem_event *ev, size_t n) {
    FILE *f = file;
    if (!f) return;
    fprintf(f, "time_s,delta_bytes,category,op,module,live_total\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%.9f,%lld,%s,", ev[i].time_s, (long long)ev[i].delta_bytes, rt_mem_category_str(ev[i].category));
        rt_csv_write_field(f, ev[i].op);
        fputc(',', f);
        rt_csv_write_field(f, ev[i].module);
        fprintf(f, ",%lld\n", (long long)ev[i].live_total);
    }
}

void rt_csv_write_field(void *file, const char *s) {
    FILE *f = file;
    if (!f || !s) return;
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void rt_memstats_print(void *file) {
    if (!file) return;
    FILE *f = file;
    rt_memstats s;
    rt_memstats_get(&s);
    fprintf(f, "%-6s %14s %14s\n", "memory", "live MiB", "peak MiB");
    for (int c = 0; c < RT_MEM_NCAT; c++)
        fprintf(f, "%-6s %14.3f %14.3f\n", rt_mem_category_str(c), s.live[c] / 1048576.0,
                s.peak[c] / 1048576.0);
    fprintf(f, "%-6s %14.3f %14.3f\n", "total", s.live_total / 1048576.0, s.peak_total / 1048576.0);
}
