"""Side by side: LlamaIndex's own response synthesizer vs SynthkitSynthesizer's two paths.

One query over the bench corpus (N nodes from /work/shared/bench, ids n00000...), context
window 4096, num_output 256, overlap ratio 0.1, in compact and tree_summarize. All call the
same loopback OpenAI-compatible server (tests/fake_openai.py), which answers every call
instantly with the same 40-word text, given the same LlamaIndex ``OpenAILike`` LLM:

- LlamaIndex's ``get_response_synthesizer`` (and with ``use_async=True`` for tree_summarize);
- ``SynthkitSynthesizer(llm=llm)``: synthkit calls the LLM's own methods (the default);
- ``SynthkitSynthesizer(llm=llm, direct=True)``: synthkit calls the server itself over HTTP.

The time is each synthesizer's own work plus its HTTP calls to 127.0.0.1. A last line gives
LlamaIndex's time with an in-process instant ``CustomLLM`` (no HTTP at all), for reference.
An instrumentation event handler is attached throughout (as with Phoenix or Langfuse): the
``LLM events`` column counts the LLM start events it saw in the last run (on the direct
path synthkit dispatches them itself, one per call).

    python bench/compare.py [--corpus PATH] [--n 1000] [--repeat 3]

Prints a Markdown table: best-of-``repeat`` wall time of ``synthesize()``, model calls and
LLM start events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

from llama_index.core import get_response_synthesizer
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.indices.prompt_helper import PromptHelper
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.response_synthesizers import ResponseMode
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.llms.openai_like import OpenAILike

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from fake_openai import FakeOpenAI  # noqa: E402

import synthkit_rs  # noqa: E402
from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer  # noqa: E402
from _markdown import print_table  # noqa: E402

QUERY = "What does the text say about iterables and exceptions?"
WINDOW = 4096
NUM_OUTPUT = 256
OVERLAP = 0.1
ANSWER = (
    "answer lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud "
    "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat duis aute irure"
)


class InstantLLM(CustomLLM):
    """A LlamaIndex LLM that answers every prompt at once with the fixed answer."""

    calls: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=WINDOW, num_output=NUM_OUTPUT, model_name="instant")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        return CompletionResponse(text=ANSWER)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        self.calls += 1
        yield CompletionResponse(text=ANSWER, delta=ANSWER)


class CountLlmStarts(BaseEventHandler):
    """Counts LlamaIndex's LLM start events (chat and completion)."""

    starts: int = 0

    @classmethod
    def class_name(cls) -> str:
        return "CountLlmStarts"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if type(event).__name__ in ("LLMChatStartEvent", "LLMCompletionStartEvent"):
            self.starts += 1


class AsyncRun:
    """A synthesizer whose ``synthesize`` runs its ``asynthesize`` on one event loop.

    One loop for every run, as an application has: the ``llm`` keeps its async HTTP client
    between calls, and a client made on one loop cannot be used from the next
    (``asyncio.run`` per run would measure the OpenAI client's connection errors and
    retries instead).
    """

    def __init__(self, synth: Any) -> None:
        self._synth = synth
        self._loop = asyncio.new_event_loop()

    def synthesize(self, query: str, nodes: Any) -> Any:
        return self._loop.run_until_complete(self._synth.asynthesize(query, nodes))


class PlainRun:
    """synthkit's own Synthesizer, given the nodes as ``{"id", "text"}`` dicts."""

    def __init__(self, synth: Any) -> None:
        self._synth = synth

    def synthesize(self, query: str, nodes: Any) -> Any:
        items = [{"id": n.node.node_id, "text": n.node.get_content()} for n in nodes]
        return self._synth.synthesize(query, items)


def load_nodes(path: str, n: int) -> List[NodeWithScore]:
    with open(path) as f:
        texts: List[str] = json.load(f)[:n]
    return [NodeWithScore(node=TextNode(id_=f"n{i:05d}", text=t)) for i, t in enumerate(texts)]


def best_of(repeat: int, run: Callable[[], int], events: CountLlmStarts) -> Tuple[float, int, int]:
    """The best wall time of ``repeat`` runs, and the calls and LLM start events of the last one."""
    best = float("inf")
    calls = 0
    for _ in range(repeat):
        events.starts = 0
        start = time.perf_counter()
        calls = run()
        best = min(best, time.perf_counter() - start)
    return best, calls, events.starts


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/work/shared/bench/corpus_n1000_s42.json")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    nodes = load_nodes(args.corpus, args.n)
    helper = PromptHelper(context_window=WINDOW, num_output=NUM_OUTPUT, chunk_overlap_ratio=OVERLAP)
    rows: List[Dict[str, Any]] = []
    events = CountLlmStarts()
    get_dispatcher().add_event_handler(events)
    with FakeOpenAI(answer=ANSWER, report_usage=False) as server:
        llm = OpenAILike(
            api_base=server.base_url, model="fake-model", api_key="fake", is_chat_model=True,
            context_window=WINDOW, max_tokens=NUM_OUTPUT,
        )
        for mode in (ResponseMode.COMPACT, ResponseMode.TREE_SUMMARIZE):
            variants: List[Tuple[str, Any]] = [
                ("LlamaIndex get_response_synthesizer", get_response_synthesizer(llm=llm, response_mode=mode, prompt_helper=helper)),
            ]
            if mode == ResponseMode.TREE_SUMMARIZE:
                variants.append(
                    ("LlamaIndex get_response_synthesizer(use_async=True)", get_response_synthesizer(llm=llm, response_mode=mode, prompt_helper=helper, use_async=True))
                )
            variants.append(("SynthkitSynthesizer (llm path, default)", SynthkitSynthesizer(llm=llm, response_mode=mode, prompt_helper=helper)))
            variants.append(("SynthkitSynthesizer (llm path) asynthesize", AsyncRun(SynthkitSynthesizer(llm=llm, response_mode=mode, prompt_helper=helper))))
            variants.append(("SynthkitSynthesizer(direct=True)", SynthkitSynthesizer(llm=llm, response_mode=mode, prompt_helper=helper, direct=True)))
            # The same HTTP path without LlamaIndex around it (no spans, no events): what
            # dispatching the LLM events costs on the direct path.
            variants.append(("synthkit_rs.Synthesizer(base_url=...) (no events)", PlainRun(synthkit_rs.Synthesizer(
                mode.value, base_url=server.base_url, model="fake-model", context_window=WINDOW,
                num_output=NUM_OUTPUT, chunk_overlap_ratio=OVERLAP, api_key_env="FAKE_KEY"))))
            for name, synth in variants:
                def run(synth: Any = synth) -> int:
                    server.reset()
                    synth.synthesize(QUERY, nodes)
                    return server.calls

                secs, calls, starts = best_of(args.repeat, run, events)
                rows.append({"mode": mode.value, "synthesizer": name, "model": "loopback HTTP", "seconds": secs, "calls": calls, "events": starts})
            instant = InstantLLM()
            reference = get_response_synthesizer(llm=instant, response_mode=mode, prompt_helper=helper)

            def run_instant() -> int:
                instant.calls = 0
                reference.synthesize(QUERY, nodes)
                return instant.calls

            secs, calls, starts = best_of(args.repeat, run_instant, events)
            rows.append({"mode": mode.value, "synthesizer": "LlamaIndex get_response_synthesizer", "model": "in-process CustomLLM", "seconds": secs, "calls": calls, "events": starts})

    print(f"N={args.n} nodes, window {WINDOW}, num_output {NUM_OUTPUT}, overlap {OVERLAP}, best of {args.repeat}")
    print(f"synthkit {synthkit_rs.__version__}, Python {sys.version.split()[0]}\n")
    print_table(
        ["mode", "synthesizer", "model", "time", "calls", "LLM events"],
        [(r["mode"], r["synthesizer"], r["model"], f"{r['seconds']:.3f} s", r["calls"], r["events"]) for r in rows],
    )


if __name__ == "__main__":
    main(sys.argv[1:])
