/* libFuzzer harness for the safetensors reader (io/safetensors.h): open,
 * then walk every entry (touching all its bytes), look each up by name and
 * query metadata; any error is fine, a crash or sanitizer report is not. */
#include "fuzz_file.h"

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const rt_fuzz_file *f = rt_fuzz_file_put(data, size);
    rt_st_file *st = NULL;
    if (rt_st_open(f->plain, &st) == RT_OK) {
        volatile unsigned char sink = 0;
        size_t n = rt_st_count(st);
        for (size_t i = 0; i < n; i++) {
            const rt_st_entry *e = rt_st_entry_at(st, i);
            if (!e) abort();
            for (size_t b = 0; b < e->nbytes; b++) sink ^= ((const unsigned char *)e->data)[b];
            if (rt_st_find(st, e->name) != e) abort();
            if (rt_st_dtype_size(e->dtype) == 0) abort();
        }
        (void)rt_st_metadata(st, "format");
        (void)sink;
        rt_st_close(st);
    }
    rt_fuzz_check_no_tracked_leak("rt_st_open");
    return 0;
}
