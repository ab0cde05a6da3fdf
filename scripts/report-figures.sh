#!/usr/bin/env bash
# The HTML report's figures: for tree_summarize over 40, 1,000 and 10,000 chunks of the
# bench corpus (a model that answers at once), the page's size, the time to build it, and
# the time headless Chromium takes to load and lay it out (`--dump-dom`, best of 3).
# Usage: scripts/report-figures.sh [CORPUS.json] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-/work/shared/bench/corpus_n10000_s42.json}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
cargo build --release -q -p synthkit-report --example report_figures
bin=target/release/examples/report_figures
# Best of 3 wall times of `chromium --dump-dom` on a page.
open_ms() {
  local best="" start ms
  for _ in 1 2 3; do
    start=$(date +%s%N)
    timeout 300 chromium --headless --no-sandbox --disable-gpu --no-first-run \
      --user-data-dir="$out/profile" --dump-dom "file://$(realpath "$1")" >/dev/null 2>&1
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [[ -z $best || $ms -lt $best ]]; then best=$ms; fi
  done
  echo "$best"
}
echo '<!doctype html><title>empty</title>' > "$out/empty.html"
echo "{\"empty_page_chromium_dump_dom_ms\": $(open_ms "$out/empty.html")}"
for n in 40 1000 10000; do
  page="$out/tree_$n.html"
  line=$("$bin" "$corpus" "$n" "$page")
  echo "${line%\}}, \"chromium_dump_dom_ms\": $(open_ms "$page")}"
done
