"""Budgets and caches shared through a real Redis: two processes on one tokens-per-minute
budget, and one cache for two synthesizers (the HTTP path and the ``llm=`` path)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI
from sharing_support import charges, redis_server, steady_tokens_per_minute

NODES = ["The primary mirror is cleaned every six months.", "The dome opens at dusk."]

#: Each synthesis reserves this many tokens for its answer (the budget charges it whole).
NUM_OUTPUT = 64

#: One process of the two-process test: answers its queries through synthesize_many and
#: prints how many were answered.
WORKER = textwrap.dedent(
    """
    import json, sys
    import synthkit_rs
    base_url, redis_url, prefix, tpm, first, count = sys.argv[1:7]
    synth = synthkit_rs.Synthesizer(
        base_url=base_url, num_output=%d, tpm=int(tpm),
        redis_url=redis_url, redis_prefix=prefix, evidence=False,
    )
    nodes = %r
    requests = [(f"question {i}?", nodes) for i in range(int(first), int(first) + int(count))]
    results = synth.synthesize_many(requests, jobs=8)
    failed = [r.to_dict() for r in results if isinstance(r, synthkit_rs.FailedRequest)]
    print(json.dumps({"answered": len(results) - len(failed), "failed": failed}))
    """
    % (NUM_OUTPUT, NODES)
)


def _charge_of_one(server: FakeOpenAI) -> int:
    """The charge of one request of the test's shape (no budget spent on it)."""
    synth = synthkit_rs.Synthesizer(base_url=server.base_url, num_output=NUM_OUTPUT, evidence=False)
    synth.synthesize("question 100?", NODES)
    charge = charges(server.requests[-1:])[0]
    server.reset()
    return charge


def test_two_processes_hold_one_tokens_per_minute_budget() -> None:
    tpm = 20_000
    steady_s = 15
    with redis_server() as redis_url, FakeOpenAI() as server:
        charge = _charge_of_one(server)
        # A minute's burst, then `steady_s` seconds at the rate, with calls always waiting.
        total = math.ceil(tpm * (1 + steady_s / 60) / charge) + 2
        half = total // 2
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, server.base_url, redis_url, "two-procs",
                 str(tpm), str(first), str(count)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for first, count in [(0, half), (half, total - half)]
        ]
        outputs = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outputs.append(json.loads(out.strip().splitlines()[-1]))
        for o in outputs:
            assert o["failed"] == [], o
        assert sum(o["answered"] for o in outputs) == total
        assert server.calls == total
        # Each query reached the server once.
        prompts = [r.prompt for r in server.requests]
        for i in range(total):
            assert sum(f"question {i}?" in p for p in prompts) == 1, i
        rate = steady_tokens_per_minute(server.requests, burst_tokens=tpm)
        print(f"steady rate at the server: {rate:.0f} tokens/minute, cap {tpm}")
        assert abs(rate / tpm - 1) <= 0.05, f"{rate:.0f} tokens/minute against a cap of {tpm}"


def test_a_reply_cached_in_redis_serves_another_synthesizer() -> None:
    with redis_server() as redis_url, FakeOpenAI() as server:
        options = dict(base_url=server.base_url, redis_url=redis_url, cache="redis")
        first = synthkit_rs.Synthesizer(**options)
        assert 'cache="redis"' in repr(first)
        a = first.synthesize("How often is the mirror cleaned?", NODES)
        assert server.calls == 1
        second = synthkit_rs.Synthesizer(**options)
        b = second.synthesize("How often is the mirror cleaned?", NODES)
        assert server.calls == 1
        assert b.response == a.response
        # Another prefix is another cache.
        third = synthkit_rs.Synthesizer(**options, redis_prefix="other")
        third.synthesize("How often is the mirror cleaned?", NODES)
        assert server.calls == 2


def test_the_llm_path_shares_the_redis_cache_too() -> None:
    calls = []

    def llm(prompt: str) -> str:
        calls.append(prompt)
        return "Every six months."

    with redis_server() as redis_url:
        options = dict(
            llm=llm, chat=False, redis_url=redis_url, cache="redis", rpm=600,
            evidence=False, on_unsupported="warn",
        )
        one = synthkit_rs.Synthesizer(**options)
        assert one.synthesize("How often?", NODES).response == "Every six months."
        two = synthkit_rs.Synthesizer(**options)
        assert two.synthesize("How often?", NODES).response == "Every six months."
        assert len(calls) == 1
        assert 'budget="redis"' in repr(two)


def test_an_unreachable_redis_is_a_clear_error_without_the_password() -> None:
    with pytest.raises(synthkit_rs.SynthkitError) as e:
        synthkit_rs.Synthesizer(tpm=1000, redis_url="redis://:hunter2@127.0.0.1:1/")
    message = str(e.value)
    assert "hunter2" not in message
    assert "127.0.0.1:1" in message
