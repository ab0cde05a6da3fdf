"""synthkit's prompt counts against the server's, over Anthropic's Messages API.

Starts llama.cpp's llama-server with SmolLM2-135M-Instruct (``tests/llama_server.py``:
``scripts/llama-server.sh``, built once) and synthesizes a few bench-corpus nodes in compact
and tree_summarize (window 1024, output 32), through:

- ``synthkit_rs.Synthesizer(api="anthropic")``: synthkit's own Messages API client, which
  counts prompts with the server's ``/v1/messages/count_tokens``;
- ``synthkit_rs.Synthesizer(llm=Anthropic(...))``: LlamaIndex's ``Anthropic`` LLM (SDK 0.x),
  counted with cl100k_base and calibrated from the usage the LLM reports.

For every call, an ``on_call`` hook records synthkit's count of the prompt
(``counted_prompt_tokens``) and the server's ``input_tokens``. Prints a Markdown table.

    python bench/anthropic_counts.py [--corpus PATH] [--n 12]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from llama_index.llms.anthropic import Anthropic  # noqa: E402

import synthkit_rs  # noqa: E402
from llama_server import start_smollm2  # noqa: E402
from _markdown import print_table  # noqa: E402

QUERY = "What does the text say about iterables and exceptions?"
WINDOW = 1024
NUM_OUTPUT = 32


class Counts:
    """An ``on_call`` hook keeping synthkit's and the server's prompt counts."""

    def __init__(self) -> None:
        self.pairs: List[Dict[str, Any]] = []

    def call_started(self, prompt: Any) -> None:
        return None

    def call_finished(self, token: Any, reply: str, usage: Dict[str, Any]) -> None:
        self.pairs.append(usage)

    def call_failed(self, token: Any, message: str) -> None:
        raise RuntimeError(message)


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/work/shared/bench/corpus_n1000_s42.json")
    parser.add_argument("--n", type=int, default=12)
    args = parser.parse_args(argv)
    with open(args.corpus) as f:
        texts: List[str] = json.load(f)[: args.n]
    # Shorter chunks than the corpus's 256 tokens, so that several share a prompt.
    nodes = [{"id": f"n{i:05d}", "text": t[:600]} for i, t in enumerate(texts)]
    server = start_smollm2(2048, "-np 1")
    rows = []
    try:
        llm = Anthropic(
            model="claude-haiku-4-5", base_url=server.root, api_key="none",
            max_tokens=NUM_OUTPUT, temperature=0.0,
        )
        for path in ("api=anthropic", "llm=Anthropic"):
            for mode in ("compact", "tree_summarize"):
                counts = Counts()
                if path == "api=anthropic":
                    synth = synthkit_rs.Synthesizer(
                        mode, api="anthropic", base_url=server.root, context_window=WINDOW,
                        num_output=NUM_OUTPUT, on_call=counts,
                    )
                else:
                    synth = synthkit_rs.Synthesizer(
                        mode, llm=llm, context_window=WINDOW, num_output=NUM_OUTPUT, on_call=counts
                    )
                synth.synthesize(QUERY, nodes)
                ours = [u["counted_prompt_tokens"] for u in counts.pairs]
                theirs = [u["prompt_tokens"] for u in counts.pairs]
                exact = sum(1 for a, b in zip(ours, theirs) if a == b)
                rows.append((path, mode, len(ours), exact, ours, theirs))
    finally:
        server.stop()
    print(f"SmolLM2-135M-Instruct on llama-server, window {WINDOW}, output {NUM_OUTPUT}, {args.n} nodes\n")
    print_table(
        ["path", "mode", "calls", "synthkit = server", "synthkit's counts", "server's input_tokens"],
        [(path, mode, calls, f"{exact}/{calls}", ours, theirs) for path, mode, calls, exact, ours, theirs in rows],
    )


if __name__ == "__main__":
    main(sys.argv[1:])
