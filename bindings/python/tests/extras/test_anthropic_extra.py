"""The [anthropic] extra: LlamaIndex's Anthropic LLM as the adapter's ``llm``, one synthesis
against llama-server's Messages API with SmolLM2 (as tests/test_anthropic.py). Fails when the
extra lets pip pick an `anthropic` SDK the LLM cannot use (2.x: "Cannot instantiate
typing.Union")."""

from __future__ import annotations

from typing import Iterator

import pytest

from extra_support import need

need("llama_index.llms.anthropic", "anthropic")

from llama_server import LlamaServer, start_smollm2  # noqa: E402

#: The first run may build llama-server (about 10 minutes on 2 cores).
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    s = start_smollm2(2048, "-np 1")
    yield s
    s.stop()


def test_one_synthesis_through_the_anthropic_llm(server: LlamaServer) -> None:
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.anthropic import Anthropic

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    llm = Anthropic(model="claude-haiku-4-5", base_url=server.root, api_key="none",
                    max_tokens=32, temperature=0.0)
    synth = SynthkitSynthesizer(llm=llm, response_mode="compact", context_window=1024)
    nodes = [NodeWithScore(node=TextNode(text="The mirror is cleaned every six months."))]
    response = synth.synthesize("How often is the mirror cleaned?", nodes)
    assert str(response).strip()
    usage = synth.last_response.usage
    assert usage["calls"] == 1 and usage["prompt_tokens"] > 0, usage
