""""Not in the sources": a reply that says so gives ``answerable`` False and the configured
answer, streamed or not; a refine reply that only talks about the answer keeps it."""

from __future__ import annotations

from typing import List

import synthkit_rs

NODES = ["The mirror is cleaned every six months.", "The dome opens at dusk."]


def test_not_in_the_sources_is_answerable_false_with_the_configured_answer() -> None:
    synth = synthkit_rs.Synthesizer("compact", llm=lambda p: "Not in the sources.", chat=False,
                                    context_window=2048, num_output=64,
                                    not_in_sources_answer="No idea.")
    r = synth.synthesize("Who built the dome?", NODES)
    assert r.answerable is False
    assert r.response == "No idea."
    stream = synth.stream("Who built the dome?", NODES)
    assert "".join(stream) == "No idea."


def test_an_answer_is_answerable_and_the_prompts_say_how_to_abstain() -> None:
    prompts: List[str] = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return "Every six months."

    synth = synthkit_rs.Synthesizer("compact", llm=llm, chat=False, context_window=2048,
                                    num_output=64)
    r = synth.synthesize("How often is the mirror cleaned?", NODES)
    assert r.answerable is True
    assert r.response == "Every six months."
    assert "Not in the sources" in prompts[0]


def test_a_refine_reply_about_the_answer_keeps_the_answer() -> None:
    replies = iter(["Every six months.", "The original answer remains accurate."])
    synth = synthkit_rs.Synthesizer("refine", llm=lambda p: next(replies), chat=False,
                                    context_window=2048, num_output=64, return_steps=True, evidence=False)
    r = synth.synthesize("How often is the mirror cleaned?", NODES)
    assert r.response == "Every six months."
    assert r.steps is not None and r.steps[-1]["kept_previous"] is True
    assert r.steps[-1]["not_used"] == "talks_about_answer"


def test_a_declined_query_the_evidence_covers_is_answered_with_the_sources_sentences() -> None:
    def declines(prompt: str) -> str:
        return "Not in the sources."

    query = "How often is the mirror cleaned?"
    synth = synthkit_rs.Synthesizer("compact", llm=declines, chat=False, context_window=2048,
                                    num_output=64)
    r = synth.synthesize(query, NODES)
    assert r.answerable is True
    assert r.response == "The mirror is cleaned every six months."
    assert r.evidence["extracted"]["declined"] == "The sources do not answer this question."
    keep = synthkit_rs.Synthesizer("compact", llm=declines, chat=False, context_window=2048,
                                   num_output=64, on_declined="keep")
    r = keep.synthesize(query, NODES)
    assert r.answerable is False
    assert "extracted" not in r.evidence
    try:
        synthkit_rs.Synthesizer("compact", llm=declines, chat=False, on_declined="never")
    except synthkit_rs.InputError as e:
        assert "on_declined" in str(e) and '"keep"' in str(e)
    else:
        raise AssertionError("on_declined='never' was taken")


def test_escalate_answers_from_every_node_when_the_first_abstains() -> None:
    calls: List[str] = []

    def llm(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) == 1:  # compact over the first node only: the dome
            return "Not in the sources."
        if "Confidence:" in prompt:  # the reduce, over the map records
            return "Every six months."
        found = "mirror is cleaned" in prompt
        return ('{"information": "%s", "confidence": %d, "no_information": %s}'
                % ("The mirror is cleaned every six months." if found else "",
                   5 if found else 0, "false" if found else "true"))

    nodes = ["The dome opens at dusk.", "The mirror is cleaned every six months."]
    synth = synthkit_rs.Synthesizer("compact", llm=llm, chat=False, context_window=2048,
                                    num_output=64, evidence=False, on_unsupported="warn",
                                    escalate=1)
    r = synth.synthesize("How often is the mirror cleaned?", nodes)
    assert r.response == "Every six months.", (r.response, calls)
    assert r.escalation["escalated"] is True
    assert (r.escalation["reason"], r.escalation["first_nodes"]) == ("abstained", 1)
    assert (r.escalation["from"], r.escalation["to"]) == ("compact", "map_reduce")
    assert r.usage["calls"] == len(calls) >= 3
    try:
        synth.stream("How often is the mirror cleaned?", nodes)
    except synthkit_rs.InputError as e:
        assert "escalate=" in str(e)
    else:
        raise AssertionError("a stream was escalated")
    for bad in (0, -2, "yes"):
        try:
            synthkit_rs.Synthesizer("compact", llm=llm, chat=False, escalate=bad)
        except synthkit_rs.InputError as e:
            assert "escalate=" in str(e)
        else:
            raise AssertionError(f"escalate={bad!r} was taken")
    plain = synthkit_rs.Synthesizer("compact", llm=lambda p: "Not in the sources.", chat=False,
                                    context_window=2048, num_output=64, evidence=False)
    assert plain.synthesize("How often is the mirror cleaned?", nodes).escalation is None
