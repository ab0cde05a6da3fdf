#!/usr/bin/env bash
# Builds the release artefacts into dist/ at the repository root (gitignored): the
# `synthkit` command (the release profile strips it) and the Python wheel
# (scripts/build-wheel.sh). Prints their paths.
#
# The command builds into the workspace's target/ (CARGO_TARGET_DIR if set); a fresh
# build takes about 5 minutes on two idle cores (docs/command-line.md, "Building it").
#
# Exit status: cargo's or build-wheel.sh's (77 when python3 or venv/pip is missing).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
dist="$repo/dist"
target="${CARGO_TARGET_DIR:-$repo/target}"

cargo build --release --locked -p synthkit-cli
mkdir -p "$dist"
cp "$target/release/synthkit" "$dist/synthkit"
echo "$dist/synthkit"
# The wheel builds in its own target folder (see build-wheel.sh).
env -u CARGO_TARGET_DIR scripts/build-wheel.sh
