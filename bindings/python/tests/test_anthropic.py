"""Anthropic's Messages API against a real server: llama.cpp's llama-server with SmolLM2.

- ``Anthropic`` from ``llama-index-llms-anthropic`` (its SDK pointed at llama-server's
  ``/v1/messages``) as the ``llm`` of ``SynthkitSynthesizer``, in every mode and streamed;
- ``synthkit_rs.Synthesizer(api="anthropic")``: synthkit's own Messages API backend against
  the same server, in every mode, its budgets counted exactly by the server's
  ``/v1/messages/count_tokens``, and the key read from ``ANTHROPIC_API_KEY`` by default.

SmolLM2-135M answers nonsense at times; the tests check what synthkit guarantees (calls
made, usage reported, windows kept, streaming whole), not the answers' wording.
"""

from __future__ import annotations

from typing import Any, Iterator, List

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.llms.anthropic")

from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.llms.anthropic import Anthropic  # noqa: E402

import synthkit_rs  # noqa: E402
from llama_server import LlamaServer, start_smollm2  # noqa: E402
from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer  # noqa: E402

#: The first test may build llama-server (about 10 minutes on 2 cores) and fetch SmolLM2
#: inside the module's server fixture: more than the suite's 300 s per test.
pytestmark = pytest.mark.timeout(1800)

#: The server's context (one slot); the synthesizers use a smaller window, so that the
#: nodes take several calls.
SERVER_CTX = 2048
WINDOW = 700
NUM_OUTPUT = 32
QUERY = "How often is the mirror cleaned?"
CALLING_MODES = [m for m in synthkit_rs.MODES if m not in ("no_text", "context_only")]


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    s = start_smollm2(SERVER_CTX, "-np 1")
    yield s
    s.stop()


def texts() -> List[str]:
    facts = [
        "The mirror of the telescope is cleaned every six months.",
        "The dome is painted white to reflect the sun.",
        "The night crew checks the tracking motors each evening.",
        "Visitors may tour the building on Saturdays.",
    ]
    return [f"{f} " + "It is part of the observatory's routine upkeep. " * 12 for f in facts]


def nodes() -> List[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=f"n{i}", text=t)) for i, t in enumerate(texts())]


def anthropic_llm(server: LlamaServer) -> Anthropic:
    # A model name the integration knows (it looks the window up by name); llama-server
    # serves its one model whatever the name.
    return Anthropic(
        model="claude-haiku-4-5", base_url=server.root, api_key="none",
        max_tokens=NUM_OUTPUT, temperature=0.0,
    )


@pytest.mark.parametrize("mode", synthkit_rs.MODES)
def test_every_mode_through_llama_index_anthropic(server: LlamaServer, mode: str) -> None:
    synth = SynthkitSynthesizer(llm=anthropic_llm(server), response_mode=mode, context_window=WINDOW)
    assert synth.synthesizer.backend == "python"
    response = synth.synthesize(QUERY, nodes())
    usage = synth.last_response.usage
    if mode in CALLING_MODES:
        assert usage["calls"] >= 1
        # The usage is the server's (the SDK's ``usage.input_tokens``), each prompt within
        # the window the synthesizer was given.
        assert 0 < usage["prompt_tokens"] <= usage["calls"] * (WINDOW - NUM_OUTPUT)
        assert usage["completion_tokens"] <= usage["calls"] * NUM_OUTPUT
    else:
        assert usage["calls"] == 0
    assert len(response.source_nodes) == 4


def test_streaming_through_llama_index_anthropic(server: LlamaServer) -> None:
    synth = SynthkitSynthesizer(
        llm=anthropic_llm(server), response_mode="compact", context_window=WINDOW, streaming=True
    )
    response = synth.synthesize(QUERY, nodes())
    text = "".join(response.response_gen)
    assert text.strip()


class Calls:
    """An ``on_call`` hook keeping each call's usage."""

    def __init__(self) -> None:
        self.usage: List[Any] = []

    def call_started(self, prompt: Any) -> None:
        return None

    def call_finished(self, token: Any, reply: str, usage: Any) -> None:
        self.usage.append(usage)

    def call_failed(self, token: Any, message: str) -> None:
        self.usage.append({"failed": message})


@pytest.mark.parametrize("mode", synthkit_rs.MODES)
def test_every_mode_through_synthkit_anthropic_backend(
    server: LlamaServer, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local server needs no key; one set in the environment is sent, never shown.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    calls = Calls()
    synth = synthkit_rs.Synthesizer(
        mode, api="anthropic", base_url=server.root, context_window=WINDOW,
        num_output=NUM_OUTPUT, on_call=calls,
    )
    assert synth.backend == "anthropic"
    assert "secret" not in repr(synth)
    r = synth.synthesize(QUERY, texts())
    assert r.usage["calls"] == len(calls.usage)
    for u in calls.usage:
        # The server reported each call's usage, and the prompt it counted fits the
        # window: synthkit packed by the server's own counts (count_tokens).
        assert u["reported"] is True
        assert u["prompt_tokens"] <= WINDOW - NUM_OUTPUT
        assert u["completion_tokens"] <= NUM_OUTPUT
    if mode in CALLING_MODES:
        assert r.usage["calls"] >= 1


def test_llm_usage_counts_the_prompt_cache_too(server: LlamaServer) -> None:
    # The same prompts twice: llama-server serves the second from its prompt cache and
    # reports those tokens as cache_read_input_tokens, apart from input_tokens.
    calls = Calls()
    synth = synthkit_rs.Synthesizer(
        "compact", llm=anthropic_llm(server), context_window=WINDOW, num_output=NUM_OUTPUT,
        on_call=calls,
    )
    synth.synthesize(QUERY, texts())
    synth.synthesize(QUERY, texts())
    first, second = calls.usage[: len(calls.usage) // 2], calls.usage[len(calls.usage) // 2 :]
    assert [u["prompt_tokens"] for u in first] == [u["prompt_tokens"] for u in second]
    for u in calls.usage:
        # synthkit counted with cl100k_base; SmolLM2's tokenizer counts within 25% of it.
        assert abs(u["prompt_tokens"] - u["counted_prompt_tokens"]) <= 0.25 * u["counted_prompt_tokens"]


def test_adapter_direct_anthropic_path_dispatches_llm_events(server: LlamaServer) -> None:
    import llama_index.core.instrumentation as instrument
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    class Starts(BaseEventHandler):
        names: List[str] = []

        @classmethod
        def class_name(cls) -> str:
            return "StartsAnthropic"

        def handle(self, event: Any, **kwargs: Any) -> None:
            self.names.append(type(event).__name__)

    handler = Starts(names=[])
    root = instrument.get_dispatcher()
    root.add_event_handler(handler)
    try:
        # A window that holds two of the nodes: two calls or more.
        synth = SynthkitSynthesizer(
            base_url=server.root, api="anthropic", response_mode="compact",
            context_window=400, num_output=NUM_OUTPUT,
            evidence=False,
        )
        assert synth.synthesizer.backend == "anthropic"
        synth.synthesize(QUERY, nodes())
    finally:
        root.event_handlers.remove(handler)
    calls = synth.last_response.usage["calls"]
    assert calls >= 2
    assert handler.names.count("LLMChatStartEvent") == handler.names.count("LLMChatEndEvent") == calls


def test_anthropic_backend_streams_and_takes_v1_urls(server: LlamaServer) -> None:
    # A window that holds two of the nodes: the tree has two levels.
    synth = synthkit_rs.Synthesizer(
        "tree_summarize", api="anthropic", base_url=server.root + "/v1/",
        context_window=400, num_output=NUM_OUTPUT,
        evidence=False, on_unsupported="warn",
    )
    stream = synth.stream(QUERY, texts())
    text = "".join(stream)
    assert stream.response is not None and stream.response.response == text
    assert stream.response.usage["calls"] >= 2


def test_anthropic_backend_without_key_for_anthropic_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(synthkit_rs.InputError, match="ANTHROPIC_API_KEY"):
        synthkit_rs.Synthesizer(api="anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    monkeypatch.delenv("MY_ANTHROPIC", raising=False)
    with pytest.raises(synthkit_rs.InputError, match="MY_ANTHROPIC") as e:
        synthkit_rs.Synthesizer(api="anthropic", api_key_env="MY_ANTHROPIC")
    assert "sk-ant-x" not in str(e.value)
    with pytest.raises(synthkit_rs.InputError, match="chat=False"):
        synthkit_rs.Synthesizer(api="anthropic", chat=False)
    with pytest.raises(synthkit_rs.InputError, match="unknown api"):
        synthkit_rs.Synthesizer(api="gemini")


def test_an_llm_that_overstates_its_window_recovers_from_the_servers_context_error(
    server: LlamaServer,
) -> None:
    # LlamaIndex's Anthropic says 200,000 tokens; the server's slot holds SERVER_CTX. The
    # first prompt (every node, far over the slot) is refused with the server's "exceeds
    # the available context size", raised by the SDK: synthkit lowers its limit and packs
    # again, as on its own HTTP path.
    llm = anthropic_llm(server)
    assert llm.metadata.context_window >= 100_000
    many = [NodeWithScore(node=TextNode(id_=f"m{i}", text=t))
            for i, t in enumerate(texts() * 6)]
    synth = SynthkitSynthesizer(llm=llm, response_mode="compact", evidence=False)
    response = synth.synthesize(QUERY, many)
    assert str(response).strip()
    usage = synth.last_response.usage
    assert usage["calls"] >= 2
    assert usage["prompt_tokens"] <= usage["calls"] * SERVER_CTX
