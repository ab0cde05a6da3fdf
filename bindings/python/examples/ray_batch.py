"""Corpus-scale synthesis on Ray: ``synthkit batch``'s files and resume, with Ray Data
running one ``Synthesizer`` per actor and every actor sharing one rate budget and one
response cache through Redis.

    python ray_batch.py requests.jsonl responses.jsonl \\
        --base-url http://127.0.0.1:8080/v1 --redis-url redis://127.0.0.1:6379/ \\
        --tpm 200000 --cache redis --actors 2

Input and output lines are ``synthkit batch``'s, read and written by the same library
code (``synthkit_rs.BatchFiles``): a request in the shape of the service's
``POST /v1/synthesize`` body plus an optional ``id`` (default: the line number); two
lines with one id are refused before any call (exit 2). Output lines are
``{"id", "request_sha256", "response"}`` or ``{"id", "request_sha256", "error":
{"kind", "message", "transient"?}}``.

Resume: OUT is opened for appending, never truncated. Run the same command again and a
line whose result is in OUT with the same request hash is kept (a response, or a
permanent error line); an error line with a ``transient`` cause, and a line whose request
changed, run again (``--no-retry-failed`` keeps error lines). A cut last line (a killed
run) is removed; at the end OUT is rewritten to one line per id. Within a run, a request
that fails for a transient cause is sent again up to ``--retries`` times (default 2, 1 s
then 2 s apart) before its error line is written.

This script is the command line of ``synthkit_rs.ray.run_batch``: the driver reads the
input (ids, hashes, the resume's choices) and writes the lines to run to a file beside OUT
(``.OUT.ray-pending.jsonl``, removed at the end), which Ray Data reads (``read_text``) and
the actors of ``synthkit_rs.ray.build_processor``'s stage answer; on a cluster, put OUT on
storage every node sees. A ``"plan": true`` line is an error line, as in ``synthkit
batch`` (``build_processor`` answers it with its plan).

Backends: ``--base-url`` (an OpenAI-compatible server), ``--api anthropic`` with
``--base-url`` (a Messages API server), or neither: synthkit's offline extractive backend.
The budget: every model call of every actor is charged its prompt tokens plus its whole
output reserve against ``--tpm`` (and one request against ``--rpm``) in Redis. The cache:
a request any actor answered before is answered from Redis, so a Ray task that is retried
makes no model call twice. ``paths`` lines are read as ``synthkit batch`` reads them: under
``--paths-root`` (default INPUT's folder; on a cluster, a folder every node sees), confined
to it unless ``--allow-paths-outside``, chunked (``--chunk-size``) and ranked (a line's
``top_k``, else ``--top-k``, else the 20 best of a folder).

With ``--address`` it joins a running Ray cluster; otherwise it starts a local one with
``--num-cpus`` CPUs. Summary on standard error: lines, answered, failed, kept, seconds,
lines per second. Exit status as ``synthkit batch``'s: 0 when every line of OUT has a
response, 1 when OUT holds an error line, 2 for usage errors (duplicate ids).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

import ray

from synthkit_rs.ray import MAX_RETRIES, SynthkitProcessorConfig, run_batch


def processor_config(args: argparse.Namespace) -> SynthkitProcessorConfig:
    """The processor's config from the command line (no ``--base-url``: the offline
    extractive backend)."""
    options: Dict[str, Any] = {}
    for name in ("base_url", "model", "rpm", "tpm", "redis_url", "redis_prefix", "cache",
                 "num_output", "context_window", "max_prompt_tokens", "paths_root", "top_k",
                 "index_dir"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    return SynthkitProcessorConfig(
        mode=args.mode, api=args.api, **options,
        synthesizer_options={"concurrency": args.concurrency},
        jobs=args.jobs, retries=args.retries, batch_size=args.batch_size,
        concurrency=args.actors, num_cpus=args.actor_cpus,
        allow_paths_outside=args.allow_paths_outside, chunk_size=args.chunk_size,
    )


def run(args: argparse.Namespace) -> Dict[str, float]:
    """Runs (or resumes) the batch on a local Ray (or ``--address``'s), started only when
    there are lines to run; returns ``run_batch``'s summary."""
    config = processor_config(args)

    def start_ray() -> None:
        if args.address:
            ray.init(address=args.address, log_to_driver=False)
        else:
            ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)

    try:
        return run_batch(args.input, args.output, config, retry_failed=not args.no_retry_failed,
                         start_ray=start_ray)
    finally:
        ray.shutdown()


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("input", help="requests, one JSON object per line")
    p.add_argument("output", help="results, one JSON line per request (appended: resumes)")
    p.add_argument("--base-url", help="the model server (default: offline extractive answers)")
    p.add_argument("--api", choices=["openai", "anthropic"], default="openai",
                   help="the server's API (anthropic: a Messages API server)")
    p.add_argument("--model", help="the model name (default: the server's)")
    p.add_argument("--mode", default="compact", help="the mode of a line that names none")
    p.add_argument("--max-prompt-tokens", type=int, help="for the lines that set none")
    p.add_argument("--num-output", type=int, help="tokens reserved for each answer")
    p.add_argument("--context-window", type=int, help="the model's context window")
    p.add_argument("--rpm", type=int, help="requests per minute, for all actors together")
    p.add_argument("--tpm", type=int, help="tokens per minute, for all actors together")
    p.add_argument("--redis-url", help="redis://host:port/: the shared budget and cache")
    p.add_argument("--redis-prefix", help="the prefix of the Redis keys (default synthkit)")
    p.add_argument("--cache", help='"redis" (shared), "memory" (per actor) or an SQLite path')
    p.add_argument("--paths-root",
                   help="the folder lines' `paths` are read under (default: INPUT's folder)")
    p.add_argument("--allow-paths-outside", action="store_true",
                   help="read absolute paths, `..` and links out of the root too")
    p.add_argument("--chunk-size", type=int, default=1024,
                   help="tokens a chunk of `paths` holds at most")
    p.add_argument("--top-k", type=lambda v: v if v == "all" else int(v),
                   help="chunks of `paths` kept for a line that sets no top_k (N or all)")
    p.add_argument("--index-dir", help="where folder indexes are kept (default: none)")
    p.add_argument("--no-retry-failed", action="store_true",
                   help="on a resume, keep the error lines already in OUT")
    p.add_argument("--retries", type=int, default=2, choices=range(0, MAX_RETRIES + 1),
                   metavar=f"0..{MAX_RETRIES}",
                   help="sends of a request again after a transient failure, in the run")
    p.add_argument("--actors", type=int, default=2, help="Synthesizer actors")
    p.add_argument("--actor-cpus", type=float, default=0.5, help="CPUs each actor holds")
    p.add_argument("--jobs", type=int, default=8, help="syntheses at once in each actor")
    p.add_argument("--concurrency", type=int, default=8, help="model calls at once per actor")
    p.add_argument("--batch-size", type=int, default=64, help="requests per Ray batch")
    p.add_argument("--address", help="a running Ray cluster (default: start a local one)")
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    args = p.parse_args(argv)
    if args.api != "openai" and not args.base_url:
        p.error(f"--api {args.api} needs --base-url")
    return args


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    try:
        summary = run(args)
    except Exception as e:  # noqa: BLE001 -- a usage error says what to change
        if type(e).__name__ == "InputError":
            print(f"ray_batch: error: {e}", file=sys.stderr)
            return 2
        raise
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
