"""``llm=``: exceptions, ``retry_on`` and cancellation of the calls in flight."""

from __future__ import annotations

import _thread
import asyncio
import threading
from typing import Any, List, Optional

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import (  # noqa: E402
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from pydantic import Field, PrivateAttr  # noqa: E402

import synthkit_rs  # noqa: E402
from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer  # noqa: E402

QUERY = "How often is the mirror cleaned?"
NODES = ["The mirror is cleaned every six months.", "The dome opens at dusk."]


class Overloaded(Exception):
    """A provider's rate-limit error."""


class Flaky(CustomLLM):
    """Raises ``errors`` in turn (an exception class, or None for a reply), then answers."""

    errors: List[Any] = Field(default_factory=list)
    calls: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=2048, num_output=32)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        if self.errors:
            error = self.errors.pop(0)
            if error is not None:
                raise error("the provider said no")
        return CompletionResponse(text="fine")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


@pytest.mark.parametrize("use_async", [False, True])
def test_llm_exception_is_model_error_with_cause(use_async: bool) -> None:
    llm = Flaky(errors=[ValueError])
    synth = SynthkitSynthesizer(llm=llm)
    with pytest.raises(synthkit_rs.ModelError, match="ValueError: the provider said no") as info:
        if use_async:
            asyncio.run(synth.asynthesize(QUERY, [NodeWithScore(node=TextNode(text=t)) for t in NODES]))
        else:
            synth.synthesize(QUERY, [NodeWithScore(node=TextNode(text=t)) for t in NODES])
    assert isinstance(info.value.__cause__, ValueError)
    assert llm.calls == 1  # not a retry_on class: sent once


def test_retry_on_retries_within_the_limits() -> None:
    llm = Flaky(errors=[Overloaded, Overloaded, None])
    synth = synthkit_rs.Synthesizer("compact", llm=llm, retry_on=Overloaded)
    assert synth.synthesize(QUERY, NODES).response == "fine"
    assert llm.calls == 3


def test_retry_on_gives_up_with_the_last_exception_as_cause() -> None:
    llm = Flaky(errors=[Overloaded] * 10)
    synth = synthkit_rs.Synthesizer("compact", llm=llm, retry_on=(KeyError, Overloaded))
    with pytest.raises(synthkit_rs.ModelError, match="Overloaded: the provider said no") as info:
        synth.synthesize(QUERY, NODES)
    assert isinstance(info.value.__cause__, Overloaded)
    assert llm.calls == 4  # the library's default retry policy: 4 attempts in all


def test_exception_in_a_stream_is_model_error() -> None:
    def broken(messages: Any) -> Any:
        yield "a delta, then "
        raise RuntimeError("stream broke")

    stream = synthkit_rs.Synthesizer("compact", llm=broken).stream(QUERY, NODES)
    with pytest.raises(synthkit_rs.ModelError, match="RuntimeError: stream broke") as info:
        list(stream)
    assert isinstance(info.value.__cause__, RuntimeError)


class Hanging(CustomLLM):
    """An async LLM whose calls after the first wait until released, recording starts and
    cancellations."""

    prompts: List[str] = Field(default_factory=list)
    _started: Optional[asyncio.Event] = PrivateAttr(default=None)
    _cancelled: List[str] = PrivateAttr(default_factory=list)
    _all_cancelled: Optional[asyncio.Event] = PrivateAttr(default=None)
    _release: Optional[asyncio.Event] = PrivateAttr(default=None)
    _in_flight: int = PrivateAttr(default=0)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=400, num_output=50)

    def arm(self) -> None:
        self._started, self._all_cancelled, self._release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("the async API must call acomplete")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise AssertionError("not streamed")

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        assert self._started and self._release and self._all_cancelled
        self.prompts.append(prompt)
        if len(self.prompts) == 1:
            # The first reply comes at once (synthkit sends one call alone first, to
            # calibrate its counts from the usage reported); the others wait.
            return CompletionResponse(text="summary")
        self._in_flight += 1
        if self._in_flight == 2:
            self._started.set()
        try:
            await asyncio.wait_for(self._release.wait(), timeout=60)
        except asyncio.CancelledError:
            self._cancelled.append(prompt)
            self._in_flight -= 1
            if self._in_flight == 0:
                self._all_cancelled.set()
            raise
        self._in_flight -= 1
        return CompletionResponse(text="summary")


def long_nodes(tag: str) -> List[str]:
    return [f"{tag} part {i}: " + "lorem ipsum dolor " * 60 for i in range(6)]


def test_cancelling_the_task_cancels_the_calls_in_flight() -> None:
    llm = Hanging()
    synth = synthkit_rs.Synthesizer("tree_summarize", llm=llm, concurrency=2, evidence=False)

    async def main() -> None:
        llm.arm()
        task = asyncio.ensure_future(synth.asynthesize("first query", long_nodes("first")))
        assert llm._started is not None and llm._all_cancelled is not None and llm._release is not None
        await asyncio.wait_for(llm._started.wait(), timeout=30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Both coroutines in flight were cancelled (an explicit event, not a sleep).
        await asyncio.wait_for(llm._all_cancelled.wait(), timeout=30)
        assert len(llm.prompts) == 3 and sorted(llm._cancelled) == sorted(llm.prompts[1:])
        # The same synthesizer (two calls in flight at most, shared) answers another query:
        # a leaf of the cancelled synthesis still queued would be sent among its calls.
        llm._release.set()
        r = await synth.asynthesize("second query", long_nodes("second"))
        assert r.response == "summary"
        assert all("first" not in p for p in llm.prompts[3:])

    asyncio.run(main())


def test_ctrl_c_cancels_a_coroutine_llm_in_flight(ctrl_c_raises: None) -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def slow(messages: Any) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    def interrupt() -> None:
        if started.wait(timeout=30):
            _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        synthkit_rs.Synthesizer("compact", llm=slow).synthesize(QUERY, NODES)
    assert cancelled.wait(timeout=30)
