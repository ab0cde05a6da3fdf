"""The OpenAI-compatible backend against the loopback fake server: JSON, SSE, async, discovery, errors, cancellation."""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import os
import threading
import time
from typing import Iterator

import pytest

import synthkit_rs
from fake_openai import DEFAULT_ANSWER, FakeOpenAI

QUERY = "How often is the mirror cleaned?"
NODES = [f"Chunk {i}: the mirror is cleaned every six months, says page {i}." for i in range(6)]


def test_json_call(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer("compact", base_url=fake_server.base_url, context_window=4096)
    r = synth.synthesize(QUERY, NODES)
    assert r.response == DEFAULT_ANSWER
    assert r.usage["calls"] == fake_server.calls == 1
    # The server's usage (word counts) is what is reported.
    assert r.usage["completion_tokens"] == len(DEFAULT_ANSWER.split())
    req = fake_server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.body["model"] == "fake-model"  # discovered at /v1/models
    assert req.body["max_tokens"] == 256
    assert "Chunk 5" in req.prompt and QUERY in req.prompt
    assert synth.backend == "openai" and synth.model == "fake-model"


def test_model_and_window_from_server() -> None:
    with FakeOpenAI(model="served-7b", context_window=2048) as server:
        synth = synthkit_rs.Synthesizer(base_url=server.base_url)
        assert synth.model == "served-7b"
        assert synth.context_window == 2048


def test_named_model_and_options(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer(
        base_url=fake_server.base_url + "/",
        model="given",
        temperature=0.7,
        num_output=64,
        system_prompt="Be brief.",
    )
    synth.synthesize(QUERY, NODES[:1])
    body = fake_server.requests[0].body
    assert body["model"] == "given"
    assert body["temperature"] == pytest.approx(0.7)
    assert body["max_tokens"] == 64
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


def test_completion_api(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer(base_url=fake_server.base_url, chat=False)
    assert synth.synthesize(QUERY, NODES).response == DEFAULT_ANSWER
    assert fake_server.requests[0].path == "/v1/completions"


def test_stream_sse(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer("compact", base_url=fake_server.base_url)
    stream = synth.stream(QUERY, NODES)
    deltas = list(stream)
    assert len(deltas) > 1
    assert "".join(deltas) == DEFAULT_ANSWER
    assert fake_server.requests[-1].stream
    final = stream.response
    assert final is not None and final.response == DEFAULT_ANSWER
    assert final.usage["calls"] == 1
    assert [n.id for n in final.source_nodes] == [str(i) for i in range(1, 7)]


def test_async_and_async_stream(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer("tree_summarize", base_url=fake_server.base_url)

    async def main() -> tuple[synthkit_rs.Response, str]:
        r = await synth.asynthesize(QUERY, NODES)
        text = ""
        async for d in synth.stream(QUERY, NODES):
            text += d
        return r, text

    r, text = asyncio.run(main())
    assert r.response == DEFAULT_ANSWER == text


def test_small_window_makes_more_calls_in_refine(fake_server: FakeOpenAI) -> None:
    long_nodes = [("word " * 300 + f"end {i}") for i in range(4)]
    synth = synthkit_rs.Synthesizer("compact", base_url=fake_server.base_url, context_window=1024, evidence=False)
    r = synth.synthesize(QUERY, long_nodes)
    assert r.usage["calls"] == fake_server.calls >= 2
    # Later calls refine the earlier answer.
    assert DEFAULT_ANSWER in fake_server.requests[-1].prompt


def test_http_error_is_model_error() -> None:
    with FakeOpenAI(status=400) as server:
        synth = synthkit_rs.Synthesizer(base_url=server.base_url)
        with pytest.raises(synthkit_rs.ModelError, match="400"):
            synth.synthesize(QUERY, NODES)
        with pytest.raises(synthkit_rs.ModelError):
            list(synth.stream(QUERY, NODES))


def test_unreachable_server_is_model_error() -> None:
    with FakeOpenAI() as server:
        url = server.base_url
    # Stopped: nothing listens on that port any more.
    synth = synthkit_rs.Synthesizer(base_url=url, model="m", context_window=4096, timeout=5)
    with pytest.raises(synthkit_rs.ModelError):
        synth.synthesize(QUERY, NODES)


def test_api_key_from_env_never_shown(fake_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-very-secret-123"
    monkeypatch.setenv("MY_KEY", secret)
    synth = synthkit_rs.Synthesizer(base_url=fake_server.base_url, api_key_env="MY_KEY")
    assert secret not in repr(synth)
    synth.synthesize(QUERY, NODES)
    with FakeOpenAI(status=401) as failing:
        bad = synthkit_rs.Synthesizer(base_url=failing.base_url, api_key_env="MY_KEY")
        with pytest.raises(synthkit_rs.ModelError) as info:
            bad.synthesize(QUERY, NODES)
        assert secret not in str(info.value)


#: How long the tests below let a held call go before they release it: a safety net that
#: turns a call that was not stopped into a failure, never reached when it is stopped.
SAFETY_S = 60.0


@contextlib.contextmanager
def held_server() -> Iterator[tuple[FakeOpenAI, threading.Event]]:
    """A fake server that holds its answers until the event it yields with it is set: at
    the latest after SAFETY_S, and when the block ends (after the server stops)."""
    release = threading.Event()
    safety = threading.Timer(SAFETY_S, release.set)
    safety.start()
    try:
        with FakeOpenAI(hold=release) as server:
            yield server, release
    finally:
        release.set()
        safety.cancel()


def test_asyncio_cancel_stops_the_call() -> None:
    # The server holds its answer until the test ends: a cancelled call that returns at
    # all did not wait for it (ordering, not timing).
    with held_server() as (server, release):
        synth = synthkit_rs.Synthesizer(base_url=server.base_url, model="m", context_window=4096)

        async def main() -> None:
            task = asyncio.ensure_future(synth.asynthesize(QUERY, NODES))
            while server.calls == 0 and not release.is_set():  # at the server
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert server.answered == 0, "the call waited for the server's answer"


@pytest.mark.skipif(os.name != "posix", reason="interrupt_main delivers SIGINT handling on POSIX")
def test_ctrl_c_interrupts_a_blocking_call(ctrl_c_raises: None) -> None:
    # As above: the server holds its answer, so KeyboardInterrupt before the answer is an
    # interrupted call (the safety release lets an uninterrupted one return, and fail).
    with held_server() as (server, release):
        synth = synthkit_rs.Synthesizer(base_url=server.base_url, model="m", context_window=4096)

        def interrupt_once_at_the_server() -> None:
            while server.calls == 0 and not release.is_set():
                time.sleep(0.01)
            _thread.interrupt_main()

        timer = threading.Thread(target=interrupt_once_at_the_server, daemon=True)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            synth.synthesize(QUERY, NODES)
        timer.join()
        assert server.answered == 0, "the call waited for the server's answer"


def test_gil_released_while_waiting() -> None:
    # The server holds its answer until another Python thread releases it, which that
    # thread can only do while the blocking call has let go of the GIL: the call
    # returning is the check (ordering, not a count of ticks in some time). The client's
    # timeout turns a held GIL (a deadlock) into a failure.
    release = threading.Event()
    with FakeOpenAI(hold=release) as server:
        synth = synthkit_rs.Synthesizer(
            base_url=server.base_url, model="m", context_window=4096, timeout=SAFETY_S
        )
        ran_during_the_call = threading.Event()

        def release_once_at_the_server() -> None:
            deadline = time.monotonic() + SAFETY_S
            while server.calls == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            if server.calls > 0 and server.answered == 0:
                ran_during_the_call.set()
            release.set()

        t = threading.Thread(target=release_once_at_the_server, daemon=True)
        t.start()
        try:
            r = synth.synthesize(QUERY, NODES)
        finally:
            release.set()
        t.join()
        assert r.response == DEFAULT_ANSWER
        assert ran_during_the_call.is_set()
        assert server.answered == 1

def test_reuse_hints_choose_what_calls_carry(fake_server: FakeOpenAI) -> None:
    # The loopback server is not OpenAI's: by default no prompt_cache_key, with "all"
    # every call carries one, with "none" none does.
    carried = {}
    for hints in ("auto", "all", "none"):
        fake_server.reset()
        synth = synthkit_rs.Synthesizer(
            base_url=fake_server.base_url, context_window=4096, reuse_hints=hints
        )
        synth.synthesize(QUERY, NODES)
        carried[hints] = ["prompt_cache_key" in r.body for r in fake_server.requests]
    assert carried == {"auto": [False], "all": [True], "none": [False]}
    with pytest.raises(synthkit_rs.InputError, match="auto, all or none"):
        synthkit_rs.Synthesizer(base_url=fake_server.base_url, reuse_hints="off")
