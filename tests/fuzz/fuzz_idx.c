/* libFuzzer harness for the IDX reader (data/idx.h): every input is read as a
 * plain file, as a ".gz" name (zlib path) and by rt_idx_read_first; any
 * outcome but a crash, a sanitizer report or a leaked tracked byte is fine. */
#include "fuzz_file.h"

#include "data/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const rt_fuzz_file *f = rt_fuzz_file_put(data, size);
    const char *paths[2] = {f->plain, f->gz};
    for (int p = 0; p < 2; p++) {
        rt_idx *idx = NULL;
        if (rt_idx_read(paths[p], &idx) == RT_OK) {
            /* touch every byte, so a wrong nbytes shows as an overflow */
            volatile unsigned char sink = 0;
            for (size_t i = 0; i < idx->nbytes; i++) sink ^= ((unsigned char *)idx->data)[i];
            (void)sink;
            rt_idx_destroy(idx);
        }
        idx = NULL;
        if (rt_idx_read_first(paths[p], 2, &idx) == RT_OK) rt_idx_destroy(idx);
        rt_fuzz_check_no_tracked_leak("rt_idx_read");
    }
    return 0;
}
