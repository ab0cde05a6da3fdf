"""synthesize_many / asynthesize_many: input order, a FailedRequest in a failed slot, dict
requests over the synthesizer's settings, at most `jobs` at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Iterator

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI

NODES = ["The primary mirror is cleaned every six months.", "The dome opens at dusk."]


def test_results_come_in_input_order_with_failures_in_their_slots() -> None:
    synth = synthkit_rs.Synthesizer("compact")
    requests = [
        ("When does the dome open?", NODES),
        {"id": "r2", "query": "How often is the mirror cleaned?", "nodes": NODES},
        ("No nodes?", 3),
        {"id": 4, "query": "q", "mode": "nope"},
        "not a request",
        {"query": "q", "nodes": NODES, "unknown_field": 1},
    ]
    results = synth.synthesize_many(requests, jobs=2)
    assert len(results) == len(requests)
    assert isinstance(results[0], synthkit_rs.Response)
    assert isinstance(results[1], synthkit_rs.Response)
    assert "six months" in results[1].response
    kinds = [(r.index, r.id, r.kind) for r in results[2:]]
    assert kinds == [
        (2, None, "invalid_request"),
        (3, 4, "invalid_request"),
        (4, None, "invalid_request"),
        (5, None, "invalid_request"),
    ]
    failed = results[3]
    assert isinstance(failed.error, synthkit_rs.InputError)
    assert "nope" in failed.message and failed.message == str(failed.error)
    assert failed.to_dict() == {"kind": "invalid_request", "message": failed.message}
    assert "unknown_field" in results[5].message
    # A response as the service answers it.
    as_dict = results[1].to_dict()
    assert as_dict["text"] == results[1].response
    assert [n["id"] for n in as_dict["source_nodes"]] == ["1", "2"]


def test_dict_requests_keep_the_synthesizers_settings_they_leave_out(
    fake_server: FakeOpenAI,
) -> None:
    synth = synthkit_rs.Synthesizer(
        base_url=fake_server.base_url,
        citations=True,
        system_prompt="You are terse.",
        qa_template="CTX {context_str}\nQ {query_str}\nA:",
        evidence=False,
    )
    results = synth.synthesize_many(
        [
            {"query": "How often?", "nodes": NODES},
            {"query": "How often?", "nodes": NODES, "citations": False,
             "templates": {"qa": "OTHER {context_str} {query_str}"}},
        ]
    )
    assert all(isinstance(r, synthkit_rs.Response) for r in results), results
    # The two run at once: tell them apart by their templates.
    first, second = sorted(fake_server.requests, key=lambda r: "OTHER" in r.prompt)
    assert "CTX" in first.prompt and "You are terse." in first.prompt
    assert results[0].citations is not None
    assert "OTHER" in second.prompt and "You are terse." in second.prompt
    assert results[1].citations is None


def test_a_plan_request_is_planned_and_calls_no_model(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer(base_url=fake_server.base_url, context_window=4096,
                                    num_output=64, evidence=False)
    results = synth.synthesize_many([
        {"id": "p", "query": "How often?", "nodes": NODES, "plan": True, "mode": "refine"},
        {"id": "a", "query": "How often?", "nodes": NODES},
    ])
    plan, answered = results
    assert isinstance(answered, synthkit_rs.Response)
    assert isinstance(plan, dict), plan
    # refine: a qa call on the first node, a refine call on the second.
    assert plan["calls"] == 2, plan
    assert [row["step"] for row in plan["rows"]] == ["qa", "refine"]
    assert plan["prompt_tokens"] > 0 and plan["max_completion_tokens"] == 2 * 64
    assert fake_server.calls == 1


def test_a_model_failure_is_a_failed_request_with_the_llms_exception() -> None:
    class Broken(RuntimeError):
        pass

    def llm(prompt: str) -> str:
        if "broken" in prompt:
            raise Broken("the model is down")
        return "fine"

    synth = synthkit_rs.Synthesizer(llm=llm, chat=False, evidence=False)
    results = synth.synthesize_many([("ok?", NODES), ("broken?", NODES), ("ok again?", NODES)])
    assert [type(r).__name__ for r in results] == ["Response", "FailedRequest", "Response"]
    failed = results[1]
    assert failed.kind == "model_error"
    assert isinstance(failed.error, synthkit_rs.ModelError)
    assert isinstance(failed.error.__cause__, Broken)


def test_at_most_jobs_syntheses_run_at_once() -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def llm(prompt: str) -> str:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        # Stay in flight a moment so others overlap it (the bound holds however they do).
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return "ok"

    synth = synthkit_rs.Synthesizer(llm=llm, chat=False, concurrency=64)
    results = synth.synthesize_many([(f"q{i}?", NODES) for i in range(24)], jobs=3)
    assert all(isinstance(r, synthkit_rs.Response) for r in results)
    assert state["peak"] <= 3


def test_requests_are_read_lazily_and_the_iterables_own_error_stops_the_call() -> None:
    read = []

    def requests() -> Iterator[tuple]:
        for i in range(3):
            read.append(i)
            yield (f"q{i}?", NODES)
        raise ValueError("the input broke")

    synth = synthkit_rs.Synthesizer()
    with pytest.raises(ValueError, match="the input broke"):
        synth.synthesize_many(requests(), jobs=1)
    assert read == [0, 1, 2]


@pytest.mark.parametrize("jobs", [0, 10_000])
def test_jobs_out_of_range_is_an_input_error(jobs: int) -> None:
    with pytest.raises(synthkit_rs.InputError, match="jobs must be between 1 and 4096"):
        synthkit_rs.Synthesizer().synthesize_many([("q", NODES)], jobs=jobs)


def test_a_single_request_is_not_taken_for_many() -> None:
    with pytest.raises(synthkit_rs.InputError, match="not a single string or dict"):
        synthkit_rs.Synthesizer().synthesize_many({"query": "q", "nodes": NODES})


def test_asynthesize_many_runs_on_asyncio(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer(base_url=fake_server.base_url, evidence=False)

    async def main() -> list:
        return await synth.asynthesize_many(
            [(f"question {i}?", NODES) for i in range(10)], jobs=4
        )

    results = asyncio.run(main())
    assert len(results) == 10
    assert all(isinstance(r, synthkit_rs.Response) for r in results)
    assert fake_server.calls == 10
