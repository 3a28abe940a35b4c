#!/usr/bin/env bash
# Runs run_regime.sh's lines at most 2 processes at a time: a codistillation line (cd, cdr: 2 ranks)
# alone, two all-reduce lines (1 rank each) side by side. Usage: queue_regime.sh OUTDIR < list
set -uo pipefail
out=$1; here=$(cd "$(dirname "$0")" && pwd); pending=()
flush() { for l in "${pending[@]}"; do echo "$l" | "$here/run_regime.sh" "$out" & done; wait; pending=(); }
while read -r line; do
  [ -z "$line" ] && continue
  case $line in
    ar*) pending+=("$line"); [ ${#pending[@]} -eq 2 ] && flush ;;
    *) flush; echo "$line" | "$here/run_regime.sh" "$out" ;;
  esac
done
flush
