"""Quoted citations (``citations="quotes"``): each quote's status and character offsets,
and numbers no cited source has, on the response."""

from __future__ import annotations

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI

# Non-ASCII text before the quote: character offsets differ from byte offsets.
DOME = "Die Kuppel öffnet sich — the dome opens at dusk."
MIRROR = "The mirror is cleaned every six months."
NODES = [{"id": "dome", "text": DOME}, {"id": "mirror", "text": MIRROR}]
REPLY = 'At dusk [1] "the dome opens at dusk", by 3 people [2] "invented words".'


def test_quotes_have_status_and_character_offsets() -> None:
    with FakeOpenAI(answer=REPLY) as server:
        synth = synthkit_rs.Synthesizer("compact", base_url=server.base_url, citations="quotes")
        assert "citations='quotes'" in repr(synth)
        r = synth.synthesize("When?", NODES)
        assert "exact words from source n" in server.requests[-1].prompt
    assert r.response == REPLY
    verified, fabricated = r.quotes
    assert verified["status"] == "verified"
    assert verified["node_id"] == "dome"
    assert DOME[verified["start"]:verified["end"]] == "the dome opens at dusk"
    assert fabricated["status"] == "not_found"
    assert fabricated["start"] is None
    # The fabricated quote's source is not cited.
    assert [c["node_ids"] for c in r.citations] == [["dome"]]
    assert r.unsupported_numbers[0]["number"] == "3"


def test_plain_citations_have_no_quotes_and_bad_styles_are_refused() -> None:
    with FakeOpenAI(answer=REPLY) as server:
        r = synthkit_rs.Synthesizer("compact", base_url=server.base_url, citations=True).synthesize(
            "When?", NODES
        )
        assert r.quotes == []
        with pytest.raises(synthkit_rs.InputError):
            synthkit_rs.Synthesizer("compact", base_url=server.base_url, citations="pages")
