#!/usr/bin/env bash
# Builds the Python package's wheel (scripts/build-wheel.sh), installs it into virtual
# environments outside the repository and runs the pytest suites against it with no Rust
# toolchain on PATH, as a user who ran `pip install <wheel>` has it:
#
#   1. the main suite (bindings/python/tests) in $SYNTHKIT_PYTHON_VENV (default
#      ~/.cache/synthkit-python-venv): the wheel plus the pinned test dependencies below;
#   2. each extra ([llama-index], [anthropic], [openai], [ray]) in a venv of its own holding
#      only `<wheel>[extra]` and pytest (~/.cache/synthkit-python-extras/EXTRA-KEY, KEY a
#      hash of the extra's requirements as pyproject.toml declares them, from which maturin
#      writes the wheel's): its test in tests/extras (and, for [ray], the Ray processor's and
#      the Ray example's tests, tests/test_ray_processor.py and tests/test_ray_batch.py).
#
# A missing extras venv is made beside the wheel's build, all of them at once: its
# requirements first, then, once the wheel is built, `pip install <wheel>[extra]` as a user
# runs it (which finds them installed). On two cores this saves little: the installs want
# the CPU too (unpacking, compiling bytecode) and took as long as the wheel's build.
# The main suite runs beside the extras' tests, which run one after another.
#
# Venvs are created once and reused; the wheel is reinstalled when it changed. The first run
# compiles synthkit in release (10-20 minutes on two cores; CI builds it in the dev profile
# in its test build's target folder instead, reusing what that compiled: scripts/build-wheel.sh)
# and installs the extras (Ray is
# the largest); later runs take seconds plus pytest's time. Arguments go to the main suite's
# pytest. SYNTHKIT_PYTHON_EXTRAS="" skips the extras (never in CI); "openai ray" runs those.
#
# Exit status: 0 when every suite passed, else the main suite's when it failed, else the
# first failed extra's; 77 when python3 or venv/pip is missing (the Rust driver test skips
# on it outside CI).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SYNTHKIT_PYTHON_VENV:-$HOME/.cache/synthkit-python-venv}"
extras_root="${SYNTHKIT_PYTHON_EXTRAS_DIR:-$HOME/.cache/synthkit-python-extras}"
extras="${SYNTHKIT_PYTHON_EXTRAS-llama-index anthropic openai ray}"
python="${PYTHON:-python3}"
if [ -n "${CI:-}" ] && [ "$extras" != "llama-index anthropic openai ray" ]; then
  echo "python-tests: SYNTHKIT_PYTHON_EXTRAS is not allowed in CI" >&2
  exit 1
fi

# Pinned test dependencies of the main suite: bump them together.
deps=(
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
# What each extra's venv gets beside `<wheel>[extra]`: pytest, and for [ray] the Ray example's
# test's own need (tests/sharing_support.py counts tokens with LlamaIndex's cl100k_base).
extra_test_deps=("pytest==8.4.2" "pytest-timeout==2.4.0")
declare -A extra_more_deps=([ray]="llama-index-core==0.14.25")

# shellcheck source=scripts/venv-lib.sh
source "$repo/scripts/venv-lib.sh"
ensure_venv python-tests "$venv" "$python" "${deps[@]}"

# extra_reqs EXTRA: the requirements pyproject.toml declares for EXTRA, one a line.
extra_reqs() {
  "$venv/bin/python" - "$repo/bindings/python/pyproject.toml" "$1" <<'PY'
import sys
try:
    import tomllib
except ImportError:
    sys.exit("python-tests: reading pyproject.toml's extras needs Python 3.11 or newer (tomllib)")
with open(sys.argv[1], "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
if sys.argv[2] not in extras:
    sys.exit(f"python-tests: pyproject.toml declares no extra {sys.argv[2]!r}")
print("\n".join(extras[sys.argv[2]]))
PY
}

# make_extra_venv EV REQ...: a venv at EV holding REQs (the extra's and its tests'); EV/.ready
# when it worked, nothing left when it failed. Run in the background, one per extra.
make_extra_venv() {
  local ev="$1"
  shift
  "$python" -m venv "$ev" &&
    PATH="$no_rust_path" "$ev/bin/python" -m pip install --quiet --disable-pip-version-check "$@" &&
    touch "$ev/.ready" || rm -rf "$ev"
}

# A PATH without any directory holding cargo or rustc (~/.cargo/bin, rustup's toolchains):
# the tests run as on a machine that never had Rust.
no_rust_path="$venv/bin"
IFS=: read -r -a path_dirs <<<"$PATH"
for d in "${path_dirs[@]}"; do
  [ -n "$d" ] || continue
  if [ -e "$d/cargo" ] || [ -e "$d/rustc" ]; then
    continue
  fi
  no_rust_path="$no_rust_path:$d"
done
if PATH="$no_rust_path" command -v cargo >/dev/null 2>&1; then
  echo "python-tests: cargo is still reachable on the PATH built without it" >&2
  exit 1
fi

declare -A extra_venv extra_pid extra_log extra_deps_of
# Whatever way the script ends (a failed wheel build included), the main suite still running
# is stopped and the logs it made go.
main_pid="" main_log=""
cleanup() {
  [ -z "$main_pid" ] || kill "$main_pid" 2>/dev/null || true
  rm -f "$main_log" "${extra_log[@]}"
}
trap cleanup EXIT
for extra in $extras; do
  # shellcheck disable=SC2206 # a list of pins, no spaces inside one
  test_deps=("${extra_test_deps[@]}" ${extra_more_deps[$extra]:-})
  reqs="$(extra_reqs "$extra")"
  key="$(printf '%s\n' "$reqs" | sort | cat - <(printf '%s\n' "${test_deps[@]}") | sha256sum | cut -c1-16)"
  ev="$extras_root/$extra-$key"
  extra_venv[$extra]="$ev"
  extra_deps_of[$extra]="${test_deps[*]}"
  if [ ! -f "$ev/.synthkit-extra" ]; then
    # A changed extra gets a new venv: the old one goes (Ray's is about 1 GB).
    rm -rf "$extras_root/$extra"-*
    mkdir -p "$extras_root"
    echo "python-tests: creating $ev for the [$extra] extra (beside the wheel's build)" >&2
    extra_log[$extra]="$(mktemp)"
    mapfile -t req_list <<<"$reqs"
    make_extra_venv "$ev" "${req_list[@]}" "${test_deps[@]}" >"${extra_log[$extra]}" 2>&1 &
    extra_pid[$extra]=$!
  fi
done
venvs_started=$SECONDS

wheel="$("$repo/scripts/build-wheel.sh")"
wheel_sum="$(sha256sum "$wheel" | cut -d' ' -f1)"

# install_wheel VENV: (re)installs the wheel, without its dependencies, when it changed.
install_wheel() {
  local v="$1" stamp="$1/.synthkit-wheel"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wheel_sum" ]; then
    PATH="$no_rust_path" "$v/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      --force-reinstall "$wheel"
    echo "$wheel_sum" >"$stamp"
  fi
}

cd "$repo/bindings/python"
# No bytecode written into the source tree's tests/.
export PYTHONDONTWRITEBYTECODE=1
install_wheel "$venv"
status=0
# The main suite runs beside the extras (one pytest process each, mostly waiting on loopback
# servers and Ray): its output is printed when it ends, its status counts first.
echo "python-tests: main suite, $wheel installed into $venv (beside the extras)" >&2
main_log="$(mktemp)"
env PATH="$no_rust_path" SYNTHKIT_TEST_WHEEL="$wheel" "$venv/bin/python" -m pytest -q \
  -p no:cacheprovider --timeout=300 --ignore=tests/extras --ignore=tests/test_ray_batch.py --ignore=tests/test_ray_processor.py \
  tests "$@" >"$main_log" 2>&1 &
main_pid=$!

for extra in $extras; do
  ev="${extra_venv[$extra]}"
  # shellcheck disable=SC2206 # a list of pins, no spaces inside one
  test_deps=(${extra_deps_of[$extra]})
  if [ -n "${extra_pid[$extra]:-}" ]; then
    wait "${extra_pid[$extra]}" || true
    if [ ! -f "$ev/.ready" ] ||
      ! PATH="$no_rust_path" "$ev/bin/python" -m pip install --quiet --disable-pip-version-check \
        "$wheel[$extra]" "${test_deps[@]}" >>"${extra_log[$extra]}" 2>&1; then
      cat "${extra_log[$extra]}" >&2
      echo "python-tests: pip could not install the wheel with [$extra]" >&2
      rm -rf "$ev" "${extra_log[$extra]}"
      status=1
      continue
    fi
    rm -f "${extra_log[$extra]}" "$ev/.ready"
    echo "$extra" >"$ev/.synthkit-extra"
    echo "$wheel_sum" >"$ev/.synthkit-wheel"
    echo "python-tests: $ev ready $((SECONDS - venvs_started)) s after the venvs were started" >&2
  fi
  install_wheel "$ev"
  tests=("tests/extras/test_${extra//-/_}_extra.py")
  [ "$extra" = ray ] && tests+=(tests/test_ray_processor.py tests/test_ray_batch.py)
  echo "python-tests: [$extra] extra: ${tests[*]} in $ev" >&2
  env PATH="$ev/bin:${no_rust_path#"$venv/bin:"}" SYNTHKIT_EXTRA="$extra" \
    "$ev/bin/python" -m pytest -q -p no:cacheprovider --timeout=300 "${tests[@]}" ||
    { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
done
main_status=0
wait "$main_pid" || main_status=$?
echo "python-tests: main suite:" >&2
cat "$main_log"
[ "$main_status" -eq 0 ] || status=$main_status
exit "$status"
