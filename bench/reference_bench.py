#!/usr/bin/env python3
"""The synthkit benchmark workload on the reference implementation (llama-index-core).

Subcommands:

  synth  --corpus FILE --mode MODE [--repeat 3] [--latency-ms 0]
         One mode in this process: a warm-up run (observed: calls, prompt tokens counted
         with tiktoken cl100k_base), then best-of-REPEAT wall time of
         ``synthesizer.synthesize(query, nodes)`` with an instant fixed-answer LLM.
         Prints one JSON line with the same fields as ``synthkit-bench --json``.
         Run one process per mode so that ``peak_rss_kb`` (ru_maxrss) is the mode's own.

  split  --corpus FILE [--repeat 3] [--target-mb 10]
         TokenTextSplitter(256, 25).split_text and raw tiktoken encode throughput on the
         corpus joined with blank lines until >= 10 MB. One JSON line per measurement.

  table  --reference REF.jsonl --synthkit SK.jsonl
         A Markdown table comparing the two sets of JSON lines, one row per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from typing import Any, Dict, List, Optional

QUERY = "What does the text say about iterables and exceptions?"
FIXED_ANSWER = (
    "answer from qa call lorem ipsum dolor sit amet consectetur adipiscing elit sed do "
    "eiusmod tempor incididunt ut labore et dolore magna aliqua ut enim ad minim veniam "
    "quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat"
)
CONTEXT_WINDOW = 4096
NUM_OUTPUT = 256
CHUNK_OVERLAP_RATIO = 0.1


def peak_rss_kb() -> int:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def read_corpus(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        docs = json.load(f)
    if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
        raise SystemExit(f"{path} is not a JSON array of strings")
    return docs


class Stats:
    """Counts calls always; prompt tokens only while ``counting`` (the untimed run)."""

    def __init__(self) -> None:
        self.encoder = None
        self.counting = False
        self.reset()

    def reset(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.max_prompt_tokens = 0

    def record(self, prompt: str) -> None:
        self.calls += 1
        if self.counting and self.encoder is not None:
            n = len(self.encoder.encode_ordinary(prompt))
            self.prompt_tokens += n
            self.max_prompt_tokens = max(self.max_prompt_tokens, n)


STATS = Stats()


def cl100k():
    """tiktoken's cl100k_base, loaded from llama-index's bundled cache (no download)."""
    import tiktoken
    from llama_index.core.utils import get_tokenizer

    get_tokenizer()  # loads cl100k_base from llama_index/core/_static/tiktoken_cache
    return tiktoken.get_encoding("cl100k_base")  # now in tiktoken's in-memory registry


def make_llm(latency_s: float):
    from llama_index.core.base.llms.types import (
        CompletionResponse,
        CompletionResponseGen,
        LLMMetadata,
    )
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_completion_callback

    class FixedLLM(CustomLLM):
        """Answers FIXED_ANSWER instantly (or after an async/sync sleep of latency_s)."""

        latency_s: float = 0.0

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(
                context_window=CONTEXT_WINDOW,
                num_output=NUM_OUTPUT,
                model_name="fixed",
            )

        def _call(self, prompt: str) -> None:
            """Counts the call's prompt and waits the call's latency (the sync calls)."""
            STATS.record(prompt)
            if self.latency_s:
                time.sleep(self.latency_s)

        @llm_completion_callback()
        def complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            self._call(prompt)
            return CompletionResponse(text=FIXED_ANSWER)

        @llm_completion_callback()
        async def acomplete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            STATS.record(prompt)
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            return CompletionResponse(text=FIXED_ANSWER)

        @llm_completion_callback()
        def stream_complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponseGen:
            self._call(prompt)
            yield CompletionResponse(text=FIXED_ANSWER, delta=FIXED_ANSWER)

    return FixedLLM(latency_s=latency_s)


def cmd_synth(args: argparse.Namespace) -> int:
    from llama_index.core import PromptHelper, Settings, get_response_synthesizer
    from llama_index.core.schema import NodeWithScore, TextNode

    STATS.encoder = cl100k()
    docs = read_corpus(args.corpus)
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i:05d}")) for i, t in enumerate(docs)
    ]
    del docs
    latency_s = args.latency_ms / 1000.0
    llm = make_llm(latency_s)
    # no_text and context_only are built without the llm argument and would otherwise
    # resolve the default (OpenAI) LLM from Settings.
    Settings.llm = llm
    helper = PromptHelper(
        context_window=CONTEXT_WINDOW,
        num_output=NUM_OUTPUT,
        chunk_overlap_ratio=CHUNK_OVERLAP_RATIO,
    )
    # With latency, let the modes that can run calls concurrently do so (the reference's
    # use_async: unbounded concurrency for tree levels and accumulate).
    synth = get_response_synthesizer(
        llm=llm,
        response_mode=args.mode,
        prompt_helper=helper,
        use_async=latency_s > 0,
    )
    load_rss = peak_rss_kb()
    result: Dict[str, Any] = {
        "mode": args.mode,
        "n": len(nodes),
        "best_s": None,
        "runs_s": [],
        "calls": 0,
        "prompt_tokens": 0,
        "max_prompt_tokens": 0,
        "answer_bytes": 0,
        "peak_rss_kb": None,
        "load_rss_kb": load_rss,
        "rss_isolated": True,
        "latency_ms": args.latency_ms,
        "concurrency": 0 if latency_s > 0 else 1,
        "impl": "llama-index-core",
    }
    try:
        # Warm-up, observed (untimed): calls and prompt tokens.
        STATS.reset()
        STATS.counting = True
        response = synth.synthesize(QUERY, nodes)
        STATS.counting = False
        result["answer_bytes"] = len(str(response.response or "").encode("utf-8"))
        result["calls"] = STATS.calls
        result["prompt_tokens"] = STATS.prompt_tokens
        result["max_prompt_tokens"] = STATS.max_prompt_tokens
        del response
        # Timed runs.
        for _ in range(max(1, args.repeat)):
            STATS.reset()
            start = time.perf_counter()
            response = synth.synthesize(QUERY, nodes)
            elapsed = time.perf_counter() - start
            del response
            if STATS.calls != result["calls"]:
                print(
                    f"reference_bench: {args.mode}: a timed run made {STATS.calls} calls,"
                    f" the observed run {result['calls']}",
                    file=sys.stderr,
                )
            result["runs_s"].append(elapsed)
        result["best_s"] = min(result["runs_s"])
    except Exception as e:  # report, don't crash: the table shows it
        result["error"] = f"{type(e).__name__}: {e}"
    result["peak_rss_kb"] = peak_rss_kb()
    print(json.dumps(result), flush=True)
    return 0 if "error" not in result else 1


def build_text(docs: List[str], target: int) -> str:
    parts: List[str] = []
    size = 0
    i = 0
    while size < target:
        d = docs[i % len(docs)]
        if parts:
            size += 2
        parts.append(d)
        size += len(d.encode("utf-8"))
        i += 1
    return "\n\n".join(parts)


def cmd_split(args: argparse.Namespace) -> int:
    from llama_index.core.node_parser import TokenTextSplitter

    docs = read_corpus(args.corpus)
    text = build_text(docs, int(args.target_mb * 1e6))
    nbytes = len(text.encode("utf-8"))
    enc = cl100k()
    splitter = TokenTextSplitter(chunk_size=256, chunk_overlap=25)

    def bench(name: str, f, extra: Dict[str, Any]) -> None:
        runs = []
        items = 0
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            items = f()
            runs.append(time.perf_counter() - start)
        best = min(runs)
        out = {
            "bench": name,
            "bytes": nbytes,
            "best_s": best,
            "runs_s": runs,
            "mb_per_s": nbytes / best / 1e6,
            "items": items,
            "peak_rss_kb": peak_rss_kb(),
            "impl": "llama-index-core",
        }
        out.update(extra)
        print(json.dumps(out), flush=True)

    bench(
        "split_text",
        lambda: len(splitter.split_text(text)),
        {"chunk_size": 256, "chunk_overlap": 25},
    )
    bench("encode", lambda: len(enc.encode_ordinary(text)), {})
    return 0


def read_jsonl(path: str) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            key = obj.get("mode") or obj.get("bench")
            if key:
                out[key] = obj
    return out


def fmt_s(x: Optional[float]) -> str:
    if x is None:
        return "—"
    return f"{x:.3f}" if x >= 0.01 else f"{x:.5f}"


def fmt_mib(kb: Optional[int]) -> str:
    return "—" if kb is None else f"{kb / 1024:.0f}"


def fmt_ratio(a: Optional[float], b: Optional[float]) -> str:
    if a is None or b is None or b <= 0:
        return "—"
    r = a / b
    return f"{r:.0f}×" if r >= 100 else f"{r:.1f}×"


def fmt_int(x: Optional[int]) -> str:
    return "—" if x is None else f"{x:,}"


def growth(o: Dict[str, Any]) -> Optional[int]:
    """Peak RSS above the baseline measured after loading (what synthesis added)."""
    if o.get("peak_rss_kb") is None or o.get("load_rss_kb") is None:
        return None
    return o["peak_rss_kb"] - o["load_rss_kb"]


def cmd_table(args: argparse.Namespace) -> int:
    ref = read_jsonl(args.reference)
    sk = read_jsonl(args.synthkit)
    modes = [m for m in ref] + [m for m in sk if m not in ref]
    print(
        "| mode | n | reference s | synthkit s | speed-up (ref/sk) | reference peak RSS MiB"
        " | synthkit peak RSS MiB | RSS ratio (ref/sk) | RSS growth MiB ref / sk"
        " | calls ref / sk"
        " | prompt tokens ref / sk |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes: List[str] = []
    for m in modes:
        r = ref.get(m, {})
        s = sk.get(m, {})
        n = r.get("n", s.get("n"))
        print(
            f"| {m} | {fmt_int(n)} | {fmt_s(r.get('best_s'))} | {fmt_s(s.get('best_s'))}"
            f" | {fmt_ratio(r.get('best_s'), s.get('best_s'))}"
            f" | {fmt_mib(r.get('peak_rss_kb'))} | {fmt_mib(s.get('peak_rss_kb'))}"
            f" | {fmt_ratio(r.get('peak_rss_kb'), s.get('peak_rss_kb'))}"
            f" | {fmt_mib(growth(r))} / {fmt_mib(growth(s))}"
            f" | {fmt_int(r.get('calls'))} / {fmt_int(s.get('calls'))}"
            f" | {fmt_int(r.get('prompt_tokens'))} / {fmt_int(s.get('prompt_tokens'))} |"
        )
        for who, obj in (("reference", r), ("synthkit", s)):
            if obj.get("error"):
                notes.append(f"* {m} ({who}): {obj['error']}")
    load_r = [v.get("load_rss_kb") for v in ref.values() if v.get("load_rss_kb")]
    load_s = [v.get("load_rss_kb") for v in sk.values() if v.get("load_rss_kb")]
    if load_r or load_s:
        print()
        print(
            f"Baseline RSS before any synthesis (interpreter/binary + corpus + nodes):"
            f" reference {fmt_mib(max(load_r) if load_r else None)} MiB,"
            f" synthkit {fmt_mib(max(load_s) if load_s else None)} MiB."
        )
    if notes:
        print()
        print("Errors:")
        for n in notes:
            print(n)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("synth", help="one mode's benchmark (one JSON line)")
    s.add_argument("--corpus", required=True)
    s.add_argument("--mode", required=True)
    s.add_argument("--repeat", type=int, default=3)
    s.add_argument("--latency-ms", type=int, default=0)
    sp = sub.add_parser("split", help="splitter and tokenizer throughput")
    sp.add_argument("--corpus", required=True)
    sp.add_argument("--repeat", type=int, default=3)
    sp.add_argument("--target-mb", type=float, default=10.0)
    t = sub.add_parser("table", help="Markdown comparison of two JSON-lines files")
    t.add_argument("--reference", required=True)
    t.add_argument("--synthkit", required=True)
    args = p.parse_args(argv)
    if args.cmd == "synth":
        return cmd_synth(args)
    if args.cmd == "split":
        return cmd_split(args)
    return cmd_table(args)


if __name__ == "__main__":
    sys.exit(main())
