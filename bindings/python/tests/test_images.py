"""Image nodes through the Python package: dicts and LlamaIndex ``ImageNode`` objects carry
their image to the model as an ``image_url`` part; ``multimodal=True`` and the
``chat_content_*`` templates are accepted."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import List

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI


def png(width: int, height: int, seed: int) -> bytes:
    """A small RGB PNG whose pixels depend on ``seed``."""
    rows = b"".join(
        b"\x00" + bytes(((x * 7) ^ (y * 13) ^ seed) & 0xFF for x in range(width * 3))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def image_urls(server: FakeOpenAI) -> List[str]:
    urls = []
    for r in server.requests:
        for m in r.body.get("messages") or []:
            content = m.get("content")
            if isinstance(content, list):
                urls += [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    return urls


def test_dict_image_nodes_reach_the_model() -> None:
    chart = base64.b64encode(png(8, 8, 1)).decode()
    photo = base64.b64encode(png(4, 4, 9)).decode()
    with FakeOpenAI(answer="A chart.") as server:
        synth = synthkit_rs.Synthesizer(
            "compact", base_url=server.base_url, model="fake-model", context_window=4096, evidence=False
        )
        response = synth.synthesize(
            "What does the chart show?",
            [
                {"id_": "chart", "text": "The chart.", "image": chart, "image_mimetype": "image/png"},
                {"id": "photo", "text": "", "image": {"data": photo, "mime_type": "image/png"}},
            ],
        )
        assert response.response == "A chart."
        assert image_urls(server) == [
            f"data:image/png;base64,{chart}",
            f"data:image/png;base64,{photo}",
        ]


def test_an_image_node_through_the_adapter_reaches_the_model() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.prompts import PromptTemplate
    from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    data = base64.b64encode(png(8, 8, 3)).decode()
    node = ImageNode(id_="chart", text="The sales chart.", image=data, image_mimetype="image/png")
    with FakeOpenAI(answer="Sales grew.") as server:
        synth = SynthkitSynthesizer(
            base_url=server.base_url,
            model="fake-model",
            context_window=4096,
            multimodal=True,
            chat_content_qa_template=PromptTemplate(
                "Context:\n{context_str}\nAnswer: {query_str}"
            ),
            evidence=False,
        )
        response = synth.synthesize(
            QueryBundle("What does the chart show?"), [NodeWithScore(node=node, score=0.9)]
        )
        assert str(response) == "Sales grew."
        assert image_urls(server) == [f"data:image/png;base64,{data}"]
        prompt = server.requests[0].prompt
        assert prompt.startswith("Context:") and "The sales chart." in prompt, prompt


def test_image_nodes_through_a_llamaindex_llm_are_refused_before_any_call() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    data = base64.b64encode(png(4, 4, 2)).decode()
    synth = SynthkitSynthesizer(llm=MockLLM(), multimodal=True)
    node = NodeWithScore(node=ImageNode(id_="i", image=data))
    with pytest.raises(synthkit_rs.SynthkitError, match="images"):
        synth.synthesize(QueryBundle("What?"), [node])


def test_an_image_path_or_url_is_never_read() -> None:
    synth = synthkit_rs.Synthesizer("compact")
    for node in ({"text": "x", "image_path": "/etc/passwd"}, {"image_url": "http://example.com/a.png"}):
        with pytest.raises(synthkit_rs.InputError):
            synth.synthesize("What?", [node])

