"""Corpus-scale synthesis on Ray: Ray Data reads a JSONL of requests, one ``Synthesizer``
per actor answers them, and every actor shares one rate budget and one response cache
through Redis.

    python ray_batch.py requests.jsonl responses.jsonl \\
        --base-url http://127.0.0.1:8080/v1 --redis-url redis://127.0.0.1:6379/ \\
        --tpm 200000 --cache redis --actors 2

Input lines are ``synthkit batch`` lines: a request in the shape of the service's
``POST /v1/synthesize`` body (``query``, ``nodes``, ``mode``, ``templates``,
``output_schema``, ...) plus an ``id``. A distributed reader does not know line numbers,
so a line without an ``id`` gets ``sha256:`` and the first 16 hex digits of the line's
SHA-256. Output lines are ``synthkit batch``'s: ``{"id", "response"}`` or
``{"id", "error": {"kind", "message"}}``; the driver writes them to one file as the
batches finish (on a cluster, ``ds.write_json("s3://...")`` instead keeps the writing on
the workers).

The budget: every model call of every actor is charged its prompt tokens plus its whole
output reserve against ``--tpm`` (and one request against ``--rpm``) in Redis, so the
model server never sees more than the caps, however many actors run. The cache: a
request any actor answered before (the same prompt to the same model) is answered from
Redis, so a Ray task that is retried makes no model call twice.

With ``--address`` it joins a running Ray cluster; otherwise it starts a local one with
``--num-cpus`` CPUs. Summary on standard error: lines, answered, failed, seconds,
lines per second.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from typing import Any, Dict, List

import ray


class SynthesizeBatch:
    """The ``map_batches`` callable: one ``synthkit.Synthesizer`` per actor, built once
    (the Redis connection and the HTTP client with it), answering each batch with
    ``synthesize_many``."""

    def __init__(self, options: Dict[str, Any], jobs: int) -> None:
        import synthkit_rs as synthkit

        self._synth = synthkit.Synthesizer(**options)
        self._jobs = jobs

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        ids: List[Any] = []
        requests: List[Any] = []
        errors: Dict[int, Dict[str, str]] = {}
        for i, raw in enumerate(batch["text"]):
            line = str(raw)
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request line is a JSON object")
            except ValueError as e:
                ids.append(_line_id(line))
                requests.append(None)
                errors[i] = {"kind": "invalid_request", "message": f"not a request: {e}"}
                continue
            ids.append(request.pop("id") if "id" in request else _line_id(line))
            requests.append(request)
        runnable = [r for r in requests if r is not None]
        results = iter(self._synth.synthesize_many(runnable, jobs=self._jobs))
        lines: List[str] = []
        answered: List[bool] = []
        for i, (rid, request) in enumerate(zip(ids, requests)):
            if request is None:
                out: Dict[str, Any] = {"id": rid, "error": errors[i]}
            else:
                result = next(results)
                if isinstance(result, _failed_type()):
                    out = {"id": rid, "error": result.to_dict()}
                else:
                    out = {"id": rid, "response": result.to_dict()}
            lines.append(json.dumps(out, ensure_ascii=False))
            answered.append("response" in out)
        return {"line": lines, "answered": answered}


def _failed_type() -> type:
    import synthkit_rs as synthkit

    return synthkit.FailedRequest


def _line_id(line: str) -> str:
    return "sha256:" + hashlib.sha256(line.encode()).hexdigest()[:16]


def synthesizer_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The ``Synthesizer`` keyword arguments from the command line."""
    options: Dict[str, Any] = {
        "mode": args.mode,
        "base_url": args.base_url,
        "concurrency": args.concurrency,
    }
    for name in ("model", "rpm", "tpm", "redis_url", "redis_prefix", "cache", "num_output",
                 "context_window"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    return options


def run(args: argparse.Namespace) -> Dict[str, float]:
    """Runs the batch; returns the summary figures."""
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        start = time.monotonic()
        ds = ray.data.read_text(os.path.abspath(args.input))
        answered = ds.map_batches(
            SynthesizeBatch,
            fn_constructor_kwargs={"options": synthesizer_options(args), "jobs": args.jobs},
            batch_size=args.batch_size,
            concurrency=args.actors,
            num_cpus=args.actor_cpus,
            batch_format="numpy",
        )
        counts = {"lines": 0, "answered": 0, "failed": 0}
        with open(args.output, "w", encoding="utf-8") as out:
            for batch in answered.iter_batches(batch_format="numpy", batch_size=None):
                for line, ok in zip(batch["line"], batch["answered"]):
                    out.write(str(line) + "\n")
                    counts["lines"] += 1
                    counts["answered" if ok else "failed"] += 1
        seconds = time.monotonic() - start
    finally:
        ray.shutdown()
    summary = {**counts, "seconds": seconds, "lines_per_second": counts["lines"] / seconds}
    print(
        "ray_batch: {lines} lines: {answered} answered, {failed} failed; {seconds:.1f} s, "
        "{lines_per_second:.1f} lines/s".format(**summary),
        file=sys.stderr,
    )
    return summary


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("input", help="requests, one JSON object per line")
    p.add_argument("output", help="results, one JSON line per request")
    p.add_argument("--base-url", required=True, help="an OpenAI-compatible server, up to /v1")
    p.add_argument("--model", help="the model name (default: the server's)")
    p.add_argument("--mode", default="compact", help="the mode of a line that names none")
    p.add_argument("--num-output", type=int, help="tokens reserved for each answer")
    p.add_argument("--context-window", type=int, help="the model's context window")
    p.add_argument("--rpm", type=int, help="requests per minute, for all actors together")
    p.add_argument("--tpm", type=int, help="tokens per minute, for all actors together")
    p.add_argument("--redis-url", help="redis://host:port/: the shared budget and cache")
    p.add_argument("--redis-prefix", help="the prefix of the Redis keys (default synthkit)")
    p.add_argument("--cache", help='"redis" (shared), "memory" (per actor) or an SQLite path')
    p.add_argument("--actors", type=int, default=2, help="Synthesizer actors")
    p.add_argument("--actor-cpus", type=float, default=0.5, help="CPUs each actor holds")
    p.add_argument("--jobs", type=int, default=8, help="syntheses at once in each actor")
    p.add_argument("--concurrency", type=int, default=8, help="model calls at once per actor")
    p.add_argument("--batch-size", type=int, default=64, help="requests per Ray batch")
    p.add_argument("--address", help="a running Ray cluster (default: start a local one)")
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    return p.parse_args(argv)


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
