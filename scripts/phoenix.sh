#!/usr/bin/env bash
# Arize Phoenix, the trace UI LlamaIndex users read OpenTelemetry traces in, for the
# OpenTelemetry tests and for looking at synthkit's spans by hand.
#
#   scripts/phoenix.sh install        create the venv once (pinned version) and exit
#   scripts/phoenix.sh serve PORT     run Phoenix on 127.0.0.1:PORT (UI, GraphQL and
#                                     OTLP/HTTP at http://127.0.0.1:PORT/v1/traces) in the
#                                     foreground (the script becomes Phoenix: a signal to
#                                     it stops Phoenix), its data in $PHOENIX_WORKING_DIR
#                                     (default ~/.cache/synthkit-phoenix-data)
#
# The venv lives outside the repository and is reused ($SYNTHKIT_PHOENIX_VENV, default
# ~/.cache/synthkit-phoenix-venv). Exit status 77 when python3, venv or pip cannot give
# us Phoenix (the Rust tests skip on it outside CI and fail in CI).
set -euo pipefail

venv="${SYNTHKIT_PHOENIX_VENV:-$HOME/.cache/synthkit-phoenix-venv}"
python="${PYTHON:-python3}"
# Pinned: the tests read spans back through this version's GraphQL API.
deps=("arize-phoenix==20.26.1")

# shellcheck source=scripts/venv-lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/venv-lib.sh"

install() {
  ensure_venv phoenix "$venv" "$python" "${deps[@]}"
}

case "${1:-}" in
  install)
    install
    ;;
  serve)
    port="${2:?usage: scripts/phoenix.sh serve PORT}"
    install
    export PHOENIX_WORKING_DIR="${PHOENIX_WORKING_DIR:-$HOME/.cache/synthkit-phoenix-data}"
    mkdir -p "$PHOENIX_WORKING_DIR"
    export PHOENIX_HOST=127.0.0.1
    export PHOENIX_PORT="$port"
    # No gRPC listener (nothing of ours speaks it) and no telemetry of Phoenix's own.
    export PHOENIX_GRPC_PORT=0
    export PHOENIX_TELEMETRY_ENABLED=false
    exec "$venv/bin/phoenix" serve
    ;;
  *)
    echo "usage: scripts/phoenix.sh install | serve PORT" >&2
    exit 2
    ;;
esac
