#!/usr/bin/env bash
# Builds the Python package (bindings/python) as one abi3 wheel, for every CPython >= 3.9 on
# this platform, into dist/ at the repository root (gitignored), and prints its path.
#
# Nothing is written into the source tree: the Rust build goes to $SYNTHKIT_WHEEL_TARGET
# (default ~/.cache/synthkit-wheel-target; the first build compiles synthkit in release, 10-20
# minutes on two cores, later ones take seconds to a minute), and maturin runs from its own
# virtual environment ($SYNTHKIT_WHEEL_VENV, default ~/.cache/synthkit-wheel-build-venv),
# created once with the pinned maturin. Needs a Rust toolchain (cargo on PATH).
# $SYNTHKIT_WHEEL_PROFILE (default release) is the Cargo profile: CI builds the tests'
# wheel with `dev` in its test build's target folder, whose compiled dependencies it reuses
# (the package's dev profile is the workspace's), instead of every dependency once more in
# release (the wheel behaves the same; its module is larger and checks debug assertions).
#
# Exit status: maturin's; 77 when python3 or venv/pip is missing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_venv="${SYNTHKIT_WHEEL_VENV:-$HOME/.cache/synthkit-wheel-build-venv}"
export CARGO_TARGET_DIR="${SYNTHKIT_WHEEL_TARGET:-$HOME/.cache/synthkit-wheel-target}"
python="${PYTHON:-python3}"
profile="${SYNTHKIT_WHEEL_PROFILE:-release}"
dist="$repo/dist"

# shellcheck source=scripts/venv-lib.sh
source "$repo/scripts/venv-lib.sh"
ensure_venv build-wheel "$build_venv" "$python" "maturin==1.16.0"

mkdir -p "$dist"
# One wheel of this package in dist/: the one just built.
rm -f "$dist"/llama_index_response_synthesizers_synthkit-*.whl
echo "build-wheel: building, profile $profile (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
cd "$repo/bindings/python"
"$build_venv/bin/maturin" build --profile "$profile" --quiet --out "$dist" >&2
wheels=("$dist"/llama_index_response_synthesizers_synthkit-*-abi3-*.whl)
if [ ! -f "${wheels[0]}" ] || [ "${#wheels[@]}" -ne 1 ]; then
  echo "build-wheel: expected one abi3 wheel in $dist, found: ${wheels[*]}" >&2
  exit 1
fi
echo "${wheels[0]}"
