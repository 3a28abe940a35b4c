#!/usr/bin/env bash
# Pilot runs for issue 37 (Sodhani): a stand-in in Fig. 1's regime and the paired sd of its arms.
# Seeds >= 100 (the committed runs use 0-5). Each line of stdin:
#   ARM TRAIN_SIZE EPOCHS WEIGHT_DECAY WIDTH SEED [LR]
# ARM: ar (all-reduce, 1 rank x 64), cd (codistillation out of the box, 2 models x 1 rank x 32, lr 0.05,
# KL alpha 1, checkpoint every ~1.1% of the run, each model its own order: experiments.yaml x-cd), or
# cdr (cd with reduced L2: experiments.yaml x-cdr's decays at 18/38/44 of 45 codistillation epochs, L2
# x0.1 after the first, 0 after the second). The all-reduce's updates are EPOCHS x TRAIN_SIZE / 64; every
# arm runs the same updates (device-matched: codistillation sees half the epochs), its schedule scaled
# to them (warmup 5/90, decays at 30/60/80 of 90; 10 evaluations, the last interval after the last decay).
# LR (issue 48, the fig7b premise's sweep): the arm's base LR instead of its default (ar 0.1 at batch
# 64; cd, cdr 0.05 at batch 32); the run dir then ends in _lr<LR>.
# Run dirs go to $1/<arm>_n<size>_e<epochs>_wd<wd>_w<width>_s<seed>[_lr<LR>].
# Usage: nice -n 10 replications/sodhani2020/pilots/run_regime.sh OUTDIR < list
set -euo pipefail
out=$1; here=$(cd "$(dirname "$0")" && pwd)
while read -r arm n ep wd width seed lr; do
  [ -z "$arm" ] && continue
  d="$out/${arm}_n${n}_e${ep}_wd${wd}_w${width}_s${seed}${lr:+_lr$lr}"
  [ -f "$d/summary.json" ] && continue
  steps=$(( ep * n / 64 )); steps=$(( (steps + 9) / 10 * 10 ))
  warm=$(( steps * 5 / 90 )); m1=$(( steps * 30 / 90 )); m2=$(( steps * 60 / 90 )); m3=$(( steps * 80 / 90 ))
  k=$(( steps * 2500 / 225180 ))
  common=(--set workload.train_size=$n --set workload.width=$width --set optimizer.weight_decay=$wd
          --set seed=$seed --set train.steps=$steps --set train.eval_every=$(( steps / 10 ))
          --set schedule.warmup_steps=$warm --set "schedule.milestones=[$m1,$m2,$m3]")
  cd=(--set algorithm.name=codistill --set algorithm.loss=kl --set algorithm.alpha=1.0 --set algorithm.burn_in=0
      --set algorithm.exchange_every=$k --set algorithm.data=shuffled --set parallel.world_size=2
      --set parallel.models=2 --set train.batch_per_rank=32 --set optimizer.lr=0.05)
  case $arm in
    ar) extra=() ;;
    cd) extra=("${cd[@]}") ;;
    cdr) r1=$(( steps * 18 / 45 )); r2=$(( steps * 38 / 45 )); r3=$(( steps * 44 / 45 ))
         wd1=$(python -c "print($wd/10)")
         extra=("${cd[@]}" --set "schedule.milestones=[$r1,$r2,$r3]"
                --set "schedule.weight_decay_changes={$r1: $wd1, $r2: 0.0}") ;;
    *) echo "run_regime.sh: unknown arm $arm (ar, cd, cdr)" >&2; exit 2 ;;
  esac
  [ -n "$lr" ] && extra+=(--set optimizer.lr=$lr)
  s=$(date +%s); l=$(cut -d' ' -f1 /proc/loadavg)
  codist run "$here/regime_base.yaml" --out "$d" "${common[@]}" "${extra[@]}" </dev/null >"$d.log" 2>&1 || { echo "failed: $d (see $d.log)" >&2; continue; }
  echo "$(basename "$d") wall_s=$(( $(date +%s) - s )) load_start=$l load_end=$(cut -d' ' -f1 /proc/loadavg)" >> "$out/timings.txt"
done
