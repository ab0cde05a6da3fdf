#!/usr/bin/env bash
# The whole answer-quality comparison for one model: make the cases (once), start
# llama-server with the model, run synthkit's modes and the reference (llama-index-core
# 0.14.25) on the same cases with the same context window and output budget, and score both
# with `synthkit eval` (one code path).
#
#   bench/quality/run.sh MODEL [options]
#
#   MODEL                a GGUF path, or smollm2 | qwen05 | qwen15 (fetched into the
#                        llama-server cache by scripts/fetch-model.sh)
#   --ctx N              the context window for the server and both systems (default 4096)
#   --server-ctx N       the server's whole context (default: --ctx; with -np 2 in
#                        LLAMA_SERVER_ARGS give twice --ctx, as each slot gets its share)
#   --num-output N       the output budget per model call, both systems (default 256)
#   --temperature T      the sampling temperature, both systems (default 0: greedy, so a
#                        rerun gives the same answers and the noise is the cases')
#   --modes a,b,...      (default compact,refine,tree_summarize)
#   --subset             the quick-loop subset (CASES-subset.jsonl) instead of all cases
#   --cases FILE         another cases file
#   --port N             the llama-server port (default 18123)
#   --out DIR            results (default ~/.cache/synthkit-quality/runs/MODEL-ctxN[-subset])
#   --skip-synthkit | --skip-reference
#   --use-async          the reference's fan-out modes (tree_summarize, accumulate) with
#                        use_async=True
#   -h, --help
#
# Background-friendly and resumable: `nohup bench/quality/run.sh qwen15 --subset &` logs to
# OUT/run.log; a second start with the same OUT waits for the first (a lock); the reference
# skips the (case, mode) pairs it already wrote, and synthkit's step is skipped once it has
# completed (OUT/.synthkit-done). Kill it with `kill PID`: the step it is running and the
# server it started go too.
#
# Environment:
#   SYNTHKIT               the synthkit binary (default: `synthkit` on PATH, else
#                          `cargo run --release -p synthkit-cli --`)
#   SYNTHKIT_QUALITY_VENV  the reference's virtual environment (default
#                          ~/.cache/synthkit-quality-venv; created with llama-index-core==0.14.25
#                          and llama-index-llms-openai-like if needed)
#   QUALITY_DIR            where the cases live (default ~/.cache/synthkit-quality)
#   SYNTHKIT_EVAL_ARGS     extra arguments for synthkit's eval, split on whitespace (for
#                          instance `--evidence on --on-unsupported abstain`)
#   LLAMA_SERVER_ARGS      extra llama-server arguments (default `-np 1`: one slot with the
#                          whole window, as requests run one at a time)
#
# Each step's wall time and the prompt tokens the server actually read for it (its
# `llamacpp:prompt_tokens_total` counter before and after: cached tokens are not read) go
# to OUT/server.tsv (the server is started with --metrics).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$REPO/bench/quality"
QDIR="${QUALITY_DIR:-$HOME/.cache/synthkit-quality}"
VENV="${SYNTHKIT_QUALITY_VENV:-$HOME/.cache/synthkit-quality-venv}"
LLAMA_INDEX_VERSION="0.14.25"

MODEL=""
CTX=4096
SERVER_CTX=""
NUM_OUTPUT=256
TEMPERATURE=0
MODES="compact,refine,tree_summarize"
SUBSET=0
CASES=""
PORT=18123
OUT=""
SKIP_SK=0
SKIP_REF=0
USE_ASYNC=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --ctx) CTX="$2"; shift 2 ;;
        --server-ctx) SERVER_CTX="$2"; shift 2 ;;
        --num-output) NUM_OUTPUT="$2"; shift 2 ;;
        --temperature) TEMPERATURE="$2"; shift 2 ;;
        --modes) MODES="$2"; shift 2 ;;
        --subset) SUBSET=1; shift ;;
        --cases) CASES="$2"; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --skip-synthkit) SKIP_SK=1; shift ;;
        --skip-reference) SKIP_REF=1; shift ;;
        --use-async) USE_ASYNC=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) MODEL="$1"; shift ;;
    esac
done
[[ -n $MODEL ]] || { echo "run.sh: name a model (a GGUF path, smollm2, qwen05 or qwen15); see --help" >&2; exit 2; }

# --- the model file ---------------------------------------------------------------------
case "$MODEL" in
    smollm2) MODEL_PATH=$(bash "$REPO/scripts/fetch-smollm2.sh") ;;
    qwen05|qwen15) MODEL_PATH=$(bash "$REPO/scripts/fetch-model.sh" "$MODEL") ;;
    *) MODEL_PATH="$MODEL" ;;
esac
[[ -f $MODEL_PATH ]] || { echo "run.sh: no model file at $MODEL_PATH" >&2; exit 2; }
MODEL_NAME=$(basename "$MODEL_PATH" .gguf)

# --- the cases ----------------------------------------------------------------------------
if [[ -z $CASES ]]; then
    if [[ ! -f $QDIR/CASES.jsonl ]]; then
        python3 "$HERE/make_cases.py" --out-dir "$QDIR" >&2
    fi
    CASES="$QDIR/CASES.jsonl"
    [[ $SUBSET == 1 ]] && CASES="$QDIR/CASES-subset.jsonl"
fi
[[ -f $CASES ]] || { echo "run.sh: no cases at $CASES" >&2; exit 2; }

if [[ -z $OUT ]]; then
    OUT="$QDIR/runs/$MODEL_NAME-ctx$CTX"
    [[ $SUBSET == 1 ]] && OUT="$OUT-subset"
fi
mkdir -p "$OUT"
exec 7>"$OUT/.lock"
if command -v flock >/dev/null 2>&1; then flock 7; fi
exec > >(tee -a "$OUT/run.log") 2>&1
echo "run.sh: $(date -u +%FT%TZ) model $MODEL_PATH, ctx $CTX, num-output $NUM_OUTPUT, modes $MODES, cases $CASES -> $OUT"

# --- the reference's environment -------------------------------------------------------------
case "$VENV" in
    "$REPO"|"$REPO"/*) echo "run.sh: put the venv outside the repo (SYNTHKIT_QUALITY_VENV=$VENV)" >&2; exit 2 ;;
esac
if [[ $SKIP_REF == 0 ]]; then
    # shellcheck source=../../scripts/venv-lib.sh
    source "$REPO/scripts/venv-lib.sh"
    ensure_venv run.sh "$VENV" "${PYTHON:-python3}" "llama-index-core==$LLAMA_INDEX_VERSION" \
        "llama-index-llms-openai-like"
fi

# --- the server ---------------------------------------------------------------------------------
export LLAMA_SERVER_ARGS="${LLAMA_SERVER_ARGS:--np 1} --metrics"
read -r BASE_URL SERVER_PID < <(LLAMA_MODEL="$MODEL_PATH" LLAMA_WATCH_PID=$$ \
    bash "$REPO/scripts/llama-server.sh" "$PORT" "${SERVER_CTX:-$CTX}")
[[ -n ${SERVER_PID:-} ]] || { echo "run.sh: llama-server did not start (see above)" >&2; exit 1; }
# A kill of this script ends what it started: the step running now and the server. Steps
# run in the background and are waited for, so a TERM is handled at once (bash defers its
# traps while a foreground child runs).
CHILD=""
on_exit() {
    [[ -n $CHILD ]] && kill "$CHILD" 2>/dev/null
    kill "$SERVER_PID" 2>/dev/null || true
}
trap on_exit EXIT
trap 'exit 143' TERM INT HUP
step() {
    local rc=0
    "$@" &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=""
    return "$rc"
}
echo "run.sh: llama-server $BASE_URL (pid $SERVER_PID)"
# The prompt tokens the server has read so far (empty when it does not say).
server_reads() {
    curl -s --max-time 5 "${BASE_URL%/v1}/metrics" 2>/dev/null \
        | awk '$1 == "llamacpp:prompt_tokens_total" { printf "%d", $2 }'
}
# Runs a step and writes its name, wall seconds and prompt tokens read to OUT/server.tsv.
measured() {
    local name=$1 rc=0 before after start
    shift
    before=$(server_reads)
    start=$(date +%s.%N)
    step "$@" || rc=$?
    after=$(server_reads)
    printf '%s\t%.1f\t%s\n' "$name" "$(echo "$(date +%s.%N) - $start" | bc)" \
        "$(( ${after:-0} - ${before:-0} ))" >> "$OUT/server.tsv"
    return "$rc"
}

# --- synthkit -------------------------------------------------------------------------------------
if [[ -n ${SYNTHKIT:-} ]]; then
    read -r -a SK <<< "$SYNTHKIT"
elif command -v synthkit >/dev/null 2>&1; then
    SK=(synthkit)
else
    SK=(cargo run --quiet --release --manifest-path "$REPO/Cargo.toml" -p synthkit-cli --)
fi
MODEL_ARGS=(--base-url "$BASE_URL" --context-window "$CTX" --num-output "$NUM_OUTPUT"
    --temperature "$TEMPERATURE")
if [[ $SKIP_SK == 0 && ! -f $OUT/.synthkit-done ]]; then
    echo "run.sh: synthkit eval ($MODES)"
    read -r -a EXTRA <<< "${SYNTHKIT_EVAL_ARGS:-}"
    measured synthkit "${SK[@]}" eval "$CASES" --modes "$MODES" "${MODEL_ARGS[@]}" "${EXTRA[@]}" -o "$OUT/synthkit.jsonl" \
        > >(tee "$OUT/synthkit-score.md")
    touch "$OUT/.synthkit-done"
fi

# --- the reference -------------------------------------------------------------------------------
if [[ $SKIP_REF == 0 ]]; then
    echo "run.sh: reference (llama-index-core $LLAMA_INDEX_VERSION)"
    ASYNC=()
    [[ $USE_ASYNC == 1 ]] && ASYNC=(--use-async)
    measured reference "$VENV/bin/python" "$HERE/reference_answers.py" "$CASES" --base-url "$BASE_URL" \
        --context-window "$CTX" --num-output "$NUM_OUTPUT" --temperature "$TEMPERATURE" \
        --modes "$MODES" "${ASYNC[@]}" -o "$OUT/reference.jsonl"
fi

# --- both side by side ---------------------------------------------------------------------------
# One table (and page) of every system's rows, with each correct rate's interval and the
# paired comparisons: synthkit's rows are copied and the reference's answers scored into
# the copy by the same code.
if [[ -f $OUT/reference.jsonl ]]; then
    echo "run.sh: scoring side by side"
    cp "$OUT/synthkit.jsonl" "$OUT/all.jsonl" 2>/dev/null || : > "$OUT/all.jsonl"
    step "${SK[@]}" eval "$CASES" -o "$OUT/all.jsonl" --answers "$OUT/reference.jsonl" --html "$OUT/eval.html" \
        > >(tee "$OUT/score.md") \
        || echo "run.sh: scoring failed; score later with: synthkit eval $CASES -o $OUT/all.jsonl --answers $OUT/reference.jsonl" >&2
fi
echo "run.sh: $(date -u +%FT%TZ) done; results in $OUT"
