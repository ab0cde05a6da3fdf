"""Side by side on one batch: ``synthkit batch`` vs a Python asyncio loop over LlamaIndex's
``get_response_synthesizer(...).asynthesize`` (a semaphore of the same size), and the
Python package's ``Synthesizer.synthesize_many``, each against its own fresh instant model
server (``cargo run --release -p synthkit-cli --example instant_server``: a fixed 40-word
answer over HTTP on 127.0.0.1).

Every contender runs in a process of its own, so the peak RSS (``wait4``'s ``ru_maxrss``)
is its own; each reads the same JSONL (``scripts/batch-input.py``: compact, 8 bench-corpus
chunks per request) and writes one JSON line per request. Same model settings for all:
context window 3900 and 256 output tokens (LlamaIndex's ``OpenAILike`` defaults).

    python bench/batch_vs_llamaindex.py --synthkit target/release/synthkit \\
        --server target/release/examples/instant_server --input /tmp/batch-in.jsonl --jobs 8

Prints a Markdown table: wall seconds, peak RSS, requests answered, model calls the server
saw.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Tuple

from _markdown import print_table

WINDOW = 3900
NUM_OUTPUT = 256


def start_server(path: str) -> Tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    base = proc.stdout.readline().strip()
    if not base.startswith("http://"):
        proc.kill()
        raise SystemExit(f"the instant server printed {base!r}, not its URL")
    return proc, base


def stop_server(proc: subprocess.Popen) -> int:
    """Closes the server's standard input; returns the completion requests it served."""
    out, _ = proc.communicate(input="", timeout=60)
    for line in out.splitlines():
        if line.endswith("completion requests"):
            return int(line.split()[0])
    return -1


def measure(argv: List[str], env: Dict[str, str]) -> Tuple[float, float, int]:
    """Runs `argv`; its wall seconds, peak RSS in MiB and exit status."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024.0, proc.returncode


def count_answered(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if "response" in json.loads(line))


# --- the contenders run in child processes -------------------------------------------------


def llamaindex_child(base: str, input_path: str, output: str, jobs: int) -> None:
    from llama_index.core import get_response_synthesizer
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        api_base=base,
        api_key="none",
        model="instant",
        is_chat_model=True,
        context_window=WINDOW,
        max_tokens=NUM_OUTPUT,
        timeout=600,
    )
    synth = get_response_synthesizer(llm=llm, response_mode="compact")

    async def main() -> None:
        sem = asyncio.Semaphore(jobs)
        pending: List[asyncio.Task] = []
        results: Dict[int, str] = {}

        async def one(i: int, request: dict) -> None:
            try:
                nodes = [
                    NodeWithScore(node=TextNode(id_=n["id"], text=n["text"]))
                    for n in request["nodes"]
                ]
                r = await synth.asynthesize(request["query"], nodes)
                results[i] = json.dumps({"id": request["id"], "response": {"text": str(r)}})
            except Exception as e:  # noqa: BLE001 - a failed request is a result line
                results[i] = json.dumps({"id": request.get("id"), "error": {"message": str(e)}})
            finally:
                sem.release()

        with open(input_path, encoding="utf-8") as f, open(output, "w", encoding="utf-8") as out:
            written = 0
            for i, line in enumerate(f):
                await sem.acquire()
                pending.append(asyncio.ensure_future(one(i, json.loads(line))))
                # Write finished results in order, as they become available.
                while written in results:
                    out.write(results.pop(written) + "\n")
                    written += 1
                pending = [t for t in pending if not t.done()]
            await asyncio.gather(*pending)
            while written in results:
                out.write(results.pop(written) + "\n")
                written += 1

    asyncio.run(main())


def synthesize_many_child(base: str, input_path: str, output: str, jobs: int) -> None:
    import synthkit_rs

    synth = synthkit_rs.Synthesizer(
        base_url=base, context_window=WINDOW, num_output=NUM_OUTPUT, concurrency=jobs
    )
    ids: List[str] = []

    def requests():
        with open(input_path, encoding="utf-8") as f:
            for line in f:
                request = json.loads(line)
                ids.append(request.pop("id"))
                yield request

    results = synth.synthesize_many(requests(), jobs=jobs)
    with open(output, "w", encoding="utf-8") as out:
        for rid, r in zip(ids, results):
            key = "error" if isinstance(r, synthkit_rs.FailedRequest) else "response"
            out.write(json.dumps({"id": rid, key: r.to_dict()}) + "\n")


# --- the driver ------------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--synthkit", required=True, help="the synthkit binary (release)")
    p.add_argument("--server", required=True, help="the instant_server example binary")
    p.add_argument("--input", required=True, help="scripts/batch-input.py's output")
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--out-dir", default="/tmp")
    p.add_argument("--child", choices=["llamaindex", "synthesize_many"], help=argparse.SUPPRESS)
    p.add_argument("--base", help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child == "llamaindex":
        llamaindex_child(args.base, args.input, args.output, args.jobs)
        return
    if args.child == "synthesize_many":
        synthesize_many_child(args.base, args.input, args.output, args.jobs)
        return

    env = {**os.environ, "NO_PROXY": "127.0.0.1", "OPENAI_API_KEY": "none"}
    with open(args.input, encoding="utf-8") as f:
        n = sum(1 for _ in f)
    rows = []
    contenders = [
        ("`synthkit batch --jobs %d`" % args.jobs, "synthkit"),
        ("LlamaIndex `asynthesize`, asyncio, semaphore %d" % args.jobs, "llamaindex"),
        ("Python `Synthesizer.synthesize_many(jobs=%d)`" % args.jobs, "synthesize_many"),
    ]
    for label, kind in contenders:
        server, base = start_server(args.server)
        output = os.path.join(args.out_dir, f"batch-compare-{kind}.jsonl")
        if os.path.exists(output):
            os.remove(output)
        if kind == "synthkit":
            argv = [args.synthkit, "batch", args.input, "-o", output, "--base-url", base,
                    "--jobs", str(args.jobs), "--context-window", str(WINDOW),
                    "--num-output", str(NUM_OUTPUT), "--quiet"]
        else:
            argv = [sys.executable, os.path.abspath(__file__), "--synthkit", args.synthkit,
                    "--server", args.server, "--input", args.input, "--jobs", str(args.jobs),
                    "--child", kind, "--base", base, "--output", output]
        wall, rss, status = measure(argv, env)
        calls = stop_server(server)
        rows.append((label, wall, rss, count_answered(output), calls, status))
    print(f"\n{n} requests (compact, 8 chunks each), jobs {args.jobs}, instant server over HTTP\n")
    print_table(
        ["contender", "wall s", "peak RSS MiB", "answered", "model calls", "exit"],
        [(label, f"{wall:.1f}", f"{rss:.0f}", answered, calls, status) for label, wall, rss, answered, calls, status in rows],
    )


if __name__ == "__main__":
    main()
