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

The driver reads the input (ids, hashes, the resume's choices) and writes the lines to
run to a file beside OUT (``.OUT.ray-pending.jsonl``, removed at the end), which Ray
Data reads (``read_text``); on a cluster, put OUT on storage every node sees.

Backends: ``--base-url`` (an OpenAI-compatible server), ``--api anthropic`` with
``--base-url`` (a Messages API server), or neither: synthkit's offline extractive backend.
The budget: every model call of every actor is charged its prompt tokens plus its whole
output reserve against ``--tpm`` (and one request against ``--rpm``) in Redis. The cache:
a request any actor answered before is answered from Redis, so a Ray task that is retried
makes no model call twice. ``paths`` lines are ``synthkit batch``'s only (an error line
here).

With ``--address`` it joins a running Ray cluster; otherwise it starts a local one with
``--num-cpus`` CPUs. Summary on standard error: lines, answered, failed, kept, seconds,
lines per second. Exit status as ``synthkit batch``'s: 0 when every line of OUT has a
response, 1 when OUT holds an error line, 2 for usage errors (duplicate ids).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional

import ray

#: Bounds of the in-run retries of transient failures.
MAX_RETRIES = 10
RETRY_BACKOFF_S = 1.0


def _result_line(rid: Any, sha: Optional[str], key: str, value: Any) -> str:
    return json.dumps({"id": rid, "request_sha256": sha, key: value}, ensure_ascii=False)


def _line_message(number: int, message: str) -> str:
    """``synthesize_many``'s ``requests[i]: ...`` as ``synthkit batch``'s ``line N: ...``."""
    if message.startswith("requests["):
        message = message.split("]: ", 1)[-1]
    return f"line {number}: {message}"


class SynthesizeBatch:
    """The ``map_batches`` callable: one ``synthkit_rs.Synthesizer`` per actor, built once
    (the Redis connection and the HTTP client with it), answering each batch with
    ``synthesize_many`` and sending transient failures again, at most ``retries`` times."""

    def __init__(self, options: Dict[str, Any], jobs: int, retries: int) -> None:
        import synthkit_rs as synthkit

        self._synth = synthkit.Synthesizer(**options)
        self._failed = synthkit.FailedRequest
        self._jobs = jobs
        self._retries = retries

    def _answer(self, requests: List[Dict[str, Any]]) -> List[Any]:
        results: List[Any] = list(self._synth.synthesize_many(requests, jobs=self._jobs))
        for attempt in range(self._retries):
            again = [
                i for i, r in enumerate(results)
                if isinstance(r, self._failed) and r.to_dict().get("transient")
            ]
            if not again:
                break
            time.sleep(RETRY_BACKOFF_S * (2 ** attempt))
            retried = self._synth.synthesize_many([requests[i] for i in again], jobs=self._jobs)
            for i, r in zip(again, retried):
                results[i] = r
        return results

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        items = [json.loads(str(raw)) for raw in batch["text"]]
        lines: List[Optional[str]] = [None] * len(items)
        answered = [False] * len(items)
        runnable: List[int] = []
        for i, item in enumerate(items):
            if "paths" in item["request"]:
                error = {
                    "kind": "invalid_request",
                    "message": f"line {item['number']}: `paths` lines are read by "
                    "`synthkit batch`; give this recipe `nodes`",
                }
                lines[i] = _result_line(item["id"], item["request_sha256"], "error", error)
            else:
                runnable.append(i)
        results = self._answer([items[i]["request"] for i in runnable])
        for i, result in zip(runnable, results):
            item = items[i]
            if isinstance(result, self._failed):
                error = result.to_dict()
                error["message"] = _line_message(item["number"], error["message"])
                lines[i] = _result_line(item["id"], item["request_sha256"], "error", error)
            else:
                response = result.to_dict()
                lines[i] = _result_line(item["id"], item["request_sha256"], "response", response)
                answered[i] = True
        return {"line": [str(line) for line in lines], "answered": answered}


def synthesizer_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The ``Synthesizer`` keyword arguments from the command line (no ``--base-url``:
    the offline extractive backend)."""
    options: Dict[str, Any] = {"mode": args.mode, "concurrency": args.concurrency}
    if args.api != "openai":
        options["api"] = args.api
    for name in ("base_url", "model", "rpm", "tpm", "redis_url", "redis_prefix", "cache",
                 "num_output", "context_window", "max_prompt_tokens"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    return options


def _pending_path(output: str) -> str:
    folder, name = os.path.split(os.path.abspath(output))
    return os.path.join(folder, f".{name}.ray-pending.jsonl")


def run(args: argparse.Namespace) -> Dict[str, float]:
    """Runs (or resumes) the batch; returns the summary figures, with ``errors``: the
    error lines OUT holds at the end."""
    from synthkit_rs import BatchFiles

    start = time.monotonic()
    files = BatchFiles(
        args.input, args.output, mode=args.mode, max_prompt_tokens=args.max_prompt_tokens,
        retry_failed=not args.no_retry_failed,
    )
    survey = files.survey
    if survey["cut_bytes"]:
        print(f"ray_batch: the output's last line was cut ({survey['cut_bytes']} bytes): "
              "rewriting it", file=sys.stderr)
    if survey["kept"] or survey["retry"] or survey["changed"]:
        retry = sum(survey["retry"].values())
        print(f"ray_batch: resuming {args.output}: {survey['kept']} results kept, {retry} "
              f"failed lines to retry, {survey['changed']} changed, {survey['new']} new",
              file=sys.stderr)
    counts = {"lines": 0, "answered": 0, "failed": 0, "kept": survey["kept"]}
    pending = _pending_path(args.output)
    to_run = 0
    with open(pending, "w", encoding="utf-8") as todo:
        for item in files.pending():
            if "error" in item:
                files.append(_result_line(item["id"], item["request_sha256"], "error",
                                          item["error"]))
                counts["lines"] += 1
                counts["failed"] += 1
            else:
                todo.write(json.dumps(item, ensure_ascii=False) + "\n")
                to_run += 1
    try:
        if to_run:
            if args.address:
                ray.init(address=args.address, log_to_driver=False)
            else:
                ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
            try:
                answered = ray.data.read_text(pending).map_batches(
                    SynthesizeBatch,
                    fn_constructor_kwargs={"options": synthesizer_options(args),
                                           "jobs": args.jobs, "retries": args.retries},
                    batch_size=args.batch_size,
                    concurrency=args.actors,
                    num_cpus=args.actor_cpus,
                    batch_format="numpy",
                )
                for batch in answered.iter_batches(batch_format="numpy", batch_size=None):
                    for line, ok in zip(batch["line"], batch["answered"]):
                        files.append(str(line))
                        counts["lines"] += 1
                        counts["answered" if ok else "failed"] += 1
            finally:
                ray.shutdown()
        held = files.finish()
    finally:
        if os.path.exists(pending):
            os.remove(pending)
    seconds = time.monotonic() - start
    errors = sum(held["errors"].values())
    summary = {**counts, "errors": errors, "seconds": seconds,
               "lines_per_second": counts["lines"] / seconds if seconds else 0.0}
    print(
        "ray_batch: {lines} lines: {answered} answered, {failed} failed, {kept} already in "
        "OUT; {seconds:.1f} s, {lines_per_second:.1f} lines/s".format(**summary),
        file=sys.stderr,
    )
    if errors:
        print(f"ray_batch: {errors} error lines in {args.output}: run the same command again "
              "to retry those that failed for a transient cause; fix the input for the others",
              file=sys.stderr)
    return summary


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
