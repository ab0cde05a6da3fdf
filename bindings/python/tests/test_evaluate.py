"""``synthkit_rs.evaluate``: judge-free scores of answers given as dicts or files, and of
synthesizers run on the cases (extractive, a fake OpenAI server, a Python callable)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any, List

import pytest

import synthkit_rs
from fake_openai import DEFAULT_ANSWER, FakeOpenAI

MIRROR = {"id": "m", "text": "The mirror is cleaned every six months by the crew."}
DOME = {"id": "d", "text": "The telescope dome opens at dusk."}
CASES: List[dict] = [
    {"id": "q1", "query": "How often is the mirror cleaned?", "nodes": [MIRROR, DOME],
     "answers": ["six months"], "evidence": ["m"], "tags": ["needle"]},
    {"id": "q2", "query": "When does the dome open?", "nodes": [MIRROR, DOME],
     "answers": ["at dusk"], "evidence": ["d"]},
    {"id": "q3", "query": "Who built the telescope?", "nodes": [MIRROR, DOME],
     "answers": [], "answerable": False},
]
#: Another system's answers: q1 right (F1 0.8, one of two citations is evidence), q2
#: wrong and lost in packing (the answer was not in its prompts), q3 a right abstention.
ANSWERS: List[dict] = [
    {"id": "q1", "mode": "compact", "answer": "Every six months.", "citations": ["m", "d"],
     "prompts": ["Context: the mirror is cleaned every six months."], "calls": 2,
     "prompt_tokens": 100, "wall_ms": 1500.0},
    {"id": "q2", "mode": "compact", "answer": "At noon.", "citations": ["m"],
     "prompts": ["nothing useful"], "calls": 1, "prompt_tokens": 40},
    {"id": "q3", "mode": "compact", "answer": "I don't know.", "calls": 1},
]
#: `synthkit eval`'s table headings.
HEADINGS = ["system", "mode", "cases", "correct", "95% interval", "answerable", "abstain", "false abst", "F1",
            "cite P", "cite R", "lost r/p/s", "calls", "prompt tok", "wall s"]


def cells(line: str) -> List[str]:
    return [c for c in re.split(r"\s{2,}", line.strip()) if c]


def by_id(result: synthkit_rs.EvalResult, mode: str) -> dict:
    return {r["id"]: r for r in result.rows if r["mode"] == mode}


def test_answers_given_as_dicts_are_scored_as_counted_by_hand() -> None:
    result = synthkit_rs.evaluate(CASES, ANSWERS, system="li")
    assert isinstance(result, synthkit_rs.EvalResult)
    assert [r["id"] for r in result.rows] == ["q1", "q2", "q3"]
    q1, q2, q3 = result.rows
    assert (q1["system"], q1["mode"], q1["answer"]) == ("li", "compact", "Every six months.")
    assert q1["correct"] and not q1["abstained"]
    assert q1["f1"] == pytest.approx(0.8)
    assert (q1["in_nodes"], q1["in_prompts"]) == (True, True)
    assert (q1["cite_precision"], q1["cite_recall"]) == (0.5, 1.0)
    assert (q1["calls"], q1["prompt_tokens"], q1["wall_ms"]) == (2, 100, 1500.0)
    assert q1["tags"] == ["needle"]
    assert not q2["correct"] and q2["f1"] == pytest.approx(0.5)
    assert (q2["in_nodes"], q2["in_prompts"]) == (True, False)
    assert (q2["cite_precision"], q2["cite_recall"]) == (0.0, 0.0)
    assert q3["correct"] and q3["abstained"] and q3["f1"] == 1.0
    assert (q3["in_nodes"], q3["cite_precision"]) == (None, None)

    [t] = result.totals
    assert (t["system"], t["mode"], t["cases"], t["correct"]) == ("li", "compact", 3, 2)
    assert (t["answerable"], t["answerable_correct"]) == (2, 1)
    assert (t["unanswerable"], t["abstained_right"], t["false_abstentions"]) == (1, 1, 0)
    assert t["f1_mean"] == pytest.approx((0.8 + 0.5 + 1.0) / 3)
    assert (t["cite_precision"], t["cite_recall"]) == (0.25, 0.5)
    assert (t["lost_in_retrieval"], t["lost_in_packing"], t["lost_in_synthesis"]) == (0, 1, 0)
    assert (t["calls"], t["prompt_tokens"], t["errors"]) == (4, 140, 0)

    # The table: `synthkit eval`'s headings, one line per system and mode, then the cases
    # each got wrong.
    assert str(result) == result.table()
    lines = result.table().splitlines()
    assert len(lines) == 3
    assert lines[2] == "wrong in li/compact (1): q2"
    assert cells(lines[0]) == HEADINGS
    # 2 of 3 right: with so few cases, the interval is all of 0-100%.
    assert t["correct_interval"] == [0.0, 1.0]
    assert cells(lines[1]) == ["li", "compact", "3", "2 (67%)", "0-100%", "1/2", "1/1", "0/2", "0.77",
                               "0.25", "0.50", "0/1/0", "4", "140", "1.5"]
    assert result.paired == []
    assert result.to_dict() == {"rows": result.rows, "totals": result.totals, "paired": []}
    assert "li/compact: 2/3 correct" in repr(result)


def test_paths_and_json_texts_give_the_same_scores(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in CASES[:2]) + "\n\n" + json.dumps(CASES[2]) + "\n")
    answers = tmp_path / "answers.jsonl"
    # No `system`: the answers get evaluate's.
    answers.write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    from_dicts = synthkit_rs.evaluate(CASES, ANSWERS, system="li")
    for c, a in [(cases, answers), (str(cases), str(answers)),
                 ([json.dumps(c) for c in CASES], [json.dumps(a) for a in ANSWERS])]:
        got = synthkit_rs.evaluate(c, a, system="li")
        assert got.rows == from_dicts.rows
        assert got.totals == from_dicts.totals
    # An answer naming its system keeps it: two columns.
    other = [dict(a, system="other") for a in ANSWERS]
    both = synthkit_rs.evaluate(cases, ANSWERS + other)
    assert [(t["system"], t["correct"]) for t in both.totals] == [("synthkit", 2), ("other", 2)]
    # Compared case by case: the same answers, so no case only one side got right.
    [p] = both.paired
    assert (p["a"], p["b"], p["cases"], p["both"], p["only_a"], p["only_b"]) == (
        "synthkit/compact", "other/compact", 3, 2, 0, 0)
    assert p["p_value"] == 1.0
    assert both.table().splitlines()[-1].startswith("synthkit/compact vs other/compact on 3 cases")


def test_bad_input_names_the_case_or_answer(tmp_path: Path) -> None:
    bad = tmp_path / "cases.jsonl"
    bad.write_text(json.dumps(CASES[0]) + "\n" + json.dumps({"id": "x", "nodes": ["t"], "answers": ["a"]}) + "\n")
    with pytest.raises(synthkit_rs.InputError, match=r"cases\.jsonl: line 2: `query` is missing"):
        synthkit_rs.evaluate(bad, ANSWERS[:1])
    bad.write_text(json.dumps(CASES[0]) + "\nnot json\n")
    with pytest.raises(synthkit_rs.InputError, match=r"line 2: not JSON"):
        synthkit_rs.evaluate(bad, ANSWERS[:1])
    no_answers = dict(CASES[1], answers=[])
    with pytest.raises(synthkit_rs.InputError, match=r"^case 2 \(cases\[1\]\): an answerable case needs at least one accepted answer"):
        synthkit_rs.evaluate([CASES[0], no_answers], ANSWERS[:1])
    with pytest.raises(synthkit_rs.InputError, match=r"case 3 \(cases\[2\]\): the id `q1` is already used by case 1 \(cases\[0\]\)"):
        synthkit_rs.evaluate([CASES[0], CASES[1], CASES[0]], ANSWERS[:1])
    with pytest.raises(synthkit_rs.InputError, match=r"case 2 \(cases\[1\]\): must be a dict"):
        synthkit_rs.evaluate([CASES[0], 7], ANSWERS[:1])
    with pytest.raises(synthkit_rs.InputError, match=r"answer 2 \(answers\[1\]\) names the case `nope`"):
        synthkit_rs.evaluate(CASES, [ANSWERS[0], dict(ANSWERS[1], id="nope")])
    with pytest.raises(synthkit_rs.InputError, match=r"answer 1 \(answers\[0\]\): `answer` is missing"):
        synthkit_rs.evaluate(CASES, [{"id": "q1", "mode": "compact"}])
    with pytest.raises(synthkit_rs.InputError, match=r"answer 2 \(answers\[1\]\) answers case `q1` in mode `compact` for system `synthkit`, as answer 1"):
        synthkit_rs.evaluate(CASES, [ANSWERS[0], ANSWERS[0]])
    with pytest.raises(synthkit_rs.InputError, match="nothing to score"):
        synthkit_rs.evaluate(CASES)
    with pytest.raises(synthkit_rs.InputError, match="cannot read the cases file"):
        synthkit_rs.evaluate(tmp_path / "missing.jsonl", ANSWERS)
    with pytest.raises(synthkit_rs.InputError, match="not a single dict"):
        synthkit_rs.evaluate(CASES[0], ANSWERS)
    with pytest.raises(synthkit_rs.InputError, match="no case given"):
        synthkit_rs.evaluate([], ANSWERS)


def test_extractive_synthesizers_run_on_every_case() -> None:
    plain = synthkit_rs.Synthesizer("compact")
    cited = synthkit_rs.Synthesizer("refine", citations=True)
    result = synthkit_rs.evaluate(CASES, synthesizers={"compact": plain, "refine-cited": cited})
    assert [(r["id"], r["mode"]) for r in result.rows] == [
        (c["id"], m) for c in CASES for m in ("compact", "refine-cited")]
    assert [(t["system"], t["mode"], t["cases"]) for t in result.totals] == [
        ("synthkit", "compact", 3), ("synthkit", "refine-cited", 3)]
    for mode, synth in (("compact", plain), ("refine-cited", cited)):
        row = by_id(result, mode)["q1"]
        direct = synth.synthesize(CASES[0]["query"], CASES[0]["nodes"])
        assert row["correct"] and row["error"] is None
        assert row["calls"] == direct.usage["calls"] >= 1
        assert row["prompt_tokens"] == direct.usage["prompt_tokens"] > 0
        # The prompts sent were kept: the answer reached them.
        assert (row["in_nodes"], row["in_prompts"]) == (True, True)
        assert row["wall_ms"] > 0
    # Citations only for the synthesizer that cites, and without markers in the answer.
    assert by_id(result, "compact")["q1"]["cite_recall"] is None
    assert by_id(result, "refine-cited")["q1"]["cite_recall"] == 1.0
    assert "[" not in by_id(result, "refine-cited")["q1"]["answer"]

    # A list is named by the modes; two of one mode must be named apart.
    listed = synthkit_rs.evaluate(CASES, synthesizers=[plain])
    assert {r["mode"] for r in listed.rows} == {"compact"}
    with pytest.raises(synthkit_rs.InputError, match="second synthesizer in mode `compact`"):
        synthkit_rs.evaluate(CASES, synthesizers=[plain, synthkit_rs.Synthesizer("compact")])
    with pytest.raises(synthkit_rs.InputError, match=r"synthesizers\[1\] must be a synthkit_rs.Synthesizer"):
        synthkit_rs.evaluate(CASES, synthesizers=[plain, "refine"])
    # Answers and runs in one table; the same case, mode and system twice is refused.
    mixed = synthkit_rs.evaluate(CASES, ANSWERS, synthesizers={"extractive": plain}, system="sk")
    assert [t["mode"] for t in mixed.totals] == ["compact", "extractive"]
    with pytest.raises(synthkit_rs.InputError, match="each case, mode and system is scored once"):
        synthkit_rs.evaluate(CASES, ANSWERS, synthesizers=[plain])


def test_paths_cases_are_scored_and_run_under_paths_root(tmp_path: Path) -> None:
    cases = [dict(CASES[0]), dict(CASES[1])]
    del cases[1]["nodes"]
    cases[1]["paths"] = ["docs/dome.md"]
    # Scored from answers alone, no file is read.
    result = synthkit_rs.evaluate(cases, ANSWERS[:2])
    q2 = by_id(result, "compact")["q2"]
    assert q2["in_nodes"] is None and q2["in_prompts"] is False
    # Run: a list of cases has no folder of its own, so paths_root names it.
    with pytest.raises(synthkit_rs.InputError, match=r"case 2 \(`q2`\) gives `paths`: give paths_root="):
        synthkit_rs.evaluate(cases, synthesizers=[synthkit_rs.Synthesizer()])
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "dome.md").write_text("# Dome\n\nThe telescope dome opens at dusk.\n")
    ran = synthkit_rs.evaluate(cases, synthesizers=[synthkit_rs.Synthesizer()], paths_root=tmp_path)
    q2 = by_id(ran, "compact")["q2"]
    assert q2["error"] is None and q2["correct"] is True and q2["in_nodes"] is True, q2
    # A cases file's paths are read under its own folder, as `synthkit eval` reads them.
    file = tmp_path / "cases.jsonl"
    file.write_text("".join(json.dumps(c) + "\n" for c in cases))
    from_file = synthkit_rs.evaluate(file, synthesizers=[synthkit_rs.Synthesizer()])
    assert by_id(from_file, "compact")["q2"]["correct"] is True
    # A path that is not there is that case's error row; the other case still runs.
    cases[1]["paths"] = ["docs/missing.md"]
    failed = synthkit_rs.evaluate(cases, synthesizers=[synthkit_rs.Synthesizer()], paths_root=tmp_path)
    rows = by_id(failed, "compact")
    assert rows["q2"]["error"] and "missing.md" in rows["q2"]["error"], rows["q2"]
    assert rows["q1"]["error"] is None
    with pytest.raises(TypeError, match="evaluate\\(\\) got an unexpected keyword argument 'root'"):
        synthkit_rs.evaluate(cases, synthesizers=[synthkit_rs.Synthesizer()], root=tmp_path)


def test_a_server_synthesizer_records_calls_tokens_and_prompts(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer("refine", base_url=fake_server.base_url, context_window=4096, evidence=False)
    result = synthkit_rs.evaluate(CASES, synthesizers={"refine": synth}, system="served")
    # Refine: one call per node, the cases one after the other.
    assert fake_server.calls == 6
    words = [len(r.prompt.split()) for r in fake_server.requests]
    for i, row in enumerate(result.rows):
        assert row["system"] == "served"
        assert row["answer"] == DEFAULT_ANSWER
        assert row["calls"] == 2
        assert row["prompt_tokens"] == words[2 * i] + words[2 * i + 1]
        assert row["completion_tokens"] == 2 * len(DEFAULT_ANSWER.split())
    q1, q2, q3 = result.rows
    assert q1["correct"] and q1["in_prompts"] is True
    # The answer to q2 reached the prompts and the model still answered the mirror.
    assert not q2["correct"] and q2["in_prompts"] is True
    assert not q3["correct"] and not q3["abstained"]
    [t] = result.totals
    assert (t["correct"], t["lost_in_synthesis"], t["calls"]) == (1, 1, 6)


def test_a_failed_synthesis_is_a_wrong_row_with_its_error() -> None:
    with FakeOpenAI(status=400) as server:
        synth = synthkit_rs.Synthesizer("compact", base_url=server.base_url, context_window=4096)
        result = synthkit_rs.evaluate(CASES[:1], synthesizers=[synth])
        assert server.calls >= 1
    [row] = result.rows
    assert row["error"] and "400" in row["error"]
    assert not row["correct"] and row["f1"] == 0.0 and row["answer"] == ""
    assert result.totals[0]["errors"] == 1


def test_a_python_llm_runs_with_its_prompts_recorded() -> None:
    seen: List[Any] = []

    def complete(prompt: str) -> str:
        seen.append(prompt)
        return "It opens at dusk." if "When does the dome open?" in prompt else "I don't know."

    synth = synthkit_rs.Synthesizer("compact", llm=complete, chat=False, context_window=2048, num_output=64, evidence=False)
    result = synthkit_rs.evaluate(CASES, synthesizers=[synth])
    assert len(seen) == 3
    q1, q2, q3 = result.rows
    assert not q1["correct"] and q1["abstained"] and q1["in_prompts"] is True
    assert q2["correct"] and q2["calls"] == 1
    assert q3["correct"] and q3["abstained"]
    assert result.totals[0]["false_abstentions"] == 1


def test_the_readme_example_runs() -> None:
    cases = [
        {"id": "q1", "query": "When does the dome open?", "answers": ["at dusk"], "evidence": ["d"],
         "nodes": [{"id": "d", "text": "The dome opens at dusk."}, {"id": "m", "text": "The mirror is cleaned yearly."}]},
        {"id": "q2", "query": "Who built it?", "nodes": ["The dome opens at dusk."], "answerable": False},
    ]
    other = [{"id": "q1", "mode": "query_engine", "system": "llamaindex", "answer": "At dusk."},
             {"id": "q2", "mode": "query_engine", "system": "llamaindex", "answer": "Nobody knows."}]
    result = synthkit_rs.evaluate(cases, other, synthesizers={"compact": synthkit_rs.Synthesizer("compact"),
                                                           "refine": synthkit_rs.Synthesizer("refine", citations=True)})
    assert result.totals[0]["correct"] == 1 and result.rows[0]["f1"] == 1.0
    assert [(t["system"], t["mode"]) for t in result.totals] == [
        ("llamaindex", "query_engine"), ("synthkit", "compact"), ("synthkit", "refine")]
    # The heading, three lines of totals, the case llamaindex got wrong, and synthkit's two
    # modes compared case by case.
    assert len(str(result).splitlines()) == 6
    assert "wrong in llamaindex/query_engine (1): q2" in str(result)
    assert [(p["a"], p["b"]) for p in result.paired] == [("synthkit/compact", "synthkit/refine")]


def test_jobs_run_cases_side_by_side_and_keep_case_order() -> None:
    # Each reply waits until a second request is in flight: one run at a time would break
    # the barrier (and the rows say so with their errors).
    meet = threading.Barrier(2, timeout=20)

    def answer(prompt: str) -> str:
        meet.wait()
        return "It opens at dusk." if "When does the dome open?" in prompt else "Every six months."

    cases = CASES + [dict(CASES[0], id="q4")]
    with FakeOpenAI(answer=answer) as server:
        synth = synthkit_rs.Synthesizer("compact", base_url=server.base_url, context_window=4096,
                                     concurrency=2, evidence=False)
        result = synthkit_rs.evaluate(cases, synthesizers=[synth], jobs=2)
        assert server.calls == 4
    assert [r["id"] for r in result.rows] == ["q1", "q2", "q3", "q4"]
    assert [r["error"] for r in result.rows] == [None] * 4
    assert [r["correct"] for r in result.rows] == [True, True, False, True]
    with pytest.raises(synthkit_rs.InputError, match="jobs must be 1 to 256"):
        synthkit_rs.evaluate(CASES, synthesizers=[synth], jobs=0)


def test_aevaluate_gives_what_evaluate_gives() -> None:
    synths = {"extractive": synthkit_rs.Synthesizer("compact"),
              "refine": synthkit_rs.Synthesizer("refine", citations=True)}
    direct = synthkit_rs.evaluate(CASES, ANSWERS, synthesizers=synths, system="sk")

    async def main() -> synthkit_rs.EvalResult:
        return await synthkit_rs.aevaluate(CASES, ANSWERS, synthesizers=synths, system="sk", jobs=3)

    awaited = asyncio.run(main())

    def timeless(rows: List[dict]) -> List[dict]:
        return [{k: v for k, v in r.items() if k != "wall_ms"} for r in rows]

    assert timeless(awaited.rows) == timeless(direct.rows)
    assert [t["correct"] for t in awaited.totals] == [t["correct"] for t in direct.totals]
    with pytest.raises(synthkit_rs.InputError, match="nothing to score"):
        synthkit_rs.aevaluate(CASES)
