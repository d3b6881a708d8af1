/* libFuzzer harness for the NIfTI reader (data/nifti.h). Each input is read
 * by rt_nifti_read_info, rt_nifti_read (f32) and rt_nifti_read_labels (int32)
 * from a memfd (libnifti's header code runs on it through the reader); a
 * small volume that reads is also written back with its affine and read
 * again, which must give the same values (a writer/reader round trip on
 * arbitrary headers). Any error status is fine; a crash, a sanitizer report,
 * a leaked tracked byte or a failed round trip is a finding. */
#include "fuzz_file.h"

#include <math.h>

#include "data/nifti.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const rt_tensor *t, const rt_nifti_info *info, int gz) {
    char path[128];
    snprintf(path, sizeof path, "%s/out.nii%s", rt_fuzz_f.dir, gz ? ".gz" : "");
    rt_status s = rt_nifti_write(path, t, (const double(*)[4])info->affine);
    if (s == RT_ERR_NONFINITE) return; /* a NaN/Inf affine is refused, rightly */
    if (s != RT_OK) { fprintf(stderr, "write failed: %s\n", rt_error_last()); abort(); }
    rt_tensor *back = NULL;
    rt_nifti_info bi;
    s = t->dtype == RT_F32 ? rt_nifti_read(path, &bi, &back) : rt_nifti_read_labels(path, &bi, &back);
    unlink(path);
    if (s != RT_OK) { fprintf(stderr, "re-read failed: %s\n", rt_error_last()); abort(); }
    if (!rt_tensor_same_shape(t, back) || memcmp(rt_tensor_data(t), rt_tensor_data(back), rt_tensor_nbytes(t)))
        abort();
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++) {
            double x = info->affine[a][b], y = bi.affine[a][b];
            /* the sform is stored as float32 */
            if (fabs(x - y) > 1e-6 * fmax(1.0, fabs(x)) && fabs((double)(float)x - y) > 0) abort();
        }
    rt_tensor_release(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const rt_fuzz_file *f = rt_fuzz_file_put(data, size);
    rt_nifti_info info;
    (void)rt_nifti_read_info(f->plain, &info);
    for (int labels = 0; labels < 2; labels++) {
        rt_tensor *t = NULL;
        rt_status s = labels ? rt_nifti_read_labels(f->plain, &info, &t) : rt_nifti_read(f->plain, &info, &t);
        if (s == RT_OK) {
            if (rt_tensor_numel(t) <= 4096) round_trip(t, &info, (int)(size & 1));
            rt_tensor_release(t);
        } else if (t) {
            abort(); /* a failed read must not hand out a tensor */
        }
        rt_fuzz_check_no_tracked_leak("rt_nifti_read");
    }
    return 0;
}
