"""Structured answers and the rest of get_response_synthesizer's arguments.

``output_cls`` and ``structured_answer_filtering`` through ``SynthkitSynthesizer`` on the
conformance traces' inputs, against the same loopback server as LlamaIndex's own
synthesizer (which answers every call with one JSON object that fits both the answer's
model and a filtering verdict): the same kind of response, never a prompt over the
budget, and never more calls, except where LlamaIndex saved calls by sending prompts over
its own budget. Then the
templates in their chat forms, and the arguments that are refused.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.llms.openai_like")

from llama_index.core import get_response_synthesizer  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.base.response.schema import PydanticResponse  # noqa: E402
from llama_index.core.indices.prompt_helper import PromptHelper  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate  # noqa: E402
from llama_index.core.response_synthesizers import ResponseMode  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.core.utils import get_tokenizer  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402
from pydantic import BaseModel  # noqa: E402

import synthkit_rs  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer  # noqa: E402
from test_call_counts import TRACES, nodes_of  # noqa: E402

CASES = ["n50_w1024.json", "n50_mixed_sizes.json", "overlap_0.json"]
REPLY = {"answer": "The mirror is cleaned every six months.", "query_satisfied": True}


class Answer(BaseModel):
    """The answer's model (its fields fit the filtering verdict too)."""

    answer: str
    query_satisfied: bool


def over_budget(server: FakeOpenAI, budget: int) -> int:
    """How many of the prompts the server received were over ``budget`` tokens (cl100k)."""
    count = get_tokenizer()
    return sum(1 for r in server.requests if len(count(r.prompt)) > budget)


def run_both(case: str, mode: str, **options: Any) -> Any:
    with open(os.path.join(TRACES, case)) as f:
        inputs = json.load(f)["inputs"]
    window, num_output = inputs["context_window"], inputs["num_output"]
    with FakeOpenAI(answer=json.dumps(REPLY), report_usage=False) as server:
        llm = OpenAILike(
            api_base=server.base_url, model="fake-model", api_key="fake", is_chat_model=True,
            context_window=window, max_tokens=num_output,
        )
        helper = PromptHelper(
            context_window=window, num_output=num_output,
            chunk_overlap_ratio=inputs["chunk_overlap_ratio"],
        )
        reference = get_response_synthesizer(
            llm=llm, response_mode=ResponseMode(mode), prompt_helper=helper, **options
        )
        theirs_response = reference.synthesize(inputs["query"], nodes_of(inputs))
        theirs = server.calls
        theirs_over = over_budget(server, window - num_output)
        server.reset()
        ours_synth = SynthkitSynthesizer(llm=llm, response_mode=mode, prompt_helper=helper, **options, evidence=False,
                                         on_unsupported="warn")
        ours_response = ours_synth.synthesize(inputs["query"], nodes_of(inputs))
        ours = server.calls
        assert over_budget(server, window - num_output) == 0
    if ours > theirs:
        # The one allowed exception (as in the conformance suites): LlamaIndex saved calls
        # by sending prompts over its own budget (with output_cls its structured calls add
        # the format instructions after packing), which synthkit never does.
        assert theirs_over > 0, f"{case} {mode}: synthkit {ours} calls, LlamaIndex {theirs}"
    return ours_response, theirs_response


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["compact", "refine", "tree_summarize"])
def test_output_cls_gives_a_pydantic_response_in_no_more_calls(case: str, mode: str) -> None:
    ours, theirs = run_both(case, mode, output_cls=Answer)
    assert isinstance(theirs, PydanticResponse)
    assert isinstance(ours, PydanticResponse)
    assert isinstance(ours.response, Answer)
    assert ours.response == Answer(**REPLY)
    assert ours.get_response().response == str(theirs.get_response().response)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["compact", "refine"])
def test_structured_answer_filtering_in_no_more_calls(case: str, mode: str) -> None:
    ours, theirs = run_both(case, mode, structured_answer_filtering=True)
    assert str(ours) == str(theirs) == REPLY["answer"]


def test_unsatisfied_steps_leave_the_answer_unchanged() -> None:
    def answer(prompt: str) -> str:
        satisfied = "KEY FACT" in prompt
        text = "The key fact is found." if satisfied else "I cannot tell."
        return json.dumps({"query_satisfied": satisfied, "answer": text})

    texts = ["Nothing here.", "KEY FACT: the mirror is cleaned.", "Nothing here either."]
    with FakeOpenAI(answer=answer) as server:
        synth = synthkit_rs.Synthesizer(
            "refine", base_url=server.base_url, structured_answer_filtering=True, evidence=False
        )
        r = synth.synthesize("What is the key fact?", texts)
        assert r.response == "The key fact is found."
        assert r.usage["calls"] == 3


def test_output_schema_on_the_synthesizer() -> None:
    schema = Answer.model_json_schema()
    with FakeOpenAI(answer=json.dumps(REPLY)) as server:
        for given in (schema, json.dumps(schema), Answer):
            synth = synthkit_rs.Synthesizer(base_url=server.base_url, output_schema=given, evidence=False)
            r = synth.synthesize("How often?", ["The mirror is cleaned every six months."])
            assert r.structured == REPLY
        # The schema reached the server as OpenAI's response_format.
        assert "response_format" in server.requests[-1].body
        with pytest.raises(synthkit_rs.InputError, match="output_schema"):
            synthkit_rs.Synthesizer(base_url=server.base_url, output_schema=[1, 2])
        with pytest.raises(synthkit_rs.InputError, match="output_schema"):
            synthkit_rs.Synthesizer(base_url=server.base_url, output_schema={"bad": {1, 2}})
        with pytest.raises(synthkit_rs.InputError, match="not a valid JSON schema"):
            synthkit_rs.Synthesizer(base_url=server.base_url, output_schema={"type": "nope"})
        with pytest.raises(synthkit_rs.InputError, match="cannot be combined"):
            synthkit_rs.Synthesizer(
                base_url=server.base_url, output_schema=schema, structured_answer_filtering=True
            )
        with pytest.raises(synthkit_rs.InputError, match="citations"):
            synthkit_rs.Synthesizer(base_url=server.base_url, output_schema=schema, citations=True)


@pytest.mark.parametrize("mode", ["tree_summarize", "simple_summarize", "accumulate", "generation"])
def test_filtering_outside_refine_and_compact_is_refused(mode: str) -> None:
    with pytest.raises(synthkit_rs.InputError, match="refine and compact"):
        synthkit_rs.Synthesizer(mode, structured_answer_filtering=True)
    with pytest.raises(synthkit_rs.InputError, match="refine and compact"):
        SynthkitSynthesizer(llm=MockLLM(), response_mode=mode, structured_answer_filtering=True)


def test_refused_arguments_say_why() -> None:
    with pytest.raises(synthkit_rs.InputError, match="program_factory is not supported: it builds"):
        SynthkitSynthesizer(llm=MockLLM(), program_factory=lambda t: None)
    with pytest.raises(synthkit_rs.InputError, match="chat_content_qa_template and its text"):
        SynthkitSynthesizer(
            llm=MockLLM(),
            text_qa_template="{query_str}",
            chat_content_qa_template=PromptTemplate("{query_str}"),
        )
    with pytest.raises(synthkit_rs.InputError, match="api='anthropic' applies to the direct"):
        SynthkitSynthesizer(llm=MockLLM(), api="anthropic")
    with pytest.raises(synthkit_rs.InputError, match="chat_prompt_helper"):
        SynthkitSynthesizer(llm=MockLLM(), chat_prompt_helper=object())
    with pytest.raises(synthkit_rs.InputError, match="streaming"):
        SynthkitSynthesizer(llm=MockLLM(), output_cls=Answer, streaming=True)
    with pytest.raises(synthkit_rs.InputError, match="pydantic"):
        SynthkitSynthesizer(llm=MockLLM(), output_cls=dict)


class Recorder(MockLLM):
    """A MockLLM that records the prompts it completes."""

    prompts: List[str] = []

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        self.prompts.append(prompt)
        return super().complete(prompt, formatted=formatted, **kwargs)


def chat_template(instruction: str, variables: str) -> ChatPromptTemplate:
    return ChatPromptTemplate(
        message_templates=[
            ChatMessage(role=MessageRole.SYSTEM, content="You answer from the context only."),
            ChatMessage(role=MessageRole.USER, content=f"{instruction}\n{variables}"),
        ]
    )


TEMPLATES: Dict[str, Any] = {
    "compact": {
        "text_qa_template": chat_template("QA.", "Context: {context_str}\nQ: {query_str}\nA: "),
        "refine_template": chat_template(
            "REFINE.", "Q: {query_str}\nOld: {existing_answer}\nNew context: {context_msg}\nA: "
        ),
    },
    "tree_summarize": {
        "summary_template": chat_template("SUMMARY.", "{context_str}\nQ: {query_str}\nA: "),
    },
    "generation": {
        "simple_template": chat_template("SIMPLE.", "Q: {query_str}\nA: "),
    },
}


@pytest.mark.parametrize("mode", sorted(TEMPLATES))
@pytest.mark.parametrize("form", ["chat", "text"])
def test_templates_in_either_form_give_llamaindex_prompts(mode: str, form: str) -> None:
    templates = TEMPLATES[mode]
    if form == "text":
        templates = {
            k: PromptTemplate(t.message_templates[1].content) for k, t in templates.items()
        }
    texts = ["The mirror is cleaned every six months.", "The lamp is oiled every week."]
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=t)) for i, t in enumerate(texts)]
    theirs_llm, ours_llm = Recorder(max_tokens=8), Recorder(max_tokens=8)
    theirs_llm.prompts, ours_llm.prompts = [], []
    get_response_synthesizer(
        llm=theirs_llm, response_mode=ResponseMode(mode), **templates
    ).synthesize("How often?", nodes)
    SynthkitSynthesizer(llm=ours_llm, response_mode=mode, **templates, evidence=False).synthesize("How often?", nodes)
    assert ours_llm.prompts and ours_llm.prompts == theirs_llm.prompts


def test_template_variable_mappings_are_refused() -> None:
    t = PromptTemplate("{ctx} {query_str}", template_var_mappings={"context_str": "ctx"})
    with pytest.raises(synthkit_rs.InputError, match="template_var_mappings"):
        SynthkitSynthesizer(llm=MockLLM(), text_qa_template=t)
