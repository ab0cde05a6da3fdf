"""``llm=`` hazards: a synthesis started from inside the synthesizer's own ``llm`` is refused
at once (it would wait for itself), and an ``llm`` whose reply never ends is cut at the
cap on one reply (as HTTP replies are)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Dict, List

import pytest

import synthkit_rs

NODES = ["The mirror is cleaned every six months.", "The dome opens at dusk."]
REENTRY = "called from inside its own llm"


def chain(exc: BaseException) -> str:
    """The exception's text with its causes'."""
    parts = []
    seen = 0
    e: Any = exc
    while e is not None and seen < 10:
        parts.append(str(e))
        e = e.__cause__ or e.__context__
        seen += 1
    return " | ".join(parts)


@pytest.mark.timeout(60)
def test_a_blocking_llm_calling_its_own_synthesizer_fails_at_once() -> None:
    holder: Dict[str, Any] = {}

    def llm(prompt: str) -> str:
        if "inner" in prompt:
            return "inner answer"
        return holder["synth"].synthesize("inner question", ["inner node"]).response

    # One call in flight: the inner synthesis would wait for the outer call's place.
    synth = synthkit_rs.Synthesizer("compact", llm=llm, chat=False, context_window=2048,
                                 num_output=64, concurrency=1, evidence=False)
    holder["synth"] = synth
    with pytest.raises(synthkit_rs.SynthkitError) as caught:
        synth.synthesize("outer question", NODES)
    assert REENTRY in chain(caught.value)
    # The synthesizer still works afterwards.
    holder["synth"] = synthkit_rs.Synthesizer("compact", llm=lambda p: "inner answer", chat=False,
                                           context_window=2048, num_output=64, evidence=False)
    assert synth.synthesize("outer question", NODES).response == "inner answer"


@pytest.mark.timeout(60)
def test_an_async_llm_awaiting_its_own_synthesizer_fails_at_once() -> None:
    holder: Dict[str, Any] = {}

    async def llm(prompt: str) -> str:
        response = await holder["synth"].asynthesize("inner question", ["inner node"])
        return response.response

    synth = synthkit_rs.Synthesizer("compact", llm=llm, chat=False, context_window=2048,
                                 num_output=64, concurrency=1, evidence=False)
    holder["synth"] = synth

    async def main() -> None:
        await synth.asynthesize("outer question", NODES)

    with pytest.raises(synthkit_rs.SynthkitError) as caught:
        asyncio.run(main())
    assert REENTRY in chain(caught.value)


@pytest.mark.timeout(60)
def test_another_synthesizer_may_be_called_from_an_llm() -> None:
    inner = synthkit_rs.Synthesizer("compact")  # the offline backend

    def llm(prompt: str) -> str:
        return inner.synthesize("How often is the mirror cleaned?", NODES).response

    outer = synthkit_rs.Synthesizer("compact", llm=llm, chat=False, context_window=2048,
                                 num_output=64, concurrency=1, evidence=False)
    assert "six months" in outer.synthesize("anything", NODES).response


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", ["iterator", "async iterator", "string"])
def test_a_reply_that_never_ends_is_cut_at_the_reply_cap(shape: str) -> None:
    cap = 8 << 20

    def endless(prompt: str) -> Any:
        return itertools.repeat("x" * 4096)

    async def aendless(prompt: str) -> Any:
        while True:
            yield "x" * 4096

    def huge(prompt: str) -> str:
        return "x" * (cap + 1)

    llm = {"iterator": endless, "async iterator": aendless, "string": huge}[shape]
    synth = synthkit_rs.Synthesizer("compact", llm=llm, chat=False, context_window=2048, num_output=64)
    with pytest.raises(synthkit_rs.ModelError) as caught:
        synth.synthesize("How often is the mirror cleaned?", NODES)
    assert f"over {cap} bytes" in chain(caught.value)
    # Streamed too.
    with pytest.raises(synthkit_rs.ModelError) as caught:
        for _ in synth.stream("How often is the mirror cleaned?", NODES):
            pass
    assert f"over {cap} bytes" in chain(caught.value)


def test_exceptions_are_shown_and_pickled_as_the_package_s() -> None:
    import pickle

    for cls in (synthkit_rs.SynthkitError, synthkit_rs.InputError, synthkit_rs.ModelError,
                synthkit_rs.RefusalError):
        assert cls.__module__ == "synthkit_rs", cls
        assert getattr(synthkit_rs, cls.__name__) is cls
    with pytest.raises(synthkit_rs.InputError) as caught:
        synthkit_rs.Synthesizer("no-such-mode")
    assert type(caught.value).__module__ + "." + type(caught.value).__name__ == "synthkit_rs.InputError"
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is synthkit_rs.InputError and str(again) == str(caught.value)


def cut(prompt: str) -> Any:
    """A reply the model stopped at its output limit."""
    return [("The mirror is cleaned every", None, "length")]


def test_a_cut_reply_warns_by_default() -> None:
    synth = synthkit_rs.Synthesizer("compact", llm=cut, chat=False, context_window=2048, num_output=64)
    with pytest.warns(synthkit_rs.TruncationWarning, match="1 model reply was cut at the output limit"):
        response = synth.synthesize("How often is the mirror cleaned?", NODES)
    assert response.usage["truncated_calls"] == 1
    with pytest.warns(synthkit_rs.TruncationWarning):
        for _ in synth.stream("How often is the mirror cleaned?", NODES):
            pass

    async def main() -> Any:
        return await synth.asynthesize("How often is the mirror cleaned?", NODES)

    with pytest.warns(synthkit_rs.TruncationWarning):
        asyncio.run(main())


def test_on_truncation_error_fails_and_ignore_keeps_quiet() -> None:
    import warnings

    strict = synthkit_rs.Synthesizer("compact", llm=cut, chat=False, context_window=2048,
                                  num_output=64, on_truncation="error")
    with pytest.raises(synthkit_rs.ModelError):
        strict.synthesize("How often is the mirror cleaned?", NODES)
    quiet = synthkit_rs.Synthesizer("compact", llm=cut, chat=False, context_window=2048,
                                 num_output=64, on_truncation="ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        response = quiet.synthesize("How often is the mirror cleaned?", NODES)
    assert response.usage["truncated_calls"] == 1
    with pytest.raises(synthkit_rs.InputError, match="on_truncation must be"):
        synthkit_rs.Synthesizer("compact", on_truncation="sometimes")


def test_synthesize_many_warns_once_for_its_cut_replies() -> None:
    import warnings

    synth = synthkit_rs.Synthesizer("compact", llm=cut, chat=False, context_window=2048, num_output=64)
    requests = [("How often is the mirror cleaned?", NODES)] * 3
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        results = synth.synthesize_many(requests, jobs=2)
    cut_warnings = [w for w in seen if issubclass(w.category, synthkit_rs.TruncationWarning)]
    assert len(cut_warnings) == 1, [str(w.message) for w in seen]
    assert "3 of 3 results" in str(cut_warnings[0].message)
    assert all(r.usage["truncated_calls"] == 1 for r in results)

    async def main() -> Any:
        return await synth.asynthesize_many(requests, jobs=2)

    with pytest.warns(synthkit_rs.TruncationWarning, match="3 of 3 results"):
        asyncio.run(main())
    # "error": each cut request is a FailedRequest of kind `truncated`; "ignore": quiet.
    strict = synthkit_rs.Synthesizer("compact", llm=cut, chat=False, context_window=2048,
                                     num_output=64, on_truncation="error")
    failed = strict.synthesize_many(requests[:1])
    assert isinstance(failed[0], synthkit_rs.FailedRequest) and failed[0].kind == "truncated"
    quiet = synthkit_rs.Synthesizer("compact", llm=cut, chat=False, context_window=2048,
                                    num_output=64, on_truncation="ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet.synthesize_many(requests[:1])


def test_a_context_error_raised_by_the_llm_lowers_the_limit_and_packs_again() -> None:
    # The LLM says its window is large; the server behind it takes 400 words and says so
    # in the words of OpenAI's and vLLM's errors (as an SDK raises them).
    calls: List[int] = []

    class BadRequestError(Exception):
        pass

    def llm(prompt: str) -> str:
        words = len(prompt.split())
        calls.append(words)
        if words > 400:
            raise BadRequestError(
                "Error code: 400 - {'error': {'message': \"This model's maximum context length is "
                f"400 tokens. However, your messages resulted in {words} tokens.\"}}"
            )
        return "Every six months."

    nodes = [f"Passage {i}: " + " ".join(["filler"] * 60) for i in range(20)]
    nodes[7] = "The mirror is cleaned every six months. " + nodes[7]
    synth = synthkit_rs.Synthesizer("compact", llm=llm, chat=False, context_window=8192,
                                 num_output=64, concurrency=1, evidence=False)
    response = synth.synthesize("How often is the mirror cleaned?", nodes)
    assert response.response == "Every six months."
    assert any(w > 400 for w in calls), calls  # the first prompt was refused...
    assert calls[-1] <= 400, calls  # ...and the answer came from smaller ones


def test_a_thinking_llm_s_thoughts_stay_out_of_prompts_and_the_answer() -> None:
    prompts: List[str] = []

    def thinker(prompt: str) -> str:
        prompts.append(prompt)
        return "<think>The passages say six months; maybe I should check.</think>Every six months."

    synth = synthkit_rs.Synthesizer("refine", llm=thinker, chat=False, context_window=2048,
                                    num_output=64, chunk_overlap_ratio=0.0, evidence=False)
    nodes = ["The mirror is cleaned every six months. " * 150, "The dome opens at dusk. " * 150]
    response = synth.synthesize("How often is the mirror cleaned?", nodes)
    assert response.response == "Every six months."
    assert response.usage["reasoning_tokens"] > 0
    # The refine step after the first got the answer without its thinking.
    assert len(prompts) >= 2 and all("maybe I should check" not in p for p in prompts)
    # thinking_reserve is taken and a reply that only thought is an error saying so.
    only = synthkit_rs.Synthesizer("compact", llm=lambda p: "<think>Hmm.</think>", chat=False,
                                   context_window=2048, num_output=64, thinking_reserve=128, evidence=False)
    with pytest.raises(synthkit_rs.ModelError, match="thought and wrote no answer"):
        only.synthesize("How often is the mirror cleaned?", NODES)
