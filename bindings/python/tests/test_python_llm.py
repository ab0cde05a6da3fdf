"""``llm=``: synthkit's model implemented over a LlamaIndex LLM or a Python callable."""

from __future__ import annotations

import asyncio
from typing import Any, List, Sequence

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.llms.openai_like")

import llama_index.core  # noqa: E402
from llama_index.core.base.llms.types import (  # noqa: E402
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM, MockLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.core.utils import get_tokenizer  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402
from pydantic import Field  # noqa: E402

import synthkit_rs  # noqa: E402
from instrumentation_support import root_recording  # noqa: E402
from fake_openai import DEFAULT_ANSWER, FakeOpenAI  # noqa: E402
from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer  # noqa: E402

QUERY = "How often is the mirror cleaned?"
#: LlamaIndex's default tokenizer: tiktoken's cl100k_base, from LlamaIndex's own cache.
CL100K = get_tokenizer()


def nodes(n: int = 3, words: int = 12) -> List[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=f"Fact {i}: " + " ".join(["mirror"] * words)), score=1.0)
        for i in range(n)
    ]


class RecordingMock(MockLLM):
    """LlamaIndex's MockLLM ("text text ..."), recording each prompt and method."""

    prompts: List[str] = Field(default_factory=list)
    methods: List[str] = Field(default_factory=list)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        self.methods.append("complete")
        return super().complete(prompt, formatted=formatted, **kwargs)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.methods.append("acomplete")
        return await super().acomplete(prompt, formatted=formatted, **kwargs)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        self.prompts.append(prompt)
        self.methods.append("stream_complete")
        return super().stream_complete(prompt, formatted=formatted, **kwargs)


class SmallWindow(CustomLLM):
    """A completion LLM with a small window that records every prompt it receives."""

    window: int = 320
    output: int = 40
    prompts: List[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=self.window, num_output=self.output, model_name="small")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text="a short answer")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        self.prompts.append(prompt)
        yield CompletionResponse(text="a short answer", delta="a short answer")


class Echo(CustomLLM):
    """Answers "ok" from both its blocking and its async methods (each instrumented once)."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=2048, num_output=32, model_name="echo")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="ok")

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="ok")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield CompletionResponse(text="ok", delta="ok")


EXPECTED_CALLS = {
    "compact": 1,
    "refine": 3,
    "tree_summarize": 1,
    "simple_summarize": 1,
    "accumulate": 3,
    "compact_accumulate": 1,
    "generation": 1,
    "no_text": 0,
    "context_only": 0,
}


@pytest.mark.parametrize("mode", sorted(EXPECTED_CALLS))
def test_every_mode_through_mock_llm(mode: str) -> None:
    llm = RecordingMock(max_tokens=4)
    synth = SynthkitSynthesizer(llm=llm, response_mode=mode, evidence=False)
    assert synth.synthesizer.backend == "python"
    resp = synth.synthesize(QUERY, nodes())
    assert len(llm.prompts) == EXPECTED_CALLS[mode]
    assert set(llm.methods) <= {"complete"}
    if EXPECTED_CALLS[mode]:
        assert "text text text text" in str(resp)
        assert synth.last_response is not None and synth.last_response.usage["calls"] == len(llm.prompts)
    # The async API calls the LLM's async methods, the same number of times.
    llm.prompts.clear()
    llm.methods.clear()
    aresp = asyncio.run(synth.asynthesize(QUERY, nodes()))
    assert str(aresp) == str(resp)
    assert llm.methods.count("acomplete") == EXPECTED_CALLS[mode]


def test_streaming_through_mock_llm() -> None:
    llm = RecordingMock(max_tokens=5)
    synth = SynthkitSynthesizer(llm=llm, response_mode="refine", streaming=True, evidence=False)
    resp = synth.synthesize(QUERY, nodes())
    deltas = list(resp.response_gen)
    # Refine's last step holds back its first five words (to read whether the reply only
    # talks about the answer so far); this five-word reply comes as one delta.
    assert "".join(deltas) == "text text text text text" and len(deltas) >= 1
    assert llm.methods == ["complete", "complete", "stream_complete"]

    async def main() -> str:
        aresp = await synth.asynthesize(QUERY, nodes())
        return "".join([d async for d in aresp.async_response_gen()])

    llm.methods.clear()
    assert asyncio.run(main()) == "text text text text text"
    assert llm.methods.count("stream_complete") == 1


def openai_like(server: FakeOpenAI, **kwargs: Any) -> OpenAILike:
    opts: dict = dict(api_base=server.base_url, model="fake-model", api_key="fake", is_chat_model=True, context_window=4096, max_tokens=100)
    opts.update(kwargs)
    return OpenAILike(**opts)


@pytest.mark.parametrize("direct", [False, True])
def test_openai_like_python_path_and_direct_path(fake_server: FakeOpenAI, direct: bool) -> None:
    synth = SynthkitSynthesizer(llm=openai_like(fake_server), direct=direct, response_mode="tree_summarize", evidence=False,
                                on_unsupported="warn")
    assert synth.synthesizer.backend == ("openai" if direct else "python")
    assert str(synth.synthesize(QUERY, nodes())) == DEFAULT_ANSWER
    assert str(asyncio.run(synth.asynthesize(QUERY, nodes()))) == DEFAULT_ANSWER
    assert fake_server.calls == 2
    body = fake_server.requests[0].body
    assert body["model"] == "fake-model" and body["max_tokens"] == 100
    assert "Fact 0" in fake_server.requests[0].prompt
    stream = SynthkitSynthesizer(llm=openai_like(fake_server), direct=direct, streaming=True, evidence=False,
                                 on_unsupported="warn")
    assert "".join(stream.synthesize(QUERY, nodes()).response_gen) == DEFAULT_ANSWER
    assert fake_server.requests[-1].stream


def test_usage_reported_by_the_llm_is_used(fake_server: FakeOpenAI) -> None:
    synth = SynthkitSynthesizer(llm=openai_like(fake_server), evidence=False)
    synth.synthesize(QUERY, nodes())
    usage = synth.last_response.usage  # type: ignore[union-attr]
    # The fake server reports word counts: prompt tokens as the LLM reported them.
    assert usage["prompt_tokens"] == len(fake_server.requests[0].prompt.split())


@pytest.fixture()
def spans() -> Any:
    """Every event and every finished span, from the root dispatcher."""
    with root_recording() as recorded:
        yield recorded


@pytest.mark.parametrize("use_async", [False, True])
def test_instrumentation_sees_the_llm_events(spans: Any, use_async: bool) -> None:
    events, span_handler = spans
    synth = SynthkitSynthesizer(llm=Echo(), response_mode="refine", evidence=False)
    if use_async:
        asyncio.run(synth.asynthesize(QUERY, nodes()))
    else:
        synth.synthesize(QUERY, nodes())
    names = [type(e).__name__ for e in events]
    assert names.count("LLMCompletionStartEvent") == 3
    assert names.count("LLMCompletionEndEvent") == 3
    start = next(e for e in events if type(e).__name__ == "SynthesizeStartEvent")
    llm_events = [e for e in events if type(e).__name__.startswith("LLMCompletion")]
    # The LLM calls' spans are children of the synthesize span: the caller's contextvars
    # reach the calls, on worker threads and on the event loop alike.
    parents = {s.id_: s.parent_id for s in span_handler.completed_spans}
    assert start.span_id and all(parents[e.span_id] == start.span_id for e in llm_events)


@pytest.mark.parametrize("mode", ["compact", "refine", "tree_summarize", "simple_summarize", "accumulate", "compact_accumulate"])
def test_window_from_metadata_is_never_exceeded(mode: str) -> None:
    llm = SmallWindow()
    synth = SynthkitSynthesizer(llm=llm, response_mode=mode, evidence=False)
    assert (synth.synthesizer.context_window, synth.synthesizer.num_output) == (320, 40)
    texts = [f"Note {i}: " + " ".join(f"w{i}x{j}" for j in range(70)) for i in range(8)]
    synth.synthesize(QUERY, [NodeWithScore(node=TextNode(id_=str(i), text=t)) for i, t in enumerate(texts)])
    # simple_summarize truncates to one call by design; the others need several.
    assert len(llm.prompts) >= (1 if mode == "simple_summarize" else 3)
    sizes = [len(CL100K(p)) for p in llm.prompts]
    assert max(sizes) + 40 <= 320, sizes


def test_llama_index_tokenizer_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Settings.tokenizer set (one token per character here), prompts fit by it."""
    monkeypatch.setattr(llama_index.core, "global_tokenizer", list)
    llm = SmallWindow(window=900, output=100)
    SynthkitSynthesizer(llm=llm, response_mode="compact", evidence=False).synthesize(QUERY, nodes(n=4, words=40))
    assert len(llm.prompts) >= 2
    assert max(len(p) for p in llm.prompts) + 100 <= 900


def test_plain_callable_gets_messages_or_prompt() -> None:
    seen: List[Any] = []

    def chat(messages: Sequence[dict]) -> str:
        seen.append(messages)
        return "from a function"

    r = synthkit_rs.Synthesizer("compact", llm=chat, context_window=2048, num_output=64, evidence=False).synthesize(QUERY, ["The mirror is cleaned yearly."])
    assert r.response == "from a function"
    assert [m["role"] for m in seen[0]] == ["system", "user"]
    assert "cleaned yearly" in seen[0][-1]["content"]

    def complete(prompt: str) -> str:
        seen.append(prompt)
        return "from a prompt"

    synth = synthkit_rs.Synthesizer("compact", llm=complete, chat=False, evidence=False)
    assert synth.backend == "python" and synth.model == "complete"
    assert synth.synthesize(QUERY, ["x"]).response == "from a prompt"
    assert isinstance(seen[-1], str) and QUERY in seen[-1]


def test_coroutine_and_async_iterator_callables() -> None:
    async def answer(messages: Any) -> str:
        await asyncio.sleep(0)
        return "awaited"

    async def deltas(messages: Any) -> Any:
        for d in ("one ", "two ", "three"):
            yield d

    # The blocking API runs coroutine functions on synthkit's own event loop.
    async def ask() -> str:
        return (await synthkit_rs.Synthesizer("compact", llm=answer, evidence=False).asynthesize(QUERY, ["x"])).response

    assert synthkit_rs.Synthesizer("compact", llm=answer, evidence=False).synthesize(QUERY, ["x"]).response == "awaited"
    assert asyncio.run(ask()) == "awaited"
    streamed = synthkit_rs.Synthesizer("compact", llm=deltas, evidence=False).stream(QUERY, ["x"])
    assert list(streamed) == ["one ", "two ", "three"]
    assert synthkit_rs.Synthesizer("compact", llm=deltas, evidence=False, on_unsupported="warn").synthesize(QUERY, ["x"]).response == "one two three"


def test_options_that_do_not_apply_are_errors(fake_server: FakeOpenAI) -> None:
    with pytest.raises(synthkit_rs.InputError, match="base_url does not apply with llm="):
        synthkit_rs.Synthesizer(llm=lambda m: "x", base_url=fake_server.base_url)
    with pytest.raises(synthkit_rs.InputError, match="must be a LlamaIndex LLM or a callable"):
        synthkit_rs.Synthesizer(llm=42)
    with pytest.raises(synthkit_rs.InputError, match="retry_on takes exception classes"):
        synthkit_rs.Synthesizer(llm=lambda m: "x", retry_on=(int,))
    with pytest.raises(synthkit_rs.InputError, match="temperature= applies to the direct HTTP path"):
        SynthkitSynthesizer(llm=MockLLM(), temperature=0.2)
    with pytest.raises(synthkit_rs.InputError, match="direct=True needs an OpenAI-compatible llm"):
        SynthkitSynthesizer(llm=MockLLM(), direct=True)
    with pytest.raises(synthkit_rs.InputError, match="reuse_hints does not apply with llm="):
        synthkit_rs.Synthesizer(llm=lambda m: "x", reuse_hints="none")
    with pytest.raises(synthkit_rs.InputError, match="reuse_hints='none' applies to the direct HTTP path"):
        SynthkitSynthesizer(llm=MockLLM(), reuse_hints="none")


def test_extractive_only_without_llm_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_index.core.settings import Settings

    monkeypatch.setattr(Settings, "_llm", None)
    with pytest.warns(UserWarning, match="offline extractive backend answers"):
        synth = SynthkitSynthesizer()
    assert synth.synthesizer.backend == "extractive"
    monkeypatch.setattr(Settings, "_llm", MockLLM(max_tokens=2))
    assert SynthkitSynthesizer().synthesizer.backend == "python"


def test_llm_without_async_methods_is_called_off_the_loop() -> None:
    """An LLM whose async methods raise NotImplementedError: its blocking ones, on threads."""
    import threading

    class SyncOnly(SmallWindow):
        threads: List[str] = Field(default_factory=list)

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            self.threads.append(threading.current_thread().name)
            return super().complete(prompt, formatted=formatted, **kwargs)

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
            self.threads.append(threading.current_thread().name)
            return super().stream_complete(prompt, formatted=formatted, **kwargs)

        async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            raise NotImplementedError

        async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            raise NotImplementedError

    llm = SyncOnly(window=2048)
    synth = synthkit_rs.Synthesizer("compact", llm=llm, evidence=False)

    async def main() -> List[str]:
        plain = (await synth.asynthesize(QUERY, ["x"])).response
        streamed = [d async for d in synth.stream(QUERY, ["x"])]
        return [plain, "".join(streamed)]

    assert asyncio.run(main()) == ["a short answer", "a short answer"]
    assert len(llm.threads) == 2 and "MainThread" not in llm.threads


class CountsMore(SmallWindow):
    """Reports 60 more prompt tokens than cl100k_base counts, as a model whose tokenizer
    differs would."""

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        usage = {"prompt_tokens": len(CL100K(prompt)) + 60, "completion_tokens": 3}
        return CompletionResponse(text="a short answer", raw={"usage": usage})


def test_usage_the_llm_reports_calibrates_the_budget() -> None:
    texts = [f"Note {i}: " + " ".join(f"w{i}x{j}" for j in range(70)) for i in range(8)]
    items = [NodeWithScore(node=TextNode(id_=str(i), text=t)) for i, t in enumerate(texts)]
    plain, calibrated = SmallWindow(), CountsMore()
    SynthkitSynthesizer(llm=plain, response_mode="tree_summarize", evidence=False).synthesize(QUERY, items)
    synth = SynthkitSynthesizer(llm=calibrated, response_mode="tree_summarize", evidence=False)
    synth.synthesize(QUERY, items)
    # After the first reply, prompts leave room for the 60 tokens the LLM counts on top.
    assert max(len(CL100K(p)) for p in calibrated.prompts[1:]) + 60 + 40 <= 320
    assert max(len(CL100K(p)) for p in plain.prompts) + 60 + 40 > 320
    assert synth.last_response is not None and synth.last_response.usage["prompt_tokens"] == sum(
        len(CL100K(p)) + 60 for p in calibrated.prompts
    )


def test_llama_index_only_arguments_are_accepted_or_refused_clearly() -> None:
    llm = MockLLM(max_tokens=2)
    assert str(SynthkitSynthesizer(llm=llm, use_async=True, evidence=False).synthesize(QUERY, nodes())) == "text text"
    with pytest.warns(UserWarning, match="prints no progress"):
        SynthkitSynthesizer(llm=llm, verbose=True)
    # output_cls and structured_answer_filtering: tests/test_structured.py.
    with pytest.raises(synthkit_rs.InputError, match="program_factory is not supported"):
        SynthkitSynthesizer(llm=llm, program_factory=print)


def test_max_prompt_tokens_packs_smaller_prompts_into_more_calls() -> None:
    whole = RecordingMock(max_tokens=4)
    SynthkitSynthesizer(llm=whole, response_mode="compact", evidence=False).synthesize(QUERY, nodes(8, 60))
    limited = RecordingMock(max_tokens=4)
    synth = SynthkitSynthesizer(llm=limited, response_mode="compact", max_prompt_tokens=200, evidence=False)
    synth.synthesize(QUERY, nodes(8, 60))
    assert len(limited.prompts) > len(whole.prompts) == 1
    assert max(len(CL100K(p)) for p in limited.prompts) <= 200
    with pytest.raises(synthkit_rs.InputError, match="max_prompt_tokens"):
        synthkit_rs.Synthesizer(llm=whole, max_prompt_tokens=0)
