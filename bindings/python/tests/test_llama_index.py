"""SynthkitSynthesizer inside LlamaIndex query engines, over the loopback server."""

from __future__ import annotations

import asyncio
from typing import List

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.llms.openai_like")

from llama_index.core import Document, MockEmbedding, VectorStoreIndex  # noqa: E402
from llama_index.core.base.response.schema import (  # noqa: E402
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.prompts import PromptTemplate  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.response_synthesizers import ResponseMode  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402

import synthkit_rs  # noqa: E402
from fake_openai import DEFAULT_ANSWER, FakeOpenAI  # noqa: E402
from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer  # noqa: E402

QUERY = "How often is the mirror cleaned?"


def make_nodes() -> List[NodeWithScore]:
    texts = [
        "The mirror is cleaned every six months by the maintenance crew.",
        "The telescope dome opens at dusk and closes at dawn.",
        "Visitors may tour the observatory on Saturdays.",
    ]
    return [
        NodeWithScore(
            node=TextNode(id_=f"node-{i}", text=t, metadata={"page": i, "internal": "x"}, excluded_llm_metadata_keys=["internal"]),
            score=1.0 - i / 10,
        )
        for i, t in enumerate(texts)
    ]


class FixedRetriever(BaseRetriever):
    """Returns the same nodes for every query."""

    def __init__(self, nodes: List[NodeWithScore]) -> None:
        super().__init__()
        self._nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return list(self._nodes)


def llm_for(server: FakeOpenAI, **kwargs: object) -> OpenAILike:
    opts: dict = dict(api_base=server.base_url, model="fake-model", api_key="fake", is_chat_model=True, context_window=4096, max_tokens=200)
    opts.update(kwargs)
    return OpenAILike(**opts)


def test_retriever_query_engine(fake_server: FakeOpenAI) -> None:
    nodes = make_nodes()
    llm = llm_for(fake_server, temperature=0.3)
    engine = RetrieverQueryEngine(FixedRetriever(nodes), response_synthesizer=SynthkitSynthesizer(llm=llm, evidence=False))
    resp = engine.query(QUERY)
    assert isinstance(resp, Response)
    assert resp.response == DEFAULT_ANSWER
    assert [id(n) for n in resp.source_nodes] == [id(n) for n in nodes]
    assert resp.metadata == {f"node-{i}": {"page": i, "internal": "x"} for i in range(3)}
    assert fake_server.calls == 1
    req = fake_server.requests[0]
    assert req.body["model"] == "fake-model"
    assert req.body["max_tokens"] == 200
    assert req.body["temperature"] == pytest.approx(0.3)
    # Metadata is shown as LlamaIndex shows it (MetadataMode.LLM), excluded keys hidden.
    assert "page: 0\n\nThe mirror is cleaned" in req.prompt
    assert "internal" not in req.prompt


def test_synthesizer_reports_usage(fake_server: FakeOpenAI) -> None:
    synth = SynthkitSynthesizer(llm=llm_for(fake_server))
    synth.synthesize(QUERY, make_nodes())
    assert synth.last_response is not None
    assert synth.last_response.usage["calls"] == 1
    assert synth.synthesizer.context_window == 4096


def test_async_query(fake_server: FakeOpenAI) -> None:
    engine = RetrieverQueryEngine(FixedRetriever(make_nodes()), response_synthesizer=SynthkitSynthesizer(llm=llm_for(fake_server), response_mode=ResponseMode.TREE_SUMMARIZE))
    resp = asyncio.run(engine.aquery(QUERY))
    assert isinstance(resp, Response)
    assert resp.response == DEFAULT_ANSWER
    assert len(resp.source_nodes) == 3


def test_streaming_query(fake_server: FakeOpenAI) -> None:
    synth = SynthkitSynthesizer(llm=llm_for(fake_server), streaming=True)
    engine = RetrieverQueryEngine(FixedRetriever(make_nodes()), response_synthesizer=synth)
    resp = engine.query(QUERY)
    assert isinstance(resp, StreamingResponse)
    assert synth.last_response is None
    deltas = list(resp.response_gen)
    assert len(deltas) > 1 and "".join(deltas) == DEFAULT_ANSWER
    assert fake_server.requests[-1].stream
    assert len(resp.source_nodes) == 3
    # Once drained, the stream's full response is kept: its usage and sources.
    assert synth.last_response is not None
    assert synth.last_response.response == DEFAULT_ANSWER
    assert synth.last_response.usage["calls"] == 1


def test_async_streaming_query(fake_server: FakeOpenAI) -> None:
    synth = SynthkitSynthesizer(llm=llm_for(fake_server), streaming=True)
    engine = RetrieverQueryEngine(FixedRetriever(make_nodes()), response_synthesizer=synth)

    async def main() -> str:
        resp = await engine.aquery(QUERY)
        assert isinstance(resp, AsyncStreamingResponse)
        text = ""
        async for d in resp.async_response_gen():
            text += d
        return text

    assert asyncio.run(main()) == DEFAULT_ANSWER
    assert synth.last_response is not None and synth.last_response.usage["calls"] == 1


def test_vector_index_as_query_engine(fake_server: FakeOpenAI) -> None:
    docs = [Document(text=n.node.get_content(), id_=n.node.node_id) for n in make_nodes()]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    llm = llm_for(fake_server)
    engine = index.as_query_engine(llm=llm, response_synthesizer=SynthkitSynthesizer(llm=llm, evidence=False, on_unsupported="warn"), similarity_top_k=2)
    resp = engine.query(QUERY)
    assert str(resp) == DEFAULT_ANSWER
    assert len(resp.source_nodes) == 2
    assert all(isinstance(n, NodeWithScore) for n in resp.source_nodes)


def test_prompt_templates(fake_server: FakeOpenAI) -> None:
    qa = PromptTemplate("QA-MARK {context_str}\nQuestion: {query_str}\nAnswer:")
    refine = PromptTemplate("REFINE-MARK {query_str} / {existing_answer} / {context_msg}")
    synth = SynthkitSynthesizer(llm=llm_for(fake_server, context_window=700, max_tokens=100), response_mode="compact", text_qa_template=qa, refine_template=refine, evidence=False)
    long_nodes = [NodeWithScore(node=TextNode(id_=str(i), text=("filler " * 250) + str(i))) for i in range(3)]
    synth.synthesize(QUERY, long_nodes)
    prompts = [r.prompt for r in fake_server.requests]
    assert prompts[0].startswith("QA-MARK")
    assert len(prompts) >= 2 and all(p.startswith("REFINE-MARK") for p in prompts[1:])
    assert set(synth.get_prompts()) == {"text_qa_template", "refine_template"}
    synth.update_prompts({"text_qa_template": PromptTemplate("NEW-QA {context_str} {query_str}")})
    fake_server.reset()
    synth.synthesize(QUERY, make_nodes())
    assert fake_server.requests[0].prompt.startswith("NEW-QA")


def test_mock_llm_answers_through_the_python_path() -> None:
    synth = SynthkitSynthesizer(llm=MockLLM(max_tokens=3))
    assert synth.synthesizer.backend == "python"
    resp = RetrieverQueryEngine(FixedRetriever(make_nodes()), response_synthesizer=synth).query(QUERY)
    assert str(resp) == "text text text"


def test_no_llm_at_all_does_not_need_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.warns(UserWarning, match="offline extractive backend"):
        synth = SynthkitSynthesizer()
    assert synth.synthesizer.backend == "extractive"
    assert "six months" in str(synth.synthesize(QUERY, make_nodes()))


def test_the_usual_flow_runs_offline_with_the_synthesizers_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``index.as_query_engine(llm=synth.llm, response_synthesizer=synth)``: no model, no
    key, no LlamaIndex global set; without ``llm=`` LlamaIndex resolves its OpenAI default
    (and its key) before it looks at the synthesizer."""
    from llama_index.core import Settings, SummaryIndex

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    docs = [Document(text=n.node.get_content(), id_=n.node.node_id) for n in make_nodes()]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    with pytest.warns(UserWarning, match="offline extractive backend"):
        synth = SynthkitSynthesizer()
    with pytest.raises((ValueError, ImportError), match="OpenAI|openai"):
        index.as_query_engine(response_synthesizer=synth)
    engine = index.as_query_engine(llm=synth.llm, response_synthesizer=synth, similarity_top_k=3)
    resp = engine.query(QUERY)
    assert "six months" in str(resp)
    assert len(resp.source_nodes) == 3
    # An index that needs no embedding model: every node goes to the synthesizer.
    resp = SummaryIndex.from_documents(docs).as_query_engine(llm=synth.llm, response_synthesizer=synth).query(QUERY)
    assert "six months" in str(resp)
    assert Settings._llm is None and Settings._embed_model is None
    # The stand-in answers nothing itself, and means "no llm" where it is given as one.
    with pytest.raises(synthkit_rs.InputError, match="answers nothing itself"):
        synth.llm.complete("x")
    with pytest.warns(UserWarning, match="offline extractive backend"):
        assert SynthkitSynthesizer(llm=synth.llm).synthesizer.backend == "extractive"


def test_the_synthesizers_llm_is_the_llm_it_calls(fake_server: FakeOpenAI) -> None:
    llm = llm_for(fake_server)
    synth = SynthkitSynthesizer(llm=llm, evidence=False, on_unsupported="warn")
    assert synth.llm is llm
    docs = [Document(text=n.node.get_content(), id_=n.node.node_id) for n in make_nodes()]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=synth.llm, response_synthesizer=synth, similarity_top_k=3)
    assert str(engine.query(QUERY)) == DEFAULT_ANSWER
    assert fake_server.calls == 1


def test_empty_nodes_give_empty_response(fake_server: FakeOpenAI) -> None:
    resp = SynthkitSynthesizer(llm=llm_for(fake_server)).synthesize(QUERY, [])
    assert str(resp) == "Empty Response"
    assert fake_server.calls == 0


def test_get_response_with_text_chunks(fake_server: FakeOpenAI) -> None:
    synth = SynthkitSynthesizer(llm=llm_for(fake_server), evidence=False, on_unsupported="warn")
    assert synth.get_response(QUERY, ["a chunk", "another"]) == DEFAULT_ANSWER


def test_bad_mode_raises() -> None:
    with pytest.raises(synthkit_rs.InputError, match="unknown mode"):
        SynthkitSynthesizer(response_mode="fastest")


def test_citations_through_adapter(fake_server: FakeOpenAI) -> None:
    synth = SynthkitSynthesizer(llm=llm_for(fake_server), citations=True)
    synth.synthesize(QUERY, make_nodes())
    assert "[1]" in fake_server.requests[0].prompt
    assert synth.last_response is not None and synth.last_response.citations == []


def test_any_llm_is_called_with_its_metadata() -> None:
    from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
    from llama_index.core.llms import CustomLLM

    class Local(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=2048, num_output=128)

        def complete(self, prompt: str, formatted: bool = False, **kwargs: object) -> CompletionResponse:
            return CompletionResponse(text="x")

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: object):  # type: ignore[no-untyped-def]
            yield CompletionResponse(text="x", delta="x")

    synth = SynthkitSynthesizer(llm=Local())
    assert synth.synthesizer.backend == "python"
    assert str(synth.synthesize(QUERY, make_nodes())) == "x"
    assert synth.synthesizer.context_window == 2048
    assert synth.synthesizer.num_output == 128


def test_llama_index_objects_follow_the_one_id_rule() -> None:
    """The plain API reads LlamaIndex objects by attribute, with the library's id rule."""
    nodes: list = [NodeWithScore(node=TextNode(id_="li-7", text="a"), score=0.5), "b", TextNode(id_="x", text="c")]
    r = synthkit_rs.Synthesizer("no_text").synthesize(QUERY, nodes)
    assert [n.id for n in r.source_nodes] == ["li-7", "2", "x"]
    assert r.source_nodes[0].score == 0.5
    twice = [NodeWithScore(node=TextNode(id_="n", text="a")), NodeWithScore(node=TextNode(id_="n", text="a"), score=0.1)]
    with pytest.raises(synthkit_rs.InputError, match='node 2 has the id "n", as node 1 does'):
        synthkit_rs.Synthesizer("no_text").synthesize(QUERY, twice)


def test_adapter_keeps_a_node_retrieved_twice(fake_server: FakeOpenAI) -> None:
    """A fused retriever may return one node twice: LlamaIndex sends both, and so do we."""
    node = TextNode(id_="n", text="The mirror is cleaned every six months.")
    twice = [NodeWithScore(node=node, score=0.9), NodeWithScore(node=node, score=0.4), NodeWithScore(node=TextNode(id_="n#2", text="Other."))]
    synth = SynthkitSynthesizer(llm=llm_for(fake_server), response_mode="compact", evidence=False)
    response = synth.synthesize(QUERY, twice)
    assert [n.node.node_id for n in response.source_nodes] == ["n", "n", "n#2"]
    prompt = fake_server.requests[-1].prompt
    assert prompt.count("The mirror is cleaned every six months.") == 2
    assert "Other." in prompt
