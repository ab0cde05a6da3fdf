"""LlamaIndex's LLM events for the calls synthkit makes itself (the direct HTTP path).

On the ``llm`` path the LlamaIndex LLM makes every call and emits its own events; on the
direct path (``direct=True``, ``base_url=``) synthkit calls the server, and this hook
(``synthkit_rs.Synthesizer(on_call=...)``) gives LlamaIndex's instrumentation what an LLM
would: each call is a span (``SynthkitSynthesizer.model_call-<uuid>``, a child of the
span active when the synthesis started: ``SynthkitSynthesizer.synthesize``) with
``LLMChatStartEvent`` / ``LLMChatEndEvent`` (chat prompts) or ``LLMCompletionStartEvent``
/ ``LLMCompletionEndEvent`` (completion prompts) carrying the prompt, the reply and the
token counts (in ``response.raw["usage"]`` and ``response.additional_kwargs``, as
LlamaIndex's OpenAI LLMs report them). A failed or cancelled call drops its span with
the error.
"""

from __future__ import annotations

import inspect
import uuid
from typing import Any, Dict, List, Optional, Tuple, Union

import llama_index.core.instrumentation as instrument
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    MessageRole,
)
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.span import active_span_id

dispatcher = instrument.get_dispatcher("llama_index.response_synthesizers.synthkit")

Prompt = Union[str, List[Tuple[str, str]]]


def _model_call(prompt: Prompt) -> None:
    """The signature a call's span reports as its arguments (never called)."""


_SIGNATURE = inspect.signature(_model_call)


class _Call:
    """One call in flight: its span and what its start event said."""

    __slots__ = ("span_id", "bound", "messages", "prompt")

    def __init__(self, span_id: str, bound: inspect.BoundArguments) -> None:
        self.span_id = span_id
        self.bound = bound
        self.messages: Optional[List[ChatMessage]] = None
        self.prompt: Optional[str] = None


class LlmEvents:
    """The ``on_call`` hook dispatching LlamaIndex's LLM spans and events.

    ``model`` is the ``model_dict`` the start events carry (name, window, output
    reserve: no URL, no key).
    """

    def __init__(self, model: Dict[str, Any], owner: Any = None) -> None:
        self._model = dict(model)
        self._owner = owner

    def describe(self, synth: Any) -> None:
        """Fills ``model_dict`` from the synthkit synthesizer making the calls."""
        self._model = {
            "model": synth.model,
            "context_window": synth.context_window,
            "num_output": synth.num_output,
            "backend": synth.backend,
            "class_name": "SynthkitSynthesizer",
        }

    def call_started(self, prompt: Prompt) -> _Call:
        qualname = "SynthkitSynthesizer.model_call"
        call = _Call(f"{qualname}-{uuid.uuid4()}", _SIGNATURE.bind(prompt))
        dispatcher.span_enter(
            id_=call.span_id,
            bound_args=call.bound,
            instance=self._owner,
            parent_id=active_span_id.get(),
        )
        if isinstance(prompt, str):
            call.prompt = prompt
            dispatcher.event(
                LLMCompletionStartEvent(
                    prompt=prompt,
                    additional_kwargs={},
                    model_dict=self._model,
                    span_id=call.span_id,
                )
            )
        else:
            call.messages = [ChatMessage(role=MessageRole(r), content=c) for r, c in prompt]
            dispatcher.event(
                LLMChatStartEvent(
                    messages=call.messages,
                    additional_kwargs={},
                    model_dict=self._model,
                    span_id=call.span_id,
                )
            )
        return call

    def call_finished(self, call: _Call, reply: str, usage: Dict[str, Any]) -> None:
        counts = {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        }
        raw = {"usage": dict(counts), "usage_reported_by_server": usage["reported"]}
        if call.messages is not None:
            response: Any = ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content=reply),
                raw=raw,
                additional_kwargs=counts,
            )
            dispatcher.event(
                LLMChatEndEvent(
                    messages=call.messages, response=response, span_id=call.span_id
                )
            )
        else:
            response = CompletionResponse(text=reply, raw=raw, additional_kwargs=counts)
            dispatcher.event(
                LLMCompletionEndEvent(
                    prompt=call.prompt or "", response=response, span_id=call.span_id
                )
            )
        dispatcher.span_exit(
            id_=call.span_id, bound_args=call.bound, instance=self._owner, result=response
        )

    def call_failed(self, call: Optional[_Call], message: str) -> None:
        if call is None:
            return
        dispatcher.span_drop(
            id_=call.span_id,
            bound_args=call.bound,
            instance=self._owner,
            err=RuntimeError(message),
        )
