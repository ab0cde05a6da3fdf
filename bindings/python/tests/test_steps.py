"""``return_steps=True``: every model call's step in ``Response.steps`` (and ``to_dict``)."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI

QUERY = "How often is the mirror cleaned?"
# Long enough that a 512-token window needs several calls.
NODES = [
    {"id": f"n{i}", "text": f"Chunk {i}: " + "the mirror is cleaned every six months. " * 30}
    for i in range(8)
]


def numbered_answers() -> Any:
    """Answers 'reply 1', 'reply 2', ... in call order."""
    seen: List[int] = []

    def answer(prompt: str) -> str:
        seen.append(1)
        return f"reply {len(seen)}"

    return answer


def check_common(steps: List[Dict[str, Any]], server: FakeOpenAI, mode: str) -> None:
    assert len(steps) == server.calls > 1
    # Ordered by tree level, then index; `call` numbers the calls in finishing order.
    assert [(s["level"], s["index"]) for s in steps] == sorted((s["level"], s["index"]) for s in steps)
    assert sorted(s["call"] for s in steps) == list(range(1, len(steps) + 1))
    for s in steps:
        assert s["mode"] == mode
        assert s["prompt_tokens"] > 0 and s["completion_tokens"] > 0
        assert s["max_tokens"] > 0 and s["ms"] >= 0
        assert s["reply"].startswith("reply ") and not s["reply_cut"]
        assert s["reply_bytes"] == len(s["reply"].encode())
        assert s["retries"] == 0 and not s["truncated"]
    # Every node was read by some call; none is invented.
    read = {n for s in steps for n in s["node_ids"]}
    assert read == {n["id"] for n in NODES}


def test_refine_chain_steps() -> None:
    with FakeOpenAI(answer=numbered_answers()) as server:
        synth = synthkit_rs.Synthesizer(
            "refine", base_url=server.base_url, context_window=512, num_output=64, return_steps=True, evidence=False
        )
        r = synth.synthesize(QUERY, NODES)
        steps = r.steps
        assert steps is not None
        check_common(steps, server, "refine")
        assert steps[0]["step"] == "qa"
        assert all(s["step"] == "refine" for s in steps[1:])
        # The chain's answers, in order; the last is the answer.
        assert [s["call"] for s in steps] == list(range(1, len(steps) + 1))
        assert [s["reply"] for s in steps] == [f"reply {i}" for i in range(1, len(steps) + 1)]
        assert r.response == steps[-1]["reply"]
        # The same steps in the service's JSON shape.
        d = r.to_dict()
        assert d["steps"] == steps
        json.dumps(d)


def test_tree_levels_steps() -> None:
    with FakeOpenAI(answer=numbered_answers()) as server:
        synth = synthkit_rs.Synthesizer(
            "tree_summarize",
            base_url=server.base_url,
            context_window=512,
            num_output=64,
            return_steps=True,
            evidence=False,
        )
        r = synth.synthesize(QUERY, NODES)
        steps = r.steps
        assert steps is not None
        check_common(steps, server, "tree_summarize")
        levels = sorted({s["level"] for s in steps})
        assert levels[0] == 0 and len(levels) >= 2
        top = [s for s in steps if s["level"] == levels[-1]]
        assert len(top) == 1 and r.response == top[0]["reply"]
        # A summary of a higher level names the calls it summarized.
        for s in steps:
            if s["level"] > 0:
                assert s["input_calls"], s


def test_off_by_default(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer("refine", base_url=fake_server.base_url)
    r = synth.synthesize(QUERY, NODES[:2])
    assert r.steps is None
    assert "steps" not in r.to_dict()


def test_llama_index_adapter_keeps_steps() -> None:
    pytest.importorskip("llama_index.core")
    pytest.importorskip("llama_index.llms.openai_like")
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    with FakeOpenAI(answer=numbered_answers()) as server:
        llm = OpenAILike(
            api_base=server.base_url,
            model="fake-model",
            api_key="fake",
            is_chat_model=True,
            context_window=512,
            max_tokens=64,
        )
        synth = SynthkitSynthesizer(llm=llm, response_mode="refine", return_steps=True, evidence=False)
        nodes = [NodeWithScore(node=TextNode(id_=n["id"], text=n["text"]), score=1.0) for n in NODES]
        response = synth.synthesize(QUERY, nodes)
        last = synth.last_response
        assert last is not None and last.steps is not None
        check_common(last.steps, server, "refine")
        assert str(response) == last.steps[-1]["reply"]
