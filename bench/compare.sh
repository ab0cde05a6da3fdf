#!/usr/bin/env bash
# Runs the synthkit benchmark workload on the reference implementation (llama-index-core,
# in a Python virtual environment outside the repo) and on synthkit, and prints one
# Markdown table comparing them, one row per mode.
#
# Usage: bench/compare.sh [CORPUS] [options]
#   CORPUS               a JSON array of chunk texts
#                        (default: ../shared/bench/corpus_n1000_s42.json from the repo root)
#   --corpus FILE        same as CORPUS
#   --modes a,b,...      response modes (default: all nine)
#   --repeat N           timed runs per mode after one warm-up (default 3; use 1 for N=10000)
#   --latency-ms MS      every model call sleeps MS ms; the reference then runs with
#                        use_async=True (unbounded) and synthkit with --concurrency unlimited
#   --split              also compare the token splitter and tokenizer throughput
#   --out DIR            keep the raw JSON lines in DIR (default: a temporary directory)
#   -h, --help           this help
#
# Environment:
#   SYNTHKIT_BENCH_VENV  the virtual environment (default $HOME/.cache/synthkit-bench-venv);
#                        created, and llama-index-core==0.14.25 + tiktoken installed, if needed
#   PYTHON               the interpreter that creates the venv (default python3; 3.11 matches
#                        the reference figures in shared/bench/README.md)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SYNTHKIT_BENCH_VENV:-$HOME/.cache/synthkit-bench-venv}"
PYTHON="${PYTHON:-python3}"
LLAMA_INDEX_VERSION="0.14.25"
ALL_MODES="refine,compact,tree_summarize,simple_summarize,accumulate,compact_accumulate,generation,no_text,context_only"

CORPUS="$REPO/../shared/bench/corpus_n1000_s42.json"
MODES="$ALL_MODES"
REPEAT=3
LATENCY_MS=0
SPLIT=0
OUT=""

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --corpus) CORPUS="$2"; shift 2 ;;
        --modes) MODES="$2"; shift 2 ;;
        --repeat) REPEAT="$2"; shift 2 ;;
        --latency-ms) LATENCY_MS="$2"; shift 2 ;;
        --split) SPLIT=1; shift ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) CORPUS="$1"; shift ;;
    esac
done

if [[ ! -f "$CORPUS" ]]; then
    echo "compare.sh: no corpus at $CORPUS" >&2
    exit 2
fi
CORPUS="$(cd "$(dirname "$CORPUS")" && pwd)/$(basename "$CORPUS")"

if [[ -z "$OUT" ]]; then
    OUT="$(mktemp -d "${TMPDIR:-/tmp}/synthkit-compare.XXXXXX")"
fi
mkdir -p "$OUT"

# --- the reference's environment -------------------------------------------------------
case "$VENV" in
    "$REPO"|"$REPO"/*) echo "compare.sh: put the venv outside the repo (SYNTHKIT_BENCH_VENV=$VENV)" >&2; exit 2 ;;
esac
PY="$VENV/bin/python"
if [[ ! -x "$PY" ]]; then
    echo "compare.sh: creating the virtual environment $VENV" >&2
    "$PYTHON" -m venv "$VENV"
fi
if ! "$PY" -c "import importlib.metadata as m, tiktoken, sys; sys.exit(m.version('llama-index-core') != '$LLAMA_INDEX_VERSION')" 2>/dev/null; then
    echo "compare.sh: installing llama-index-core==$LLAMA_INDEX_VERSION and tiktoken into $VENV" >&2
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet "llama-index-core==$LLAMA_INDEX_VERSION" tiktoken
fi

# --- the reference: one process per mode (its own peak RSS) -----------------------------
REF="$OUT/reference.jsonl"
SK="$OUT/synthkit.jsonl"
: > "$REF"
IFS=',' read -r -a MODE_LIST <<< "$MODES"
echo "compare.sh: reference (llama-index-core $LLAMA_INDEX_VERSION), corpus $CORPUS, repeat $REPEAT" >&2
for mode in "${MODE_LIST[@]}"; do
    echo "compare.sh:   $mode" >&2
    # A failed mode still prints its JSON line (with "error"); keep going.
    "$PY" "$REPO/bench/reference_bench.py" synth --corpus "$CORPUS" --mode "$mode" \
        --repeat "$REPEAT" --latency-ms "$LATENCY_MS" >> "$REF" || true
done

# --- synthkit ------------------------------------------------------------------------
echo "compare.sh: synthkit" >&2
SK_ARGS=(--corpus "$CORPUS" --modes "$MODES" --repeat "$REPEAT" --latency-ms "$LATENCY_MS" --json --isolate)
if [[ "$LATENCY_MS" != "0" ]]; then
    SK_ARGS+=(--concurrency unlimited)
fi
(cd "$REPO" && cargo run --quiet --release -p synthkit-bench -- "${SK_ARGS[@]}") > "$SK" || true

# --- the table -------------------------------------------------------------------------
echo
echo "### $(basename "$CORPUS"), repeat $REPEAT, latency ${LATENCY_MS} ms ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
"$PY" "$REPO/bench/reference_bench.py" table --reference "$REF" --synthkit "$SK"

if [[ "$SPLIT" == "1" ]]; then
    echo "compare.sh: splitter and tokenizer throughput" >&2
    "$PY" "$REPO/bench/reference_bench.py" split --corpus "$CORPUS" --repeat "$REPEAT" > "$OUT/reference_split.jsonl"
    (cd "$REPO" && cargo run --quiet --release -p synthkit-bench -- split --corpus "$CORPUS" --repeat "$REPEAT" --json) \
        > "$OUT/synthkit_split.jsonl"
    echo
    "$PY" - "$OUT/reference_split.jsonl" "$OUT/synthkit_split.jsonl" <<'EOF'
import json, sys
rows = {}
for who, path in (("reference", sys.argv[1]), ("synthkit", sys.argv[2])):
    for line in open(path, encoding="utf-8"):
        if line.startswith("{"):
            o = json.loads(line)
            rows.setdefault(who, {})[o["bench"]] = o
r, s = rows.get("reference", {}), rows.get("synthkit", {})
def mbs(o):
    return f"{o['mb_per_s']:.2f}" if o else "—"
def ratio(a, b):
    return f"{b['mb_per_s'] / a['mb_per_s']:.1f}×" if a and b else "—"
print("| what | reference MB/s | synthkit MB/s | speed-up (sk/ref) | chunks ref / sk |")
print("|---|---:|---:|---:|---:|")
a, b = r.get("split_text"), s.get("split_chunks")
print(f"| split 256/25 | {mbs(a)} | {mbs(b)} | {ratio(a, b)} | {a['items'] if a else '—'} / {b['items'] if b else '—'} |")
a, b = r.get("encode"), s.get("encode")
print(f"| encode (tiktoken / bpe-openai) | {mbs(a)} | {mbs(b)} | {ratio(a, b)} | |")
b = s.get("count")
print(f"| count (synthkit only) | — | {mbs(b)} | | |")
EOF
fi
echo >&2
echo "compare.sh: raw JSON lines in $OUT" >&2
