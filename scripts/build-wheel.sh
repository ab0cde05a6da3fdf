#!/usr/bin/env bash
# Builds the Python package (bindings/python) as one abi3 wheel, for every CPython >= 3.9 on
# this platform, into dist/ at the repository root (gitignored), and prints its path.
#
# Nothing is written into the source tree: the Rust build goes to $SYNTHKIT_WHEEL_TARGET
# (default ~/.cache/synthkit-wheel-target; the first build compiles synthkit in release, 10-20
# minutes on two cores, later ones take seconds to a minute), and maturin runs from its own
# virtual environment ($SYNTHKIT_WHEEL_VENV, default ~/.cache/synthkit-wheel-build-venv),
# created once with the pinned maturin. Needs a Rust toolchain (cargo on PATH).
#
# Exit status: maturin's; 77 when python3 or venv/pip is missing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_venv="${SYNTHKIT_WHEEL_VENV:-$HOME/.cache/synthkit-wheel-build-venv}"
export CARGO_TARGET_DIR="${SYNTHKIT_WHEEL_TARGET:-$HOME/.cache/synthkit-wheel-target}"
python="${PYTHON:-python3}"
dist="$repo/dist"

# shellcheck source=scripts/venv-lib.sh
source "$repo/scripts/venv-lib.sh"
ensure_venv build-wheel "$build_venv" "$python" "maturin==1.16.0"

mkdir -p "$dist"
# One wheel of this package in dist/: the one just built.
rm -f "$dist"/llama_index_response_synthesizers_synthkit-*.whl
echo "build-wheel: building (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
cd "$repo/bindings/python"
"$build_venv/bin/maturin" build --release --quiet --out "$dist" >&2
wheels=("$dist"/llama_index_response_synthesizers_synthkit-*-abi3-*.whl)
if [ ! -f "${wheels[0]}" ] || [ "${#wheels[@]}" -ne 1 ]; then
  echo "build-wheel: expected one abi3 wheel in $dist, found: ${wheels[*]}" >&2
  exit 1
fi
echo "${wheels[0]}"
