"""The [openai] extra: LlamaIndex's OpenAILike LLM as the adapter's ``llm``, one synthesis
against the loopback fake OpenAI-compatible server."""

from __future__ import annotations

from extra_support import need

need("llama_index.llms.openai_like", "openai")

from fake_openai import DEFAULT_ANSWER, FakeOpenAI  # noqa: E402


def test_one_synthesis_through_openai_like() -> None:
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    with FakeOpenAI() as server:
        llm = OpenAILike(api_base=server.base_url, model=server.model, api_key="none",
                         is_chat_model=True, context_window=4096, max_tokens=64)
        synth = SynthkitSynthesizer(llm=llm, response_mode="compact")
        assert synth.synthesizer.backend == "python"
        nodes = [NodeWithScore(node=TextNode(text="The mirror is cleaned every six months."))]
        response = synth.synthesize("How often is the mirror cleaned?", nodes)
        assert str(response) == DEFAULT_ANSWER
        assert server.calls == 1 and "six months" in server.requests[0].prompt
