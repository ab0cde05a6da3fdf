# Shared by scripts/python-tests.sh and scripts/phoenix.sh (sourced, not run): a virtual
# environment outside the repository, created once, with pinned packages installed once.
#
#   ensure_venv WHO VENV PYTHON DEP...
#
# Creates VENV with PYTHON when it has no interpreter, and pip-installs the DEPs when the
# stamp file VENV/.synthkit-deps does not list exactly them (so a changed pin reinstalls).
# Messages start with `WHO:`. Exits 77 when python3, venv or pip cannot do it (the Rust
# tests that drive these scripts skip on 77 outside CI and fail in CI).
ensure_venv() {
  local who="$1" venv="$2" python="$3"
  shift 3
  local deps=("$@")
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "$who: $python not found" >&2
    exit 77
  fi
  if [ ! -x "$venv/bin/python" ]; then
    echo "$who: creating $venv" >&2
    if ! "$python" -m venv "$venv"; then
      echo "$who: cannot create a virtual environment (python3-venv missing?)" >&2
      rm -rf "$venv"
      exit 77
    fi
  fi
  local stamp="$venv/.synthkit-deps"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${deps[*]}" ]; then
    echo "$who: installing ${deps[*]}" >&2
    if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${deps[@]}"; then
      echo "$who: pip could not install ${deps[*]}" >&2
      exit 77
    fi
    echo "${deps[*]}" >"$stamp"
  fi
}
