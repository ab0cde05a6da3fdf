#!/usr/bin/env bash
# What a server reuses of a batch's prompts, and the same questions through LlamaIndex:
# start llama-server with a real model (empty slots, --metrics), run `synthkit batch` over
# the 20 questions of questions.jsonl (each a `paths` line over DIR) and print its calls,
# prompt tokens sent, cached tokens, tokens the server read and wall time. With
# REFERENCE=1, restart the server (empty again) and answer the same 20 questions with
# llama-index-core 0.14.25's compact synthesizer over the very nodes synthkit's batch
# retrieved for each (its rows' `source_nodes`), with the same window and output budget,
# and print the same row for it.
#
#   bench/reuse/run.sh DIR [OUT]     DIR: a folder the questions are about (the figures in
#                                    bench/RESULTS.md sections 7 and 9 used the regex 1.13.1
#                                    crate's folder from ~/.cargo/registry/src); OUT: a
#                                    folder for the rows (default /tmp/synthkit-reuse)
#
# Environment: SYNTHKIT (default target/debug/synthkit), MODEL (default qwen05, fetched by
# scripts/fetch-model.sh), PORT (default 18200), JOBS (synthkit's --jobs, default 2),
# SLOTS (the server's slots, default 2; each gets CTX), CTX (a slot's window and both
# systems' --context-window, default 4096), NUM_OUTPUT (default 256), EXTRA (more batch
# flags, split on whitespace), REFERENCE (1: also LlamaIndex), SYNTHKIT_QUALITY_VENV (the
# reference's venv, default ~/.cache/synthkit-quality-venv, made by bench/quality/run.sh's
# rules when missing). Both systems sample at temperature 0.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir=${1:?usage: bench/reuse/run.sh DIR [OUT]}
out=${2:-/tmp/synthkit-reuse}
bin=${SYNTHKIT:-$repo/target/debug/synthkit}
port=${PORT:-18200}
jobs=${JOBS:-2}
slots=${SLOTS:-2}
ctx=${CTX:-4096}
num_output=${NUM_OUTPUT:-256}
venv=${SYNTHKIT_QUALITY_VENV:-$HOME/.cache/synthkit-quality-venv}
model=$(bash "$repo/scripts/fetch-model.sh" "${MODEL:-qwen05}")
mkdir -p "$out"

pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true' EXIT
# start_server: a fresh llama-server (nothing cached), its URL in $base.
start_server() {
  [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  read -r base pid < <(LLAMA_MODEL=$model LLAMA_SERVER_ARGS="-np $slots -t 2 --metrics" \
    bash "$repo/scripts/llama-server.sh" "$port" $((ctx * slots)))
  [ -n "${pid:-}" ] || { echo "run.sh: llama-server did not start" >&2; exit 1; }
}
# server_reads: the prompt tokens the server has read so far (cached ones are not read).
server_reads() {
  curl -s --max-time 5 "${base%/v1}/metrics" | awk '$1 == "llamacpp:prompt_tokens_total" { printf "%d", $2 }'
}

start_server
rows="$out/synthkit.jsonl"
rm -f "$rows"
before=$(server_reads)
start=$(date +%s.%N)
# shellcheck disable=SC2086
"$bin" batch "$repo/bench/reuse/questions.jsonl" -o "$rows" --paths-root "$dir" \
  --base-url "$base" --context-window "$ctx" --num-output "$num_output" --temperature 0 \
  --jobs "$jobs" --quiet ${EXTRA:-}
end=$(date +%s.%N)
read_sk=$(($(server_reads) - before))
python3 - "$rows" "$start" "$end" "$read_sk" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
usage = [r.get("response", {}).get("usage", {}) for r in rows]
prompt = sum(u.get("prompt_tokens", 0) for u in usage)
cached = sum(u.get("cached_prompt_tokens", 0) for u in usage)
calls = sum(u.get("calls", 0) for u in usage)
errors = sum(1 for r in rows if "error" in r)
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"synthkit: rows {len(rows)}, errors {errors}, calls {calls}, prompt tokens {prompt}, "
      f"cached {cached} ({100 * cached / max(prompt, 1):.1f} %), read by the server {sys.argv[4]}, "
      f"wall {wall:.0f} s")
PY

[ "${REFERENCE:-0}" = 1 ] || exit 0
# shellcheck source=../../scripts/venv-lib.sh
source "$repo/scripts/venv-lib.sh"
ensure_venv run.sh "$venv" "${PYTHON:-python3}" "llama-index-core==0.14.25" "llama-index-llms-openai-like"
cases="$out/cases.jsonl"
python3 - "$repo/bench/reuse/questions.jsonl" "$rows" "$cases" <<'PY'
import json, sys
questions = {q["id"]: q["query"] for q in map(json.loads, open(sys.argv[1]))}
with open(sys.argv[3], "w") as f:
    for row in map(json.loads, open(sys.argv[2])):
        nodes = [{"id": n["id"], "text": n["text"]} for n in row["response"]["source_nodes"]]
        f.write(json.dumps({"id": str(row["id"]), "query": questions[row["id"]], "nodes": nodes}) + "\n")
PY
start_server
answers="$out/reference.jsonl"
rm -f "$answers"
before=$(server_reads)
start=$(date +%s.%N)
"$venv/bin/python" "$repo/bench/quality/reference_answers.py" "$cases" --base-url "$base" \
  --context-window "$ctx" --num-output "$num_output" --temperature 0 --modes compact -o "$answers"
end=$(date +%s.%N)
read_ref=$(($(server_reads) - before))
python3 - "$answers" "$start" "$end" "$read_ref" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
prompt = sum(r.get("prompt_tokens") or 0 for r in rows)
calls = sum(r.get("calls") or 0 for r in rows)
errors = sum(1 for r in rows if r.get("error"))
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"LlamaIndex compact: rows {len(rows)}, errors {errors}, calls {calls}, prompt tokens {prompt}, "
      f"read by the server {sys.argv[4]}, wall {wall:.0f} s")
PY
