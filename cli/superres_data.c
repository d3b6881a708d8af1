/* `revtorch superres`: the volume of --image, loaded, normalised and split
 * into training, gap and held-out slices (data/superres.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/nifti.h"
#include "data/superres.h"
#include "superres_internal.h"

int cli_sr_load(const cli_sr_opts *o, cli_sr_data *d) {
    if (access(o->image, R_OK) != 0) {
        fprintf(stderr, "revtorch superres %s: cannot read --image %s: %s%s\n", o->cmd, o->image, strerror(errno),
                strcmp(o->image, SR_DEFAULT_IMAGE) ? "" : " (the default task needs Debian's mricron-data "
                                                          "package: apt-get install mricron-data)");
        return 1;
    }
    /* the shape from the header first: a volume that is not 3-D is refused before its data are read */
    rt_nifti_info info;
    if (rt_nifti_read_info(o->image, &info) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: --image %s: %s\n", o->cmd, o->image, rt_error_last());
        return 1;
    }
    int nd = info.ndim; /* trailing axes of size 1 do not count */
    while (nd > 1 && info.dim[nd] == 1) nd--;
    char dims[160] = "";
    for (int a = 1; a <= info.ndim && a <= 7; a++) {
        size_t l = strlen(dims);
        snprintf(dims + l, sizeof dims - l, "%s%lld", a > 1 ? "x" : "", (long long)info.dim[a]);
    }
    if (nd > 3) {
        fprintf(stderr, "revtorch superres %s: --image %s is %d-D (%s); give a single 3-D volume\n", o->cmd,
                o->image, nd, dims);
        return 1;
    }
    if (nd < 3 || info.dim[3] < 3) {
        fprintf(stderr, "revtorch superres %s: --image %s is %d-D (%s); superres needs a 3-D volume with >= 3 axial "
                        "slices\n", o->cmd, o->image, nd, dims);
        return 1;
    }
    if (rt_nifti_read(o->image, NULL, &d->volume) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: --image %s: %s\n", o->cmd, o->image, rt_error_last());
        return 1;
    }
    if (rt_sr_normalize(d->volume, o->percentile, &d->q) != RT_OK ||
        rt_sr_split_slices(d->volume->shape[1], o->holdout, o->gap, &d->split) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: --image %s: %s\n", o->cmd, o->image, rt_error_last());
        return 1;
    }
    const int64_t H = d->volume->shape[2], W = d->volume->shape[3];
    if (!strcmp(o->cmd, "train") && (o->patch * o->scale > H || o->patch * o->scale > W)) { /* eval draws no patches */
        fprintf(stderr, "revtorch superres %s: --patch %lld at scale %lld needs %lld-pixel targets; the slices are "
                        "%lldx%lld: use --patch <= %lld\n", o->cmd, (long long)o->patch, (long long)o->scale,
                (long long)(o->patch * o->scale), (long long)H, (long long)W, (long long)((H < W ? H : W) / o->scale));
        return 2;
    }
    if (rt_sr_eval_slices(d->volume, &d->split, o->eval_slices, 0.05f, 0.1, d->ks, &d->n_eval) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: %s\n", o->cmd, rt_error_last());
        return 1;
    }
    if (d->n_eval == 0) {
        fprintf(stderr, "revtorch superres %s: no held-out slice has 10%% of its voxels above 0.05; hold out more "
                        "(--holdout)\n", o->cmd);
        return 1; /* a property of the volume: a data problem */
    }
    return -1;
}
