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


@pytest.fixture()
def docs_root(tmp_path):  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "mirror.md").write_text("# Mirror\n\nThe primary mirror is cleaned every six months.\n")
    (docs / "dome.md").write_text("# Dome\n\nThe dome opens at dusk and closes at dawn.\n")
    (tmp_path / "secret.txt").write_text("The vault code is 1234.")
    return tmp_path


def test_paths_are_read_under_paths_root_as_a_batch_line_reads_them(docs_root) -> None:  # type: ignore[no-untyped-def]
    synth = synthkit_rs.Synthesizer("compact")
    requests = [
        {"id": "folder", "query": "How often is the primary mirror cleaned?", "paths": ["docs"],
         "top_k": 1},
        {"id": "file", "query": "When does the dome open?", "paths": ["docs/dome.md"]},
        {"id": "up", "query": "What is the vault code?", "paths": ["../secret.txt"]},
        {"id": "abs", "query": "q", "paths": [str(docs_root / "secret.txt")]},
        {"id": "both", "query": "q", "paths": ["docs"], "nodes": NODES},
        {"id": "plan", "query": "When does the dome open?", "paths": ["docs"], "plan": True},
    ]
    results = synth.synthesize_many(requests, jobs=2, paths_root=docs_root)
    folder, file, up, absolute, both, plan = results
    assert "six months" in folder.response
    # Ranked (top_k 1), and named relative to the root.
    assert [n.id for n in folder.source_nodes] == ["docs/mirror.md#1"]
    assert [n.id for n in file.source_nodes] == ["docs/dome.md#1"]
    assert "dusk" in file.response
    assert (up.kind, absolute.kind, both.kind) == ("invalid_request",) * 3
    assert "goes up a folder" in up.message and "allow_paths_outside=True" in up.message
    assert up.message.startswith("requests[2]: cannot read `paths`: "), up.message
    assert "is an absolute path" in absolute.message
    assert "give `nodes` or `paths`" in both.message
    # A plan reads the files too (its prompts hold them) and calls no model.
    assert isinstance(plan, dict) and plan["calls"] == 1, plan
    # Outside the root, once allowed.
    [outside] = synth.synthesize_many(requests[2:3], paths_root=docs_root / "docs",
                                      allow_paths_outside=True)
    assert "1234" in outside.response


def test_paths_without_paths_root_say_what_to_give() -> None:
    synth = synthkit_rs.Synthesizer("compact")
    [failed] = synth.synthesize_many([{"query": "q", "paths": ["docs"]}])
    assert failed.kind == "invalid_request"
    assert "paths_root=" in failed.message, failed.message
    with pytest.raises(synthkit_rs.InputError, match="give paths_root= too"):
        synth.synthesize_many([], top_k=3)
    with pytest.raises(synthkit_rs.InputError, match="paths_root="):
        synth.synthesize_many([], paths_root="/nowhere/at/all")
    with pytest.raises(synthkit_rs.InputError, match="top_k must be"):
        synth.synthesize_many([], paths_root=".", top_k=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'paths_rot'"):
        synth.synthesize_many([], paths_rot=".")


def test_asynthesize_many_reads_paths_too(docs_root) -> None:  # type: ignore[no-untyped-def]
    synth = synthkit_rs.Synthesizer("compact")

    async def main() -> list:
        return await synth.asynthesize_many(
            [{"query": "When does the dome open?", "paths": ["docs"], "top_k": 1}],
            paths_root=str(docs_root), index_dir=str(docs_root / "index"))

    [answer] = asyncio.run(main())
    assert [n.id for n in answer.source_nodes] == ["docs/dome.md#1"]
    # The folder index was written where index_dir says.
    assert any((docs_root / "index").iterdir())


def test_what_a_read_warns_of_goes_to_the_synthkit_rs_logger(docs_root, caplog) -> None:  # type: ignore[no-untyped-def]
    import os

    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    os.mkfifo(docs_root / "pipe")
    synth = synthkit_rs.Synthesizer("compact")
    with caplog.at_level("WARNING", logger="synthkit_rs"):
        [answer] = synth.synthesize_many(
            [{"query": "When does the dome open?", "paths": ["docs", "pipe"], "top_k": 1}],
            paths_root=docs_root)
    # The pipe is never opened (it would block the read): skipped, and said so.
    assert [n.id for n in answer.source_nodes] == ["docs/dome.md#1"]
    warned = [r for r in caplog.records if r.name == "synthkit_rs"]
    assert any("`pipe`" in r.getMessage() and "not a file" in r.getMessage() for r in warned), warned


def test_a_reads_warnings_name_pythons_logger_and_debug_names_every_file(docs_root, caplog) -> None:  # type: ignore[no-untyped-def]
    # Six legacy 8-bit files: at WARNING the first three are named, then one line counts
    # the rest and says how to see them all (the logger at DEBUG, not the command line's
    # -v); with the logger at DEBUG every one is named.
    legacy = docs_root / "legacy"
    legacy.mkdir()
    for i, word in enumerate(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]):
        text = f"The caf\u00e9 of {word} opens at {i} o'clock, after the {word} market.\n"
        (legacy / f"{word}.txt").write_bytes(text.encode("latin-1"))
    synth = synthkit_rs.Synthesizer("compact")
    request = {"query": "When does the alpha cafe open?", "paths": ["legacy"], "top_k": 1}

    with caplog.at_level("WARNING", logger="synthkit_rs"):
        synth.synthesize_many([request], paths_root=docs_root)
    said = [r.getMessage() for r in caplog.records if r.name == "synthkit_rs"]
    assert sum("not valid UTF-8" in m for m in said) == 3, said
    assert any("3 more files decoded imperfectly" in m
               and "the synthkit_rs logger at DEBUG names them all" in m for m in said), said
    assert not any("-v " in m for m in said), said

    caplog.clear()
    with caplog.at_level("DEBUG", logger="synthkit_rs"):
        synth.synthesize_many([request], paths_root=docs_root)
    said = [r.getMessage() for r in caplog.records if r.name == "synthkit_rs"]
    assert sum("not valid UTF-8" in m for m in said) == 6, said
    assert not any("more files decoded imperfectly" in m for m in said), said
