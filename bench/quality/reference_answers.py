#!/usr/bin/env python3
"""The reference side by side (issue 30, item 3): LlamaIndex's response synthesizer on the
benchmark cases, written as ANSWERS.jsonl for `synthkit eval CASES.jsonl --answers FILE`.

For each case of CASES.jsonl that gives `nodes` (cases with `paths` are skipped) and each
mode, runs llama-index-core's ``get_response_synthesizer(llm=..., response_mode=MODE)``
with an OpenAI-compatible LLM (``OpenAILike``, a chat model) pointed at a llama-server, and
writes one line per (case, mode):

    {"id", "mode", "system": "llamaindex-0.14.25", "answer", "error", "abstained": null,
     "calls", "prompt_tokens", "completion_tokens", "truncated_calls", "wall_ms", "prompts"}

Calls, tokens and prompts come from llama-index's instrumentation events (one
LLMChatEndEvent per model call): the tokens are the server's own `usage` counts, the prompts
the messages sent (one string per call; several messages are joined as "role: content"
blocks). `truncated_calls` counts replies that stopped at the output limit
(finish_reason "length").

The LLM is given the same context window and output budget as synthkit (`--context-window`,
`--num-output`): llama-index sizes its packing from the LLM's metadata with its default
tokenizer (tiktoken cl100k_base), as a user who does not configure one gets.

Resumable: (id, mode) pairs already in the output file are skipped (with --retry-errors,
those that failed are run again and their new line supersedes the old one).

    python bench/quality/reference_answers.py CASES.jsonl --base-url http://127.0.0.1:18123/v1 \
        --context-window 2048 --num-output 256 --modes compact,refine,tree_summarize -o ref.jsonl

Needs a Python with llama-index-core==0.14.25 and llama-index-llms-openai-like (run.sh makes
a virtual environment outside the repository).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Set, Tuple

LLAMA_INDEX_VERSION = "0.14.25"


def log(msg: str) -> None:
    print(f"reference_answers: {msg}", file=sys.stderr, flush=True)


def read_cases(path: str) -> List[dict]:
    cases = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                cases.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"reference_answers: {path}:{n}: not JSON ({e})")
    return cases


def done_pairs(path: str, retry_errors: bool) -> Set[Tuple[str, str]]:
    """The (id, mode) pairs already answered. Rewrites the file without lines cut short by
    a kill and, with retry_errors, without the failed pairs (so no pair appears twice)."""
    done: Set[Tuple[str, str]] = set()
    if not os.path.exists(path):
        return done
    keep: List[str] = []
    dropped = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                o = json.loads(line)
            except json.JSONDecodeError:
                dropped += 1  # a line cut short by a kill: run that pair again
                continue
            if retry_errors and o.get("error"):
                dropped += 1
                continue
            key = (o.get("id"), o.get("mode"))
            if key in done:
                dropped += 1
                continue
            done.add(key)
            keep.append(json.dumps(o, ensure_ascii=False) + "\n")
    if dropped:
        tmp = path + ".part"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(keep)
        os.replace(tmp, path)
        log(f"dropped {dropped} cut-short, failed or repeated lines from {path}")
    return done


def usage_of(raw: Any) -> Tuple[int, int, Optional[str]]:
    """(prompt tokens, completion tokens, finish reason) from an OpenAI chat response
    (the openai client's object or a dict)."""
    if raw is None:
        return 0, 0, None
    get = (lambda o, k: o.get(k) if isinstance(o, dict) else getattr(o, k, None))
    usage = get(raw, "usage")
    pt = (get(usage, "prompt_tokens") or 0) if usage is not None else 0
    ct = (get(usage, "completion_tokens") or 0) if usage is not None else 0
    choices = get(raw, "choices") or []
    finish = get(choices[0], "finish_reason") if choices else None
    return int(pt), int(ct), finish


class Recorder:
    """Collects each model call of the running synthesis from llama-index's events."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.truncated = 0
        self.prompts: List[str] = []

    def chat_end(self, messages: Any, response: Any) -> None:
        self.calls += 1
        parts = []
        for m in messages or []:
            role = getattr(getattr(m, "role", None), "value", None) or str(getattr(m, "role", ""))
            parts.append((role, m.content or ""))
        if len(parts) == 1:
            self.prompts.append(parts[0][1])
        else:
            self.prompts.append("\n\n".join(f"{r}: {c}" for r, c in parts))
        pt, ct, finish = usage_of(getattr(response, "raw", None))
        self.prompt_tokens += pt
        self.completion_tokens += ct
        if finish == "length":
            self.truncated += 1

    def completion_end(self, prompt: str, response: Any) -> None:
        self.calls += 1
        self.prompts.append(prompt)
        pt, ct, finish = usage_of(getattr(response, "raw", None))
        self.prompt_tokens += pt
        self.completion_tokens += ct
        if finish == "length":
            self.truncated += 1


def install_recorder(rec: Recorder) -> None:
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events.llm import (
        LLMChatEndEvent,
        LLMCompletionEndEvent,
    )

    class Handler(BaseEventHandler):
        @classmethod
        def class_name(cls) -> str:
            return "SynthkitQualityRecorder"

        def handle(self, event: Any, **kwargs: Any) -> None:
            if isinstance(event, LLMChatEndEvent):
                rec.chat_end(event.messages, event.response)
            elif isinstance(event, LLMCompletionEndEvent):
                rec.completion_end(event.prompt, event.response)

    get_dispatcher().add_event_handler(Handler())


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", help="CASES.jsonl (make_cases.py)")
    ap.add_argument("--base-url", required=True, help="the server's OpenAI API, e.g. http://127.0.0.1:18123/v1")
    ap.add_argument("--model", default="local", help="model name sent (llama-server ignores it)")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"),
                    help="default: $OPENAI_API_KEY, else 'none' (never written anywhere)")
    ap.add_argument("--context-window", type=int, required=True)
    ap.add_argument("--num-output", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--modes", default="compact,refine,tree_summarize")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model call (default 900)")
    ap.add_argument("--max-retries", type=int, default=0,
                    help="the openai client's retries per call (default 0: a failure is recorded)")
    ap.add_argument("--ids", default="", help="only these case ids (comma-separated)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N cases (0: all)")
    ap.add_argument("--system", default=f"llamaindex-{LLAMA_INDEX_VERSION}")
    ap.add_argument("--use-async", action="store_true",
                    help="use_async=True: the fan-out modes' calls (tree_summarize, accumulate) at once")
    ap.add_argument("--retry-errors", action="store_true", help="run failed (id, mode) pairs again")
    ap.add_argument("-o", "--output", required=True, help="ANSWERS.jsonl (appended to)")
    args = ap.parse_args(argv)

    import importlib.metadata as md

    have = md.version("llama-index-core")
    if have != LLAMA_INDEX_VERSION:
        log(f"warning: llama-index-core {have} is installed, the reference is {LLAMA_INDEX_VERSION}")
    from llama_index.core import Settings, get_response_synthesizer
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model=args.model,
        api_base=args.base_url,
        api_key=args.api_key,
        is_chat_model=True,
        is_function_calling_model=False,
        context_window=args.context_window,
        max_tokens=args.num_output,
        temperature=args.temperature,
        timeout=args.timeout,
        max_retries=args.max_retries,
    )
    Settings.llm = llm  # modes built without an llm argument must not reach OpenAI
    rec = Recorder()
    install_recorder(rec)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    cases = [c for c in read_cases(args.cases) if isinstance(c.get("nodes"), list)]
    if args.ids:
        wanted = set(args.ids.split(","))
        cases = [c for c in cases if c.get("id") in wanted]
    if args.limit > 0:
        cases = cases[: args.limit]
    done = done_pairs(args.output, args.retry_errors)
    synths = {m: get_response_synthesizer(llm=llm, response_mode=m, use_async=args.use_async)
              for m in modes}
    todo = [(c, m) for c in cases for m in modes if (c["id"], m) not in done]
    log(f"{len(cases)} cases x {len(modes)} modes; {len(todo)} to run, {len(cases) * len(modes) - len(todo)} already in {args.output}")

    with open(args.output, "a", encoding="utf-8") as out:
        for n, (case, mode) in enumerate(todo, 1):
            nodes = []
            for i, nd in enumerate(case["nodes"]):
                if isinstance(nd, str):
                    nd = {"text": nd}
                nodes.append(NodeWithScore(
                    node=TextNode(id_=str(nd.get("id") or nd.get("id_") or i + 1),
                                  text=nd.get("text", ""), metadata=nd.get("metadata") or {}),
                    score=nd.get("score")))
            rec.reset()
            error: Optional[str] = None
            answer = ""
            t0 = time.monotonic()
            try:
                resp = synths[mode].synthesize(case["query"], nodes)
                answer = str(getattr(resp, "response", None) or "")
            except Exception as e:  # the run failed: recorded, counts as wrong
                error = f"{type(e).__name__}: {e}"[:2000]
            wall_ms = int((time.monotonic() - t0) * 1000)
            row: Dict[str, Any] = {
                "id": case["id"], "mode": mode, "system": args.system, "answer": answer,
                "error": error, "abstained": None, "calls": rec.calls,
                "prompt_tokens": rec.prompt_tokens, "completion_tokens": rec.completion_tokens,
                "truncated_calls": rec.truncated, "wall_ms": wall_ms, "prompts": rec.prompts,
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            status = f"error {error[:80]!r}" if error else f"{len(answer)} chars"
            log(f"[{n}/{len(todo)}] {case['id']} {mode}: {rec.calls} calls, "
                f"{rec.prompt_tokens}+{rec.completion_tokens} tokens, {wall_ms} ms, {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
