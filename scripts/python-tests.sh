#!/usr/bin/env bash
# Builds the Python package (bindings/python) and runs its pytest suite.
#
# The virtual environment lives outside the repository and is reused between runs
# ($SYNTHKIT_PYTHON_VENV, default ~/.cache/synthkit-python-venv), and so does the Rust build
# ($CARGO_TARGET_DIR, default ~/.cache/synthkit-python-target): the first run compiles
# synthkit in release (a few minutes on two cores), later runs take seconds.
#
# Exit status: pytest's; 77 when python3 or venv/pip is missing (the Rust driver test
# skips on it outside CI).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SYNTHKIT_PYTHON_VENV:-$HOME/.cache/synthkit-python-venv}"
export CARGO_TARGET_DIR="${SYNTHKIT_PYTHON_TARGET:-$HOME/.cache/synthkit-python-target}"
python="${PYTHON:-python3}"

# Pinned test dependencies: bump them together.
deps=(
  "maturin==1.16.0"
  "pytest==8.4.2"
  "pytest-timeout==2.4.0"
  "llama-index-core==0.14.25"
  "llama-index-llms-openai-like==0.8.1"
  # The Anthropic LLM of LlamaIndex, for the tests against llama-server's Messages API.
  # Its SDK is pinned to the 0.x line: with anthropic 2.x, llama-index-llms-anthropic
  # 0.12.3 fails with "Cannot instantiate typing.Union"; 0.125.0 works.
  "llama-index-llms-anthropic==0.12.3"
  "anthropic==0.125.0"
)

# shellcheck source=scripts/venv-lib.sh
source "$repo/scripts/venv-lib.sh"
ensure_venv python-tests "$venv" "$python" "${deps[@]}"

# Ray for the Ray example's test (tests/test_ray_batch.py): installed apart, since it is large
# and not every platform has a wheel. 2.60.0 has CPython 3.11 wheels; `data` brings Ray Data
# (pyarrow, pandas). Outside CI a failed install only skips that test (it says so); in CI
# (CI set) it fails the run.
ray_dep="ray[data]==2.60.0"
ray_stamp="$venv/.synthkit-ray"
if [ ! -f "$ray_stamp" ] || [ "$(cat "$ray_stamp")" != "$ray_dep" ]; then
  echo "python-tests: installing $ray_dep" >&2
  if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$ray_dep"; then
    echo "$ray_dep" > "$ray_stamp"
  elif [ -n "${CI:-}" ]; then
    echo "python-tests: pip could not install $ray_dep (required in CI)" >&2
    exit 1
  else
    echo "python-tests: pip could not install $ray_dep: the Ray example's test will be skipped" >&2
  fi
fi

cd "$repo/bindings/python"
echo "python-tests: building the extension (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --release --quiet
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider --timeout=300 tests "$@"
