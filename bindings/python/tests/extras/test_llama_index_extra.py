"""The [llama-index] extra: the adapter's namespace import and one synthesis (offline)."""

from __future__ import annotations

import pytest

from extra_support import need

need("llama_index.core", "llama-index")


def test_one_synthesis_through_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_index.core.schema import NodeWithScore, TextNode

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.warns(UserWarning, match="offline extractive backend"):
        synth = SynthkitSynthesizer(response_mode="compact")
    nodes = [NodeWithScore(node=TextNode(id_="m", text="The mirror is cleaned every six months."))]
    response = synth.synthesize("How often is the mirror cleaned?", nodes)
    assert "six months" in str(response)
    assert [n.node.node_id for n in response.source_nodes] == ["m"]


def test_the_usual_flow_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """``index.as_query_engine`` in a venv of llama-index-core alone (no OpenAI package, no
    key): the synthesizer's ``llm`` keeps LlamaIndex from resolving its OpenAI default."""
    from llama_index.core import Document, MockEmbedding, VectorStoreIndex

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    docs = [Document(text="The mirror is cleaned every six months."), Document(text="The dome opens at dusk.")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    with pytest.warns(UserWarning, match="offline extractive backend"):
        synth = SynthkitSynthesizer()
    engine = index.as_query_engine(llm=synth.llm, response_synthesizer=synth, similarity_top_k=2)
    assert "six months" in str(engine.query("How often is the mirror cleaned?"))
