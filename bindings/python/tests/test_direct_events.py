"""LlamaIndex's LLM events for the calls synthkit makes itself (the direct HTTP path).

On the direct path no LlamaIndex LLM is called, so synthkit dispatches, per model call,
a span (a child of the synthesize span) with the LLM start/end events carrying the
prompt, the reply and the token counts; on the ``llm`` path the LLM emits them itself and
synthkit adds none.
"""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.llms.openai_like")

from llama_index.core.instrumentation.events import BaseEvent  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402

import synthkit_rs  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from instrumentation_support import root_recording  # noqa: E402
from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer  # noqa: E402

QUERY = "How often is the mirror cleaned?"


@pytest.fixture()
def seen() -> Any:
    """Every event and every span, from the root dispatcher."""
    with root_recording() as recorded:
        yield recorded


def nodes(n: int = 6) -> List[NodeWithScore]:
    text = "The mirror is cleaned every six months by the night crew. " * 12
    return [NodeWithScore(node=TextNode(id_=f"n{i}", text=f"{i}: {text}")) for i in range(n)]


def named(events: List[BaseEvent], name: str) -> List[Any]:
    return [e for e in events if type(e).__name__ == name]


def llm(server: FakeOpenAI, chat: bool = True) -> OpenAILike:
    # A small window: the six nodes take several calls.
    return OpenAILike(
        api_base=server.base_url, model="fake-model", api_key="fake", is_chat_model=chat,
        context_window=600, max_tokens=64,
    )


@pytest.mark.parametrize("use_async", [False, True])
def test_direct_path_dispatches_chat_events_per_call(
    fake_server: FakeOpenAI, seen: Any, use_async: bool
) -> None:
    events, spans = seen
    synth = SynthkitSynthesizer(llm=llm(fake_server), response_mode="refine", direct=True)
    assert synth.synthesizer.backend == "openai"
    if use_async:
        asyncio.run(synth.asynthesize(QUERY, nodes()))
    else:
        synth.synthesize(QUERY, nodes())
    calls = len(fake_server.requests)
    assert calls > 1
    starts = named(events, "LLMChatStartEvent")
    ends = named(events, "LLMChatEndEvent")
    assert len(starts) == len(ends) == calls
    assert not named(events, "LLMCompletionStartEvent")
    # Each start carries the messages as sent, each end the reply and the server's counts
    # (the fake server counts words).
    sent = [r.body["messages"] for r in fake_server.requests]
    got = [[{"role": m.role.value, "content": m.content} for m in e.messages] for e in starts]
    assert sorted(map(str, got)) == sorted(map(str, sent))
    for end in ends:
        assert end.response.message.content == fake_server.answer
        kw = end.response.additional_kwargs
        assert kw["completion_tokens"] == len(str(fake_server.answer).split())
        assert kw["prompt_tokens"] > 0
        assert kw["total_tokens"] == kw["prompt_tokens"] + kw["completion_tokens"]
        assert end.response.raw["usage"]["prompt_tokens"] == kw["prompt_tokens"]
    assert starts[0].model_dict["model"] == "fake-model"
    # Every call is a span of its own, a child of the synthesize span, and its events
    # belong to it.
    synth_span = named(events, "SynthesizeStartEvent")[0].span_id
    parents = {s.id_: s.parent_id for s in spans.completed_spans}
    call_spans = {e.span_id for e in starts}
    assert len(call_spans) == calls
    assert all(parents[s] == synth_span for s in call_spans)
    assert {e.span_id for e in ends} == call_spans


def test_direct_completion_model_gets_completion_events(fake_server: FakeOpenAI, seen: Any) -> None:
    events, _ = seen
    synth = SynthkitSynthesizer(llm=llm(fake_server, chat=False), response_mode="compact", direct=True)
    synth.synthesize(QUERY, nodes())
    calls = len(fake_server.requests)
    starts = named(events, "LLMCompletionStartEvent")
    ends = named(events, "LLMCompletionEndEvent")
    assert len(starts) == len(ends) == calls >= 1
    assert {e.prompt for e in starts} == {r.prompt for r in fake_server.requests}
    assert all(e.response.text == fake_server.answer for e in ends)
    assert not named(events, "LLMChatStartEvent")


def test_streamed_direct_call_reports_the_whole_reply(fake_server: FakeOpenAI, seen: Any) -> None:
    events, _ = seen
    synth = SynthkitSynthesizer(llm=llm(fake_server), response_mode="compact", direct=True, streaming=True)
    response = synth.synthesize(QUERY, nodes(2))
    text = "".join(response.response_gen)
    ends = named(events, "LLMChatEndEvent")
    assert len(ends) == len(fake_server.requests)
    assert ends[-1].response.message.content == text


def test_llm_path_events_are_not_doubled(fake_server: FakeOpenAI, seen: Any) -> None:
    events, _ = seen
    synth = SynthkitSynthesizer(llm=llm(fake_server), response_mode="refine")
    assert synth.synthesizer.backend == "python"
    synth.synthesize(QUERY, nodes())
    calls = len(fake_server.requests)
    assert len(named(events, "LLMChatStartEvent")) == calls
    assert len(named(events, "LLMChatEndEvent")) == calls


def test_failed_call_drops_its_span(seen: Any) -> None:
    events, spans = seen
    with FakeOpenAI(status=400) as server:
        synth = SynthkitSynthesizer(llm=llm(server), response_mode="compact", direct=True)
        with pytest.raises(synthkit_rs.ModelError):
            synth.synthesize(QUERY, nodes(1))
    starts = named(events, "LLMChatStartEvent")
    assert len(starts) == 1 and not named(events, "LLMChatEndEvent")
    dropped = [s for s in spans.dropped_spans if s.id_ == starts[0].span_id]
    assert len(dropped) == 1


def test_on_call_hook_for_plain_users(fake_server: FakeOpenAI) -> None:
    seen: List[Any] = []

    class Hook:
        def call_started(self, prompt: Any) -> int:
            seen.append(("start", prompt))
            return len(seen)

        def call_finished(self, token: int, reply: str, usage: Any) -> None:
            seen.append(("end", token, reply, usage))

        def call_failed(self, token: int, message: str) -> None:
            seen.append(("failed", token, message))

    synth = synthkit_rs.Synthesizer(base_url=fake_server.base_url, on_call=Hook())
    synth.synthesize(QUERY, ["The mirror is cleaned every six months."])
    assert [s[0] for s in seen] == ["start", "end"]
    assert seen[0][1][-1][0] == "user" and QUERY in seen[0][1][-1][1]
    assert seen[1][1] == 1 and seen[1][2] == fake_server.answer
    assert seen[1][3]["reported"] is True
    with pytest.raises(synthkit_rs.InputError, match="call_finished"):
        synthkit_rs.Synthesizer(base_url=fake_server.base_url, on_call=object())
