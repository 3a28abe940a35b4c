#!/bin/bash
# usage: lane.sh LR SEED...
cd /work/main
lr=$1; shift
for s in "$@"; do
  d=/work/res-sun/p5/p5_lr${lr}_s${s}
  echo "$(date -u +%FT%TZ) start $d load $(cut -d' ' -f1-3 /proc/loadavg)" >> /work/res-sun/p5/log.txt
  PATH=/work/main/.venv/bin:$PATH nice -n 10 .venv/bin/codist run replications/sun2016/pilots/pilot_c100_single.yaml --set optimizer.lr=$lr --set seed=$s --out $d > $d.log 2>&1
  echo "$(date -u +%FT%TZ) end $d rc $? load $(cut -d' ' -f1-3 /proc/loadavg)" >> /work/res-sun/p5/log.txt
done
