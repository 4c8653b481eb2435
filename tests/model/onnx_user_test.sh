#!/usr/bin/env bash
# serf model import on models a user might export (scripts/onnx_user_models.py, made at test
# time: opsets, control flow, pooling and padding corners, grouped convs, Gemm forms, shapes,
# softmax heads, clips, activations, PRelu, GELU, Upsample / Resize, types, outputs ...): each
# either imports and runs like PyTorch (max relative error <= 1e-4, top-5 equal; unpartitioned and
# over K = 2, each at batch 1 and 3, every row of the batch compared) or is refused with one line
# naming the node and what is unsupported, exit 2, nothing written.
#   onnx_user_test.sh SERF ROOT [BATCH]   BATCH 1 (default): the batch-1 runs and the refusals;
#                                         3: the batch-3 runs (CTest onnx_user_models_b3; two
#                                         tests halve each one's time under a loaded machine)
#   onnx_user_test.sh SERF ROOT 1 --each  each hand-written building block alone at opsets 11, 13
#                                         and 17, batch 1 and 3 (CTest onnx_user_blocks_each, slow)
# The models: $ONNX_MODELS/user when set (CTest's fixture onnx_models; not for --each), else
# made here. Exit 77 (CTest skip) without python3-torch / python3-onnx.
set -uo pipefail
serf="$1"; root="$2"; batch="${3:-1}"; each="${4:-}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$root/tests/model/onnx_checks.sh"
if [ -n "$each" ]; then
  ONNX_MODELS="" make_models user "$root/scripts/onnx_user_models.py" --each || exit $?
else
  make_models user "$root/scripts/onnx_user_models.py" || exit $?
fi
fail=0
while read -r model; do
  if [ -n "$each" ]; then
    check_good "$model" "--threads 1" "--threads 2 --inter-sim 2" "--threads 1 --batch 3" \
      "--threads 2 --inter-sim 2 --batch 3"
  else
    check_good "$model" "--threads 1 --batch $batch" "--threads 2 --inter-sim 2 --batch $batch"
  fi
done < "$tmp/user_good.txt"
compare_all
if [ -n "$each" ]; then
  [ $fail = 0 ] && echo "ok: $(wc -l < "$tmp/user_good.txt") building blocks run like PyTorch"
elif [ "$batch" = 1 ]; then
  check_bad "$tmp/user_bad.tsv"
  [ $fail = 0 ] && echo "ok: $(wc -l < "$tmp/user_good.txt") models run like PyTorch, $(wc -l < "$tmp/user_bad.tsv") refused"
else
  [ $fail = 0 ] && echo "ok: $(wc -l < "$tmp/user_good.txt") models run like PyTorch at batch $batch"
fi
exit $fail
