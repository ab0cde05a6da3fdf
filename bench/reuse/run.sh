#!/usr/bin/env bash
# What a server reuses of a batch's prompts: restart llama-server with a real model (empty
# slots), run `synthkit batch` over the 20 questions of questions.jsonl (each a `paths` line
# over DIR), and print the calls, prompt tokens, cached tokens and wall time.
#
#   bench/reuse/run.sh DIR [OUT]     DIR: a folder the questions are about (the figures in
#                                    bench/RESULTS.md section 7 used the regex 1.13.1 crate's
#                                    folder from ~/.cargo/registry/src); OUT default
#                                    /tmp/synthkit-reuse.jsonl
#
# Environment: SYNTHKIT (default target/debug/synthkit), MODEL (default qwen05, fetched by
# scripts/fetch-model.sh), PORT (default 18200), JOBS (default 2; the server gets as many
# slots), EXTRA (more batch flags, split on whitespace).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir=${1:?usage: bench/reuse/run.sh DIR [OUT]}
out=${2:-/tmp/synthkit-reuse.jsonl}
bin=${SYNTHKIT:-$repo/target/debug/synthkit}
port=${PORT:-18200}
jobs=${JOBS:-2}
model=$(bash "$repo/scripts/fetch-model.sh" "${MODEL:-qwen05}")
read -r base pid < <(LLAMA_MODEL=$model LLAMA_SERVER_ARGS="-np $jobs -t 2" \
  bash "$repo/scripts/llama-server.sh" "$port" $((4096 * jobs)))
trap 'kill "$pid" 2>/dev/null || true' EXIT
rm -f "$out"
start=$(date +%s.%N)
# shellcheck disable=SC2086
"$bin" batch "$repo/bench/reuse/questions.jsonl" -o "$out" --paths-root "$dir" \
  --base-url "$base" --jobs "$jobs" --quiet ${EXTRA:-}
end=$(date +%s.%N)
python3 - "$out" "$start" "$end" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
usage = [r.get("response", {}).get("usage", {}) for r in rows]
prompt = sum(u.get("prompt_tokens", 0) for u in usage)
cached = sum(u.get("cached_prompt_tokens", 0) for u in usage)
calls = sum(u.get("calls", 0) for u in usage)
errors = sum(1 for r in rows if "error" in r)
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"rows {len(rows)}, errors {errors}, calls {calls}, prompt tokens {prompt}, "
      f"cached {cached} ({100 * cached / max(prompt, 1):.1f} %), read {prompt - cached}, "
      f"wall {wall:.0f} s")
PY
