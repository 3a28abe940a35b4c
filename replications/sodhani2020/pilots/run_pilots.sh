#!/usr/bin/env bash
# Pilot runs for issue 23 (Sodhani): the fig1 all-reduce at several weight decays. Seeds >= 100 (the
# committed runs use 0-2). Each line: weight decay, seed. Run dirs go to $1.
# Usage: nice -n 10 replications/sodhani2020/pilots/run_pilots.sh OUTDIR < list
set -euo pipefail
out=$1; here=$(cd "$(dirname "$0")" && pwd)
while read -r wd seed; do
  [ -z "$wd" ] && continue
  d="$out/wd${wd}_s${seed}"
  [ -f "$d/summary.json" ] && continue
  codist run "$here/l2_base.yaml" --out "$d" --set optimizer.weight_decay=$wd --set seed=$seed </dev/null >/dev/null
done
