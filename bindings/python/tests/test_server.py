"""The OpenAI-compatible backend against the loopback fake server: JSON, SSE, async, discovery, errors, cancellation."""

from __future__ import annotations

import _thread
import asyncio
import os
import threading
import time

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


def test_asyncio_cancel_stops_the_call() -> None:
    with FakeOpenAI(delay=3.0) as server:
        synth = synthkit_rs.Synthesizer(base_url=server.base_url, model="m", context_window=4096)

        async def main() -> float:
            task = asyncio.ensure_future(synth.asynthesize(QUERY, NODES))
            await asyncio.sleep(0.3)
            start = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - start

        assert asyncio.run(main()) < 1.0


@pytest.mark.skipif(os.name != "posix", reason="interrupt_main delivers SIGINT handling on POSIX")
def test_ctrl_c_interrupts_a_blocking_call(ctrl_c_raises: None) -> None:
    with FakeOpenAI(delay=5.0) as server:
        synth = synthkit_rs.Synthesizer(base_url=server.base_url, model="m", context_window=4096)
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            synth.synthesize(QUERY, NODES)
        assert time.monotonic() - start < 2.0
        timer.cancel()


def test_gil_released_while_waiting() -> None:
    with FakeOpenAI(delay=0.5) as server:
        synth = synthkit_rs.Synthesizer(base_url=server.base_url, model="m", context_window=4096)
        ticks = 0
        stop = threading.Event()

        def spin() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                time.sleep(0.01)

        t = threading.Thread(target=spin)
        t.start()
        synth.synthesize(QUERY, NODES)
        stop.set()
        t.join()
        assert ticks >= 20
