#!/usr/bin/env bash
# `revtorch inspect`: NIfTI (crafted by revtorch's own writer through the
# library test files and by the fuzz seed script), IDX and safetensors, text
# and --json, and refusals. The mricron-data brain templates are checked
# when installed (Debian's mricron-data); without them the test exits 77.
set -uo pipefail
bin="$1"
src="$(cd "$(dirname "$0")/.." && pwd)"
pass=0; fail=0
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_lib.sh"
check_shows=(head -5) # the start of a failing command's output
# json_check NAME FILE PYTHON-EXPR: the --json output parsed as `j` must make EXPR true
json_check() {
    local name="$1" file="$2" expr="$3"
    local out
    if ! out="$("$bin" inspect --json "$file" 2>&1)"; then
        fail=$((fail+1)); echo "FAIL $name: inspect --json failed: $out" | head -5; return; fi
    if python3 -c "import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if ($expr) else 1)" "$out"; then
        pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $name: not ($expr): $out" | head -c 600; echo; fi
}
seeds="$src/tests/fuzz/corpus/nifti"
# the scaling example: int16 [0, 100, -100, 32767], slope 0.5, intercept 10
json_check nifti-scaled "$seeds/seed_i16_scaled.nii" \
  "j['format']=='nifti1' and j['shape']==[4,1,1] and j['dtype_on_disk']=='int16' and j['scaling']['applied'] \
   and j['min']==-40 and j['max']==16393.5 and j['sum']==10+60-40+16393.5 and j['mean']==j['sum']/4 \
   and j['affine_source']=='pixdim' and len(j['affine'])==4"
json_check nifti-sform "$seeds/seed_f32_sform.nii" \
  "j['affine_source']=='sform' and j['affine'][0]==[2,0,0,10] and j['affine'][2]==[0,0,4,30] and j['min']==-1.25"
json_check nifti-qform "$seeds/seed_i32_labels_4d.nii" \
  "j['affine_source']=='qform' and j['tensor_shape']==[1,2,1,2] and j['integer_valued'] and j['distinct_values']==4"
json_check nifti2-be "$seeds/seed_nifti2_be_i16.nii" "j['format']=='nifti2' and j['byte_order']=='big' and j['sum']==2"
json_check nifti-gz "$seeds/seed_u8_gzip.nii.gz" "j['compressed'] and j['sum']==28"
check nifti-text 0 "applied: value = 0.5 \* raw + 10" "$bin" inspect "$seeds/seed_i16_scaled.nii"
check nifti-text-affine 0 "from the sform" "$bin" inspect "$seeds/seed_f32_sform.nii"
# IDX and safetensors
printf '\0\0\x08\x02\0\0\0\x02\0\0\0\x03\x01\x02\x03\x04\x05\x06' > "$tmp/u8.idx"
json_check idx "$tmp/u8.idx" "j['format']=='idx' and j['shape']==[2,3] and j['dtype_on_disk']=='uint8' and j['sum']==21 \
  and j['affine'] is None"
json_check safetensors "$src/tests/fixtures/mse_loss.safetensors" \
  "j['format']=='safetensors' and {t['name'] for t in j['tensors']}=={'x','target','y','grad_x','grad_y'} \
   and [t['shape'] for t in j['tensors'] if t['name']=='x']==[[3,4]] and all(t['dtype']=='F32' for t in j['tensors'])"
check safetensors-text 0 "grad_x .*F32 .*\[3, 4\]" "$bin" inspect "$src/tests/fixtures/mse_loss.safetensors"
# refusals: the library's error, exit 1; usage errors exit 2
head -c 300 "$seeds/seed_u8_2x2x2.nii" > "$tmp/short.nii"
check truncated 1 "truncated inside its header: expected 348 header bytes but the file has 300" "$bin" inspect "$tmp/short.nii"
gzip -c "$seeds/seed_f32_sform.nii" | head -c 60 > "$tmp/cut.nii.gz"
check truncated-gz 1 "truncated" "$bin" inspect --json "$tmp/cut.nii.gz"
python3 - "$seeds/seed_u8_2x2x2.nii" "$tmp/rgb.nii" <<'PY'
import sys, struct
b = bytearray(open(sys.argv[1], 'rb').read())
struct.pack_into('<hh', b, 70, 128, 24)   # datatype RGB24, bitpix 24
open(sys.argv[2], 'wb').write(bytes(b) + bytes(16))
PY
check rgb 1 "datatype RGB24 (code 128), which revtorch does not read" "$bin" inspect "$tmp/rgb.nii"
echo "hello" > "$tmp/text.txt"
check unknown-format 1 "not a file revtorch reads" "$bin" inspect "$tmp/text.txt"
check missing 1 "cannot open /nonexistent.nii: No such file" "$bin" inspect /nonexistent.nii
check no-file 2 "which file" "$bin" inspect
check two-files 2 "one FILE at a time" "$bin" inspect a b
check bad-option 2 "unknown option '--xml'" "$bin" inspect --xml x
check help 0 "safetensors" "$bin" inspect --help
check main-help 0 "inspect" "$bin" --help
# real brains (Debian's mricron-data)
T=/usr/share/mricron/templates
skip=0
if [ -f "$T/ch2.nii.gz" ] && [ -f "$T/aal.nii.gz" ]; then
    json_check ch2 "$T/ch2.nii.gz" \
      "j['shape']==[181,217,181] and j['tensor_shape']==[1,181,217,181] and j['dtype_on_disk']=='uint8' \
       and j['affine_source']=='sform' and j['count']==181*217*181 and 0<=j['min']<j['max']<=255"
    # the AAL atlas: integer labels 0..116 (background and 116 regions)
    json_check aal "$T/aal.nii.gz" \
      "j['shape']==[181,217,181] and j['integer_valued'] and j['min']==0 and j['max']==116 \
       and j['distinct_values']==117"
else
    skip=1
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || exit 1
[ "$skip" -eq 0 ] || { echo "mricron-data not installed: brain templates skipped"; exit 77; }
exit 0
