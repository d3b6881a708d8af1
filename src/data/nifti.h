/* NIfTI volumes (.nii, .nii.gz): read into tensors, write tensors back.
 *
 * Format: NIfTI-1 (https://nifti.nimh.nih.gov/nifti-1/, the annotated
 * nifti1.h) and NIfTI-2 (https://nifti.nimh.nih.gov/nifti-2/, nifti2.h), as
 * implemented by Debian's libnifti2 (nifti_clib). A single-file image is a
 * 348-byte (NIfTI-1) or 540-byte (NIfTI-2) header, optional extensions, and
 * from byte vox_offset the voxels, index i fastest, then j, k, t, u.
 *
 * What libnifti does here and what revtorch does itself:
 *   - libnifti interprets the header: byte swapping (swap_nifti_header),
 *     the qform quaternion -> matrix (nifti_quatern_to_dmat44), the sform,
 *     pixdim defaults, datatype sizes; when writing it builds the header
 *     (nifti_convert_nim2n1hdr / n2hdr) and the quaternion of an affine.
 *   - revtorch reads the bytes through zlib itself, because libnifti's own
 *     loader picks gzip from the file NAME (.gz), replaces non-finite floats
 *     by 0 silently, and reports failures on stderr only. Here gzip or plain
 *     is decided by CONTENT (zlib's transparent reading: the gzip magic
 *     1f 8b), the header kind by the header (sizeof_hdr 348 / 540 in either
 *     byte order, then the magic "n+1" / "n+2"), and the data size is checked
 *     exactly: a short file is an error naming expected vs actual bytes and
 *     never a partly zero-filled volume. Every header field that could make
 *     libnifti misbehave (dim[0], dims <= 0, voxel count overflow, vox_offset,
 *     datatype, bitpix) is checked before libnifti sees the header.
 *
 * Axis order (the decision, and why). NIfTI stores voxel (i, j, k) at
 * i + ni*(j + nj*k), i fastest. revtorch tensors are C-order (last index
 * fastest), so the volume is returned as shape [C, nk, nj, ni] = PyTorch's
 * [C, D, H, W] with D = k, H = j, W = i, without moving a byte:
 *     tensor[c][k][j][i] == voxel (i, j, k) of channel c.
 * nibabel returns the same voxels as an array of shape (ni, nj, nk) (its
 * axes follow i, j, k); the revtorch tensor equals nibabel's array
 * transposed, torch.from_numpy(img.get_fdata().T) (for 4-D data:
 * .transpose(3, 2, 1, 0)). A single-channel volume is [1, nk, nj, ni]: add
 * the batch axis and it is Conv3d's NCDHW input.
 * Channels: a singleton 4th dimension (t) is squeezed; the 5th (u, NIfTI's
 * vector components: intent VECTOR, displacement fields) and a non-singleton
 * 4th (a time series or stacked modalities, as in the Medical Segmentation
 * Decathlon's 4-D images) become channels, c = u * nt + t. Dimensions 6 and
 * 7 larger than 1 are refused.
 *
 * Scaling: value = scl_slope * raw + scl_inter, applied only when scl_slope
 * is finite and non-zero (NIfTI-1 spec, as nibabel does); otherwise the raw
 * values are returned unchanged.
 *
 * Geometry: the 4x4 affine maps voxel (i, j, k, 1) to world (x, y, z, 1) in
 * the file's units (usually mm). Taken from the sform when sform_code > 0,
 * else from the qform when qform_code > 0, else a diagonal of pixdim[1..3]
 * (the ANALYZE fallback, as nibabel's get_best_affine). An unused matrix
 * full of zeros is therefore never an error.
 *
 * Memory: reading books the raw on-disk bytes and the f32 output (both
 * RT_MEM_DATA); the raw buffer is freed before returning, so the peak is
 * raw + output (for an f32 file read as f32, only the output). */
#ifndef RT_DATA_NIFTI_H
#define RT_DATA_NIFTI_H

#include <stdint.h>

#include "../core/status.h"
#include "../core/tensor.h"

/* Where the affine of an rt_nifti_info came from. */
typedef enum rt_nifti_affine_source {
    RT_NIFTI_AFFINE_SFORM = 0,
    RT_NIFTI_AFFINE_QFORM = 1,
    RT_NIFTI_AFFINE_PIXDIM = 2,
} rt_nifti_affine_source;

/* A NIfTI header, as the reader understood it. Plain values, no pointers. */
typedef struct rt_nifti_info {
    int version;          /* 1 (NIfTI-1) or 2 (NIfTI-2) */
    int compressed;       /* 1 when the file content is gzip, 0 when plain */
    int big_endian;       /* 1 when the file's byte order is big-endian */
    int datatype;         /* NIfTI datatype code: 2 uint8, 256 int8, 4 int16,
                             512 uint16, 8 int32, 16 float32, 64 float64 */
    int bitpix;           /* bits per voxel (8 * element size) */
    int ndim;             /* dim[0] of the header, 1..7 */
    int64_t dim[8];       /* dim[1..ndim] of the header; dim[0] = ndim, rest 1 */
    double pixdim[8];     /* pixdim[1..ndim] (libnifti replaces 0 and non-finite by 1) */
    int64_t shape[4];     /* the tensor shape [C, nk, nj, ni] (see axis order) */
    int64_t vox_offset;   /* byte offset of the first voxel in the (decompressed) file */
    int64_t data_bytes;   /* bytes of voxel data = numel * bitpix / 8 */
    double scl_slope;     /* as in the header */
    double scl_inter;     /* as in the header; 0 when the header's is not finite */
    int scaled;           /* 1 when value = slope * raw + inter is applied: slope
                             finite and != 0, and (slope, inter) not (1, 0) */
    int sform_code;       /* header codes (0 unknown, 1 scanner, 2 aligned, 3 talairach, 4 mni) */
    int qform_code;
    double affine[4][4];  /* voxel (i,j,k,1) -> world, row-major; last row 0 0 0 1 */
    rt_nifti_affine_source affine_source;
} rt_nifti_info;

/* "uint8", "int8", "int16", "uint16", "int32", "float32", "float64" (numpy's
 * names, as nibabel reports them) for the supported datatype codes, the
 * NIfTI name (e.g. "RGB24", "COMPLEX64") for other known codes, "unknown"
 * otherwise. Never NULL. */
const char *rt_nifti_datatype_str(int datatype);

/* "sform", "qform" or "pixdim" ("?" for another value). Never NULL. */
const char *rt_nifti_affine_source_str(rt_nifti_affine_source s);

/* Reads only the header of the NIfTI file at `path` into *info (a .nii
 * whether gzip-compressed or not, whatever its name) and checks it and the
 * data size: the file must hold all data_bytes after vox_offset (exactly
 * checked for a plain file; for a gzip file only the header is decompressed,
 * so a truncated gzip file is found by rt_nifti_read, not here).
 * Errors:
 *   RT_ERR_INVALID_ARG  path or info NULL
 *   RT_ERR_IO           cannot open or read (strerror in the message)
 *   RT_ERR_FORMAT       not a NIfTI file (sizeof_hdr is neither 348 nor 540,
 *                       or no "n+1"/"n+2" magic: e.g. ANALYZE 7.5), header
 *                       cut short, dim[0] outside 1..7, a dimension < 1,
 *                       more than 2^40 voxels, a vox_offset inside the header
 *                       or not finite, bitpix contradicting the datatype, an
 *                       unknown datatype code, corrupt gzip data, a plain file
 *                       shorter than vox_offset + data_bytes (expected vs
 *                       actual bytes)
 *   RT_ERR_UNSUPPORTED  a known but unsupported datatype (RGB, RGBA,
 *                       complex, binary, 64-bit integers, uint32,
 *                       float128), a header/image pair ("ni1"/"ni2" magic:
 *                       the data are in a separate .img file), dims 6 or 7 > 1 */
rt_status rt_nifti_read_info(const char *path, rt_nifti_info *info);

/* Reads the volume at `path` as a new f32 tensor of shape
 * [C, nk, nj, ni] (see the axis order above), scaling applied, booked as
 * RT_MEM_DATA; what training uses. *info (optional, may be NULL) receives the
 * header as for rt_nifti_read_info.
 * On failure *out is NULL and nothing stays allocated.
 * Errors: those of rt_nifti_read_info; RT_ERR_FORMAT when the data end before
 * data_bytes (message: expected vs actual bytes, and whether the gzip stream
 * itself ends early); RT_ERR_OOM (tracked limit or malloc). */
rt_status rt_nifti_read(const char *path, rt_nifti_info *info, rt_tensor **out);

/* Reads a label map at `path` as a new int32 tensor [C, nk, nj, ni]
 * (RT_MEM_DATA), values kept exact: integer datatypes are converted
 * losslessly; float32/float64 files and scaled files are accepted when every
 * (scaled) value is an integer within int32 range. *info as rt_nifti_read.
 * Errors: those of rt_nifti_read; RT_ERR_DTYPE naming the first voxel
 * (i, j, k) and its value when a value is not an integer or is out of
 * int32 range. */
rt_status rt_nifti_read_labels(const char *path, rt_nifti_info *info, rt_tensor **out);

/* Writes `t` to `path` as a single-file NIfTI volume with the given affine
 * (voxel (i,j,k,1) -> world, row-major 4x4; its last row is ignored and
 * written as 0 0 0 1). The content is gzip-compressed when path ends in
 * ".gz" (the name is the user's choice here, not a guess about content).
 *   t        cpu tensor, shape [D, H, W] or [C, D, H, W] (= [nk, nj, ni],
 *            C channels become the 5th dimension, as the reader maps them
 *            back; C = 1 writes a 3-D file), dtype:
 *            float32 -> datatype float32;
 *            int32 / uint8 (label maps) -> the smallest of uint8, int16,
 *            int32 that holds every value exactly.
 *   affine   stored as the sform (code 1, scanner) and, as far as a
 *            rotation can express it, as the qform (code 1); pixdim[1..3]
 *            are its column norms. NULL: identity, both codes 0.
 * NIfTI-1 is written when every dimension fits its 16-bit fields, NIfTI-2
 * otherwise. scl_slope is 1 and scl_inter 0 (values stored as they are).
 * Atomic: the bytes go to "PATH.tmp.<pid>", are fsync'ed and renamed over
 * PATH; on any failure the temporary file is removed and PATH is untouched.
 * Errors: RT_ERR_INVALID_ARG (path or t NULL, meta tensor), RT_ERR_SHAPE
 * (ndim not 3 or 4, a dimension < 1), RT_ERR_DTYPE (another dtype),
 * RT_ERR_NONFINITE (an affine entry that is not a finite float32), RT_ERR_IO (create, write,
 * fsync or rename failed: strerror in the message), RT_ERR_OOM. */
rt_status rt_nifti_write(const char *path, const rt_tensor *t, const double affine[4][4]);

#endif
