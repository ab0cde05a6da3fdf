#!/usr/bin/env bash
# Wall time of one mode against the reference in alternating pairs (issue 45): N rounds of
# run.sh, each system on a freshly started server (nothing in its cache from the other),
# synthkit first in odd rounds and the reference first in even ones, so that a machine
# getting busier or quieter over the run weighs on both alike. Prints one line per run and
# each system's median and spread.
#
#   bench/quality/pairs.sh MODEL MODE N [run.sh options...]
#
#   MODEL, and the run.sh options (--cases, --ctx, --server-ctx, --use-async, --port, ...):
#   as for run.sh; its --modes and --out are set here. Results go to
#   $QUALITY_DIR/runs/pairs-MODE-STAMP/{synthkit,reference}-ROUND (OUT=... to choose).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model=${1:?usage: pairs.sh MODEL MODE N [run.sh options]}
mode=${2:?usage: pairs.sh MODEL MODE N [run.sh options]}
rounds=${3:?usage: pairs.sh MODEL MODE N [run.sh options]}
shift 3
out=${OUT:-${QUALITY_DIR:-$HOME/.cache/synthkit-quality}/runs/pairs-$mode-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

one() { # one SYSTEM ROUND
  local skip=--skip-reference
  [ "$1" = reference ] && skip=--skip-synthkit
  bash "$here/run.sh" "$model" --modes "$mode" "$skip" --out "$out/$1-$2" "${rest[@]}" >/dev/null
  # run.sh's server.tsv: step, wall seconds, prompt tokens the server read.
  awk -v s="$1" -v r="$2" '$1 == s { printf "%s\t%d\t%.1f\t%d\n", s, r, $2, $3 }' "$out/$1-$2/server.tsv" |
    tee -a "$out/pairs.tsv"
}
rest=("$@")
printf 'system\tround\twall s\tread by the server\n'
for ((i = 1; i <= rounds; i++)); do
  if ((i % 2)); then
    one synthkit "$i"
    one reference "$i"
  else
    one reference "$i"
    one synthkit "$i"
  fi
done
python3 - "$out/pairs.tsv" <<'PY'
import statistics, sys
walls = {}
for line in open(sys.argv[1]):
    system, _, wall, _ = line.rstrip("\n").split("\t")
    walls.setdefault(system, []).append(float(wall))
for system, w in walls.items():
    print(f"{system}: median {statistics.median(w):.1f} s, min {min(w):.1f}, max {max(w):.1f} over {len(w)} runs")
if len(walls) == 2:
    ratio = statistics.median(walls["synthkit"]) / statistics.median(walls["reference"])
    print(f"synthkit / reference (medians): {ratio:.2f}x")
PY
