"""The plain API with the offline extractive backend: calls, async, streaming, input shapes, errors."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

import synthkit_rs

QUERY = "How often is the mirror cleaned?"
NODES = [
    "The mirror is cleaned every six months by the maintenance crew.",
    "The telescope dome opens at dusk.",
]


def test_synthesize_strings() -> None:
    synth = synthkit_rs.Synthesizer()
    r = synth.synthesize(QUERY, NODES)
    assert isinstance(r, synthkit_rs.Response)
    assert "six months" in r.response
    assert str(r) == r.response
    assert r.usage["calls"] == 1
    assert set(r.usage) >= {"calls", "prompt_tokens", "completion_tokens"}
    assert [n.id for n in r.source_nodes] == ["1", "2"]
    assert r.source_nodes[0].text == NODES[0]
    assert r.citations is None
    assert synth.backend == "extractive"
    assert synth.mode == "compact"


@pytest.mark.parametrize("mode", synthkit_rs.MODES)
def test_every_mode_runs(mode: str) -> None:
    r = synthkit_rs.Synthesizer(mode).synthesize(QUERY, NODES)
    assert isinstance(r.response, str)
    if mode in ("no_text", "context_only"):
        assert r.usage["calls"] == 0


def test_dict_and_object_nodes() -> None:
    nodes: list[Any] = [
        {"id": "a", "text": NODES[0], "metadata": {"file": "m.md", "n": 3, "tags": ["x"]}, "score": 0.5},
        {"node": {"id_": "b", "text": NODES[1]}, "score": 0.25},
        SimpleNamespace(
            node=SimpleNamespace(
                node_id="c",
                get_content=lambda: "The dome is painted white.",
                metadata={"secret": "s"},
                excluded_llm_metadata_keys=["secret"],
            ),
            score=None,
        ),
        SimpleNamespace(id_="d", text="Plain object text.", metadata=None),
    ]
    r = synthkit_rs.Synthesizer("no_text").synthesize(QUERY, nodes)
    ids = [n.id for n in r.source_nodes]
    assert ids == ["a", "b", "c", "d"]
    assert r.source_nodes[0].metadata == {"file": "m.md", "n": 3, "tags": ["x"]}
    assert r.source_nodes[0].score == 0.5
    assert r.source_nodes[1].score == 0.25
    assert r.source_nodes[2].score is None
    assert r.metadata["a"]["file"] == "m.md"
    assert r.source_nodes[3].to_dict() == {"id": "d", "text": "Plain object text.", "metadata": {}, "score": None}


def test_ids_follow_the_one_rule() -> None:
    """One id rule for every front end (issue 17): ``id``, else ``id_``, else ``node_id``,
    else the 1-based position. Before, this list gave ``li-7, 1, x`` here."""
    nodes: list[Any] = [{"node": {"id_": "li-7", "text": "a"}}, {"text": "b"}, {"id": "x", "text": "c"}]
    r = synthkit_rs.Synthesizer("no_text").synthesize(QUERY, nodes)
    assert [n.id for n in r.source_nodes] == ["li-7", "2", "x"]
    # Objects read by attribute follow it too; numpy-like scores are floats.
    objects: list[Any] = [
        SimpleNamespace(node=SimpleNamespace(id_="li-7", node_id="li-7", text="a"), score=0.5),
        SimpleNamespace(text="b"),
        SimpleNamespace(id="x", text="c", score=1),
    ]
    r = synthkit_rs.Synthesizer("no_text").synthesize(QUERY, objects)
    assert [n.id for n in r.source_nodes] == ["li-7", "2", "x"]
    assert [n.score for n in r.source_nodes] == [0.5, None, 1.0]


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([{"id": "x", "text": "a"}, "b", {"id_": "x", "text": "c"}], r'node 3 has the id "x", as node 1 does: give each node its own id'),
        (["a", {"id": "1", "text": "b"}], r'node 2 has the id "1", as node 1 does \(node 1 gives no id, so its position is its id\)'),
        ([SimpleNamespace(node_id="n", text="a"), SimpleNamespace(node=SimpleNamespace(id_="n", text="b"))], r'node 2 has the id "n"'),
        ([{"id": "a", "id_": "b", "text": "t"}], r'node 1: `id` \("a"\) and `id_` \("b"\) differ: give one id'),
        ([SimpleNamespace(id_="a", node_id="b", text="t")], r'node 1: `id_` \("a"\) and `node_id` \("b"\) differ'),
        ([{"id": 3, "text": "t"}], "node 1: `id` must be a string, got a number"),
    ],
)
def test_duplicate_and_conflicting_ids_are_refused(nodes: Any, message: str) -> None:
    """Accepted before (the later node kept its id; the first id field won)."""
    with pytest.raises(synthkit_rs.InputError, match=message):
        synthkit_rs.Synthesizer("no_text").synthesize(QUERY, nodes)


def test_context_only_shows_metadata_as_llamaindex() -> None:
    nodes = [{"id": "a", "text": "Body.", "metadata": {"file": "m.md", "hidden": 1}, "excluded_llm_metadata_keys": ["hidden"]}]
    r = synthkit_rs.Synthesizer("context_only").synthesize(QUERY, nodes)
    assert "file: m.md\n\nBody." in r.response
    assert "hidden" not in r.response


def test_async() -> None:
    synth = synthkit_rs.Synthesizer("tree_summarize")

    async def main() -> list[synthkit_rs.Response]:
        return await asyncio.gather(*(synth.asynthesize(QUERY, NODES) for _ in range(5)))

    results = asyncio.run(main())
    assert len({r.response for r in results}) == 1
    assert "six months" in results[0].response


def test_stream_sync_equals_plain() -> None:
    synth = synthkit_rs.Synthesizer("compact")
    plain = synth.synthesize(QUERY, NODES).response
    stream = synth.stream(QUERY, NODES)
    assert stream.response is None
    deltas = list(stream)
    assert "".join(deltas) == plain
    assert stream.done
    assert stream.text == plain
    final = stream.response
    assert final is not None and final.response == plain
    assert final.usage["calls"] == 1
    assert stream.get_response().response == plain
    assert list(stream) == []


def test_stream_async() -> None:
    synth = synthkit_rs.Synthesizer("refine")

    async def main() -> tuple[str, synthkit_rs.Response]:
        stream = synth.stream(QUERY, NODES)
        text = ""
        async for delta in stream:
            text += delta
        return text, await stream.aget_response()

    text, final = asyncio.run(main())
    assert text == final.response
    assert "six months" in text


def test_get_response_drains() -> None:
    stream = synthkit_rs.Synthesizer().stream(QUERY, NODES)
    assert "six months" in stream.get_response().response


def test_citations() -> None:
    r = synthkit_rs.Synthesizer(citations=True).synthesize(QUERY, NODES)
    assert r.citations is not None
    assert isinstance(r.citations, list)
    for c in r.citations:
        assert set(c) == {"marker", "node_ids"}


def test_empty_nodes() -> None:
    r = synthkit_rs.Synthesizer().synthesize(QUERY, [])
    assert r.source_nodes == []


def test_unknown_mode() -> None:
    with pytest.raises(synthkit_rs.InputError, match="unknown mode `fastest`.*compact"):
        synthkit_rs.Synthesizer("fastest")


def test_errors_are_exceptions() -> None:
    assert issubclass(synthkit_rs.InputError, synthkit_rs.SynthkitError)
    assert issubclass(synthkit_rs.ModelError, synthkit_rs.SynthkitError)
    assert issubclass(synthkit_rs.SynthkitError, Exception)


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([{"id": "x"}], r"node 1 has no `text`.*keys given: \"id\""),
        ([{"id": "x", "text": None}], "node 1 has no `text`"),
        (["ok", {"text": 3}], "node 2: `text` must be a string, got a number"),
        ([object()], "node 1 has no text: .*got object"),
        (["ok", {"text": "t", "score": "high"}], "node 2: `score` must be a number or null, got a string"),
        ([{"text": "t", "score": float("nan")}], "node 1: `score` must be a finite number"),
        ([{"text": "t", "metadata": [1]}], "node 1: `metadata` must be an object, got an array"),
        ([{"text": "t", "metadata": object()}], "node 1: `metadata` must be a dict, got object"),
        ([{"text": b"bytes"}], "node 1: `text` must be a string, got bytes"),
        ([{"node": {"node": {"text": "t"}}}], "node 1: a NodeWithScore's `node` holds another NodeWithScore"),
        ([{"node": {"text": "t"}, "text": "u"}], "node 1: `text` beside `node`"),
        ("just a string", "nodes must be a list"),
        (42, "nodes must be a list"),
    ],
)
def test_bad_nodes(nodes: Any, message: str) -> None:
    with pytest.raises(synthkit_rs.InputError, match=message):
        synthkit_rs.Synthesizer().synthesize(QUERY, nodes)


def test_bad_options() -> None:
    with pytest.raises(synthkit_rs.InputError, match="base_url must start with http"):
        synthkit_rs.Synthesizer(base_url="localhost:8080")
    with pytest.raises(synthkit_rs.InputError, match="context_window"):
        synthkit_rs.Synthesizer(context_window=100, num_output=256)
    with pytest.raises(synthkit_rs.InputError, match="timeout"):
        synthkit_rs.Synthesizer(timeout=-1)
    with pytest.raises(synthkit_rs.InputError):
        synthkit_rs.Synthesizer(qa_template="no variables here")
    with pytest.raises(synthkit_rs.InputError, match="qa_template must be a string"):
        synthkit_rs.Synthesizer(qa_template=3)


def test_custom_template() -> None:
    t = "Context:\n{context_str}\nQ: {query_str}\nA:"
    r = synthkit_rs.Synthesizer("compact", qa_template=t).synthesize(QUERY, NODES)
    assert "six months" in r.response


def test_repr() -> None:
    s = repr(synthkit_rs.Synthesizer("refine", context_window=2048))
    assert "mode=\"refine\"" in s and "context_window=2048" in s
    r = synthkit_rs.Synthesizer().synthesize(QUERY, NODES)
    assert repr(r).startswith("Response(")
    assert repr(r.source_nodes[0]).startswith("SourceNode(")
