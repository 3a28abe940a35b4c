#!/usr/bin/env bash
# Pilot runs for issue 23 (Anil): sync SGD's critical batch on the embedded LM. Seeds >= 100 (the
# committed runs use 0-4). Each line: batch per rank, LR, steps, seed[, base: lm (default) or img
# [, train.precision: fp32 (default) or bf16, which names the run _bf16]]. Run dirs go to $1.
# Usage: nice -n 10 replications/anil2018/pilots/run_pilots.sh OUTDIR < list
set -euo pipefail
out=$1; here=$(cd "$(dirname "$0")" && pwd)
while read -r batch lr steps seed base precision; do
  [ -z "$batch" ] && continue
  base=${base:-lm}; prefix=$([ "$base" = lm ] && echo "" || echo "${base}_")
  precision=${precision:-fp32}; suffix=$([ "$precision" = fp32 ] && echo "" || echo "_${precision}")
  d="$out/${prefix}b${batch}_lr${lr}_s${seed}${suffix}"
  [ -f "$d/summary.json" ] && continue
  codist run "$here/${base}_pilot_base.yaml" --out "$d" --set train.batch_per_rank=$batch \
    --set optimizer.lr=$lr --set train.steps=$steps --set seed=$seed --set train.precision=$precision </dev/null >/dev/null
done
