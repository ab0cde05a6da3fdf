"""A LlamaIndex response synthesizer backed by synthkit.

``SynthkitSynthesizer`` is a ``BaseSynthesizer``: pass it wherever LlamaIndex takes a
response synthesizer::

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    synth = SynthkitSynthesizer(llm=llm, response_mode="compact")  # no llm: offline
    engine = index.as_query_engine(llm=synth.llm, response_synthesizer=synth)
    print(engine.query("How often is the mirror cleaned?"))

Every model call goes through the ``llm`` itself (any LlamaIndex LLM: its ``achat`` /
``acomplete`` from async queries, ``chat`` / ``complete`` from blocking ones, the
streaming forms when streaming), behind synthkit's packing, budgets, concurrency limit,
retries and citations; the window and output size come from ``llm.metadata``.

For an OpenAI-compatible ``llm`` (``OpenAI``, ``OpenAILike``), ``direct=True`` has synthkit
call the same server itself instead (``api_base``, model, context window, ``max_tokens``
and temperature from the ``llm``; the API key from the environment variable
``api_key_env``, never from the ``llm``), as does ``base_url=`` (``api="anthropic"`` for a
server of Anthropic's Messages API). On that path synthkit dispatches LlamaIndex's LLM
span and start/end events for every call itself (on the ``llm`` path the LLM does). With
no ``llm`` (and no ``Settings.llm``) and no ``base_url``, synthkit's offline extractive
backend answers, with a warning.

``output_cls`` (a pydantic model) returns a ``PydanticResponse`` with the validated
object; ``structured_answer_filtering=True`` (refine, compact) keeps only the steps whose
context answered, as LlamaIndex does. Templates are strings, ``PromptTemplate`` or
``ChatPromptTemplate`` objects (or LlamaIndex's selector defaults).

Requires ``llama-index-core`` (0.14).
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence, Type, Union

from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.indices.prompt_helper import PromptHelper
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.response_synthesizers.base import BaseSynthesizer, QueryTextType
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.core.settings import Settings
from llama_index.core.types import RESPONSE_TEXT_TYPE
import llama_index.core.instrumentation as instrument

import synthkit_rs
from llama_index.response_synthesizers.synthkit._events import LlmEvents
from llama_index.response_synthesizers.synthkit._synthesis import _Synthesis, _adeltas, _deltas

__all__ = ["BackendLLM", "SynthkitSynthesizer"]

dispatcher = instrument.get_dispatcher(__name__)

#: The default answer length when the ``llm`` sets no ``max_tokens`` (as LlamaIndex).
DEFAULT_NUM_OUTPUT = 256

TemplateArg = Optional[Union[str, BasePromptTemplate]]


def _mode_name(mode: Any) -> str:
    """A mode name from a LlamaIndex ``ResponseMode`` or a string."""
    value = getattr(mode, "value", mode)
    return str(value)


def _api_base(llm: Optional[LLM]) -> Optional[str]:
    """The OpenAI-compatible server of ``llm`` (``OpenAI``, ``OpenAILike``), if it has one."""
    api_base = getattr(llm, "api_base", None)
    return api_base if isinstance(api_base, str) and api_base else None


def _llm_settings(llm: Optional[LLM]) -> Dict[str, Any]:
    """What synthkit's direct HTTP path takes from a LlamaIndex ``llm``: base URL, model, window, output, temperature, chat."""
    if llm is None:
        return {}
    out: Dict[str, Any] = {}
    api_base = _api_base(llm)
    if isinstance(api_base, str) and api_base:
        out["base_url"] = api_base
        model = getattr(llm, "model", None)
        if isinstance(model, str) and model:
            out["model"] = model
        temperature = getattr(llm, "temperature", None)
        if isinstance(temperature, (int, float)):
            out["temperature"] = float(temperature)
    metadata = getattr(llm, "metadata", None)
    window = getattr(llm, "context_window", None)
    if not isinstance(window, int) or window <= 0:
        window = getattr(metadata, "context_window", None)
    if isinstance(window, int) and window > 0:
        out["context_window"] = window
    max_tokens = getattr(llm, "max_tokens", None)
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        max_tokens = getattr(metadata, "num_output", None)
    out["num_output"] = (
        max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else DEFAULT_NUM_OUTPUT
    )
    is_chat = getattr(metadata, "is_chat_model", None)
    if isinstance(is_chat, bool):
        out["chat"] = is_chat
    return out


def _template_text(t: TemplateArg) -> Optional[Union[str, BasePromptTemplate]]:
    """A template argument as synthkit takes it (a string or a prompt object)."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, PromptTemplate) or hasattr(t, "template") or hasattr(
        t, "message_templates"
    ):
        return t
    # A SelectorPromptTemplate (LlamaIndex's defaults): its default template.
    default = getattr(t, "default_template", None)
    if default is not None:
        return _template_text(default)
    raise synthkit_rs.InputError(
        f"unsupported template type {type(t).__name__}: pass a string or a PromptTemplate"
    )


def _refuse_unsupported(**given: Any) -> None:
    """Raises ``InputError`` for a ``get_response_synthesizer`` argument synthkit cannot honour."""
    if given.pop("program_factory") is not None:
        raise synthkit_rs.InputError(
            "program_factory is not supported: it builds a LlamaIndex program that would make "
            "each refine step's model call itself, outside synthkit's budgets, retries and "
            "concurrency limit; use structured_answer_filtering=True (synthkit's own "
            "structured steps) or output_cls"
        )
    given.pop("multimodal")
    if given.pop("chat_prompt_helper") is not None:
        raise synthkit_rs.InputError(
            "chat_prompt_helper is not supported: synthkit sizes every prompt (images "
            "counted) from prompt_helper or context_window=/num_output=; pass prompt_helper"
        )


def _chat_template(name: str, t: Any) -> TemplateArg:
    """A ``chat_content_*`` / ``chat_summary_template`` argument as a synthkit template.

    LlamaIndex's multimodal synthesizer takes ``ChatPromptTemplate`` objects whose
    messages hold ``{context_str}`` (text and image blocks) and ``{query_str}``;
    synthkit sends each node's image at its place in ``{context_str}``, so the same
    template text does it. A template whose text cannot be read raises ``InputError``.
    """
    if t is None or isinstance(t, str):
        return t
    if hasattr(t, "message_templates") or hasattr(t, "template"):
        return t
    default = getattr(t, "default_template", None)
    if default is not None:
        return _chat_template(name, default)
    raise synthkit_rs.InputError(
        f"{name}: unsupported template type {type(t).__name__}: pass a string, a "
        "PromptTemplate or a ChatPromptTemplate (synthkit puts each node's image at its "
        "place in {context_str})"
    )


class BackendLLM(CustomLLM):
    """``SynthkitSynthesizer.llm`` when synthkit calls no LlamaIndex LLM (the offline
    extractive backend, or ``base_url=``): given as ``as_query_engine(llm=...)``, it keeps
    LlamaIndex from resolving its default ``Settings.llm`` (OpenAI, which wants a key).
    It answers nothing itself: a call raises ``synthkit_rs.InputError`` saying so. Given
    to a ``SynthkitSynthesizer`` (or set as ``Settings.llm``), it means no LLM."""

    @classmethod
    def class_name(cls) -> str:
        return "SynthkitBackendLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="synthkit")

    def _refuse(self) -> "synthkit_rs.InputError":
        return synthkit_rs.InputError(
            "SynthkitSynthesizer.llm stands in for synthkit's own backend and answers "
            "nothing itself: only the SynthkitSynthesizer it came from answers; give the "
            "component that called it a LlamaIndex LLM of its own"
        )

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise self._refuse()

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise self._refuse()


class SynthkitSynthesizer(BaseSynthesizer):
    """A LlamaIndex response synthesizer that runs synthkit.

    Args:
        llm: a LlamaIndex LLM (else ``Settings.llm``, if set): every model call goes
            through it. Without one (and without ``base_url``), synthkit's offline
            extractive backend answers, with a warning.
        response_mode: a LlamaIndex ``ResponseMode`` or its name (default ``compact``), or
            ``"map_reduce"``, synthkit's own mode.
        streaming: return ``StreamingResponse`` / ``AsyncStreamingResponse`` objects.
        text_qa_template, refine_template, summary_template, simple_template: LlamaIndex
            prompt templates (strings, ``PromptTemplate`` or ``ChatPromptTemplate``; a
            selector template's default) with the usual variables.
        direct: for an OpenAI-compatible ``llm`` (one with ``api_base``), have synthkit call
            its server itself over HTTP (``api_base``, ``model``, ``context_window``,
            ``max_tokens``, ``temperature`` read from the ``llm``) instead of calling the
            ``llm``. Default ``False``: the ``llm`` is called (see the README for figures).
        retry_on: exception classes the ``llm`` raises that are worth retrying (its rate
            limit error, say): synthkit sends the call again within its retry limits.
        base_url: call this OpenAI-compatible server directly (as ``direct=True`` does).
        model, context_window, num_output, temperature: override what is read from
            ``llm`` (``model`` and ``temperature`` for the direct path only).
        api_key_env: the environment variable holding the API key (direct path; default
            ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` with ``api="anthropic"``).
        concurrency: model calls in flight at most (tree levels, accumulate); 0: no limit;
            ``None``: synthkit's default (8), never more than the server's slots.
        citations: numbered sources and checked ``[n]`` markers in the answer.
        timeout: the request timeout in seconds.
        system_prompt: a system prompt for every call.
        prompt_helper: a LlamaIndex ``PromptHelper`` (else ``Settings``'s, if set): its
            ``context_window``, ``num_output`` and ``chunk_overlap_ratio`` replace the
            ``llm``'s.
        callback_manager: LlamaIndex callbacks.
        empty_response: the answer when there are no nodes.
        use_async: accepted for LlamaIndex's signature: synthkit always runs tree levels
            and accumulate concurrently (at most ``concurrency`` calls in flight).
        verbose: accepted; synthkit prints no progress (``True`` warns so): watch it with
            LlamaIndex's instrumentation or callbacks instead.
        output_cls: a pydantic model: its JSON schema is the final answer's, and the
            response is a ``PydanticResponse`` with the validated object (not with
            ``streaming``; no ``citations``).
        structured_answer_filtering: refine and compact: each step answers
            ``{query_satisfied, answer}`` and unsatisfied steps leave the answer unchanged
            (other modes raise ``synthkit_rs.InputError``).
        api: ``openai`` (default) or ``anthropic``: the API of ``base_url``'s server.
        max_prompt_tokens: the most tokens one prompt may have, below the window
            (LangChain's ``token_max``): smaller prompts, more calls.
        return_steps: keep every model call's step (the refine chain's answers, each tree
            level's summaries, with node ids, tokens and time) in
            ``last_response.steps``; off by default.
        on_truncation: a model reply cut at the output limit ``"warn"``s
            (``synthkit_rs.TruncationWarning``, the default), is an ``"error"``
            (``synthkit_rs.ModelError``) or is ``"ignore"``d.
        program_factory: refused (``synthkit_rs.InputError``): it builds a LlamaIndex program
            that would make the refine steps' calls itself, outside synthkit's budgets,
            retries and concurrency limit; use ``structured_answer_filtering`` or
            ``output_cls``.
        multimodal: accepted (LlamaIndex's multimodal synthesis): synthkit always sends
            an ``ImageNode``'s image (PNG, JPEG, WebP, GIF, at most 20 MiB) as an image
            part at its node's place, through the direct HTTP path (``base_url=`` or
            ``direct=True``) to a chat model that takes images. Through a LlamaIndex
            ``llm`` synthkit sends text only: image nodes raise ``synthkit_rs.InputError``
            before any call.
        chat_content_qa_template, chat_content_refine_template, chat_summary_template:
            used as ``text_qa_template``, ``refine_template`` and ``summary_template``
            (strings, ``PromptTemplate`` or ``ChatPromptTemplate``); giving one with its
            text template raises ``synthkit_rs.InputError``.
        chat_prompt_helper: refused (``synthkit_rs.InputError``): pass ``prompt_helper``.
        vision: whether the model takes images, over what its server says (``None``,
            the default: as llama.cpp's ``/props`` or the models listing says);
            ``False`` refuses image nodes before any call.
        evidence: evidence first (``None``, the default: on with a model, off for the
            offline extractive backend; ``True`` on, ``False`` off): each node is shown to
            the model as its sentences bearing on the query, and a query nothing bears on
            is answered "not in the sources" without a call.
        on_unsupported: an answer whose facts are in no node it was shown ``"abstain"``s
            (the default with a model: "not in the sources", the model's answer in
            ``last_response.grounding``), ``"warn"``s (the default for the extractive
            backend) or is an ``"error"``.
        on_declined: a query the model declines though a sentence covers most of it is
            answered with the sources' own sentences (``"extract"``, the default) or keeps
            the model's "not in the sources" (``"keep"``).
        reuse_hints: on the direct HTTP path, what calls tell the server so that it
            reuses the prompt prefix they share: ``"auto"`` (the default), ``"all"`` or
            ``"none"`` (as ``synthkit_rs.Synthesizer``'s).
    """

    def __init__(
        self,
        llm: Optional[LLM] = None,
        response_mode: Any = "compact",
        streaming: bool = False,
        text_qa_template: TemplateArg = None,
        refine_template: TemplateArg = None,
        summary_template: TemplateArg = None,
        *,
        direct: bool = False,
        retry_on: Any = None,
        base_url: Optional[str] = None,
        model: Optional[str] = None,
        context_window: Optional[int] = None,
        num_output: Optional[int] = None,
        temperature: Optional[float] = None,
        api_key_env: Optional[str] = None,
        concurrency: Optional[int] = None,
        citations: bool = False,
        timeout: Optional[float] = None,
        system_prompt: Optional[str] = None,
        prompt_helper: Optional[PromptHelper] = None,
        callback_manager: Optional[CallbackManager] = None,
        empty_response: Optional[str] = None,
        use_async: bool = False,
        verbose: bool = False,
        output_cls: Any = None,
        structured_answer_filtering: bool = False,
        program_factory: Any = None,
        # the API, structured answers, call events, generation
        simple_template: TemplateArg = None,
        api: str = "openai",
        multimodal: bool = False,
        chat_content_qa_template: Any = None,
        chat_content_refine_template: Any = None,
        chat_summary_template: Any = None,
        chat_prompt_helper: Any = None,
        max_prompt_tokens: Optional[int] = None,
        return_steps: bool = False,
        on_truncation: str = "warn",
        vision: Optional[bool] = None,
        evidence: Optional[bool] = None,
        on_unsupported: Optional[str] = None,
        on_declined: Optional[str] = None,
        reuse_hints: str = "auto",
    ) -> None:
        _refuse_unsupported(
            program_factory=program_factory,
            multimodal=multimodal,
            chat_prompt_helper=chat_prompt_helper,
        )
        # LlamaIndex's multimodal templates: used where the text template is not given
        # (image nodes need no other template in synthkit).
        for name, chat, text in (
            ("chat_content_qa_template", chat_content_qa_template, text_qa_template),
            ("chat_content_refine_template", chat_content_refine_template, refine_template),
            ("chat_summary_template", chat_summary_template, summary_template),
        ):
            if chat is not None and text is not None:
                raise synthkit_rs.InputError(
                    f"{name} and its text template were both given: synthkit uses one "
                    "template for text and image nodes; drop one of them"
                )
        text_qa_template = text_qa_template or _chat_template(
            "chat_content_qa_template", chat_content_qa_template
        )
        refine_template = refine_template or _chat_template(
            "chat_content_refine_template", chat_content_refine_template
        )
        summary_template = summary_template or _chat_template(
            "chat_summary_template", chat_summary_template
        )
        if output_cls is not None:
            if not (isinstance(output_cls, type) and hasattr(output_cls, "model_json_schema")):
                raise synthkit_rs.InputError(
                    f"output_cls must be a pydantic model class, got {output_cls!r}"
                )
            if streaming:
                raise synthkit_rs.InputError(
                    "streaming=True with output_cls: synthkit returns the object once it "
                    "is whole and validated; drop one of them"
                )
        if verbose:
            warnings.warn(
                "verbose=True: SynthkitSynthesizer prints no progress; use LlamaIndex's "
                "instrumentation or callbacks to watch the calls",
                stacklevel=2,
            )
        # Never resolve Settings.llm here: it builds OpenAI() and wants a key even when
        # synthkit answers on its own. Without an LLM, the synthesizer's own is a stand-in
        # that refuses every call (`llm`: what `as_query_engine(llm=...)` takes).
        base_llm = llm if llm is not None else Settings._llm
        if isinstance(base_llm, BackendLLM):
            base_llm = None
        super().__init__(
            llm=base_llm if base_llm is not None else BackendLLM(),
            callback_manager=callback_manager,
            prompt_helper=prompt_helper,
            streaming=streaming,
            empty_response=empty_response,
        )
        self._output_cls: Optional[Type[Any]] = output_cls
        self._direct = base_url is not None or (direct and _api_base(base_llm) is not None)
        if direct and not self._direct:
            raise synthkit_rs.InputError(
                f"direct=True needs an OpenAI-compatible llm (with api_base) or base_url=; "
                f"{type(base_llm).__name__} has no api_base"
            )
        settings = _llm_settings(base_llm) if self._direct else {}
        helper = prompt_helper or Settings._prompt_helper
        if helper is not None:
            settings["context_window"] = helper.context_window
            if helper.num_output > 0:
                settings["num_output"] = helper.num_output
            settings["chunk_overlap_ratio"] = helper.chunk_overlap_ratio
        overrides = {
            "base_url": base_url,
            "model": model,
            "context_window": context_window,
            "num_output": num_output,
            "temperature": temperature,
        }
        settings.update({k: v for k, v in overrides.items() if v is not None})
        if not self._direct:
            direct_only = (("api", api, "openai"), ("reuse_hints", reuse_hints, "auto"))
            for name, value, default in direct_only:
                if value != default:
                    raise synthkit_rs.InputError(
                        f"{name}={value!r} applies to the direct HTTP path (base_url=): "
                        "without it synthkit calls the llm"
                    )
            if base_llm is not None:
                for name in ("model", "temperature"):
                    if overrides[name] is not None:
                        raise synthkit_rs.InputError(
                            f"{name}= applies to the direct HTTP path (direct=True or "
                            "base_url=); without it synthkit calls the llm, so set it there"
                        )
                settings["llm"] = base_llm
                settings["retry_on"] = retry_on
        elif retry_on is not None:
            raise synthkit_rs.InputError(
                "retry_on applies when synthkit calls the llm; the direct HTTP path retries "
                "rate limits and overloads itself"
            )
        self._mode = _mode_name(response_mode)
        self._templates: Dict[str, TemplateArg] = {
            "text_qa_template": text_qa_template,
            "refine_template": refine_template,
            "summary_template": summary_template,
            "simple_template": simple_template,
        }
        self._options: Dict[str, Any] = {
            **settings,
            "concurrency": concurrency,
            "citations": citations,
            "system_prompt": system_prompt,
            "output_schema": output_cls,
            "structured_answer_filtering": bool(structured_answer_filtering),
            "max_prompt_tokens": max_prompt_tokens,
            "return_steps": bool(return_steps),
            "on_truncation": on_truncation,
            "vision": vision,
            "evidence": evidence,
            "on_unsupported": on_unsupported,
            "on_declined": on_declined,
        }
        if self._direct or "llm" not in settings:
            self._options.update(api_key_env=api_key_env, timeout=timeout)
        if self._direct:
            self._options["api"] = api
            self._options["reuse_hints"] = reuse_hints
            # No LlamaIndex LLM makes these calls: synthkit reports each one as an LLM
            # span with its start/end events (filled in once the model is known).
            self._options["on_call"] = LlmEvents({}, owner=self)
        elif timeout is not None:
            raise synthkit_rs.InputError(
                "timeout= applies to the direct HTTP path: without it synthkit calls the llm, "
                "so set the timeout on the llm"
            )
        self._synth = self._build()
        hook = self._options.get("on_call")
        if isinstance(hook, LlmEvents):
            hook.describe(self._synth)
        if self._synth.backend == "extractive":
            warnings.warn(
                "no llm (nor Settings.llm) and no base_url: synthkit's offline extractive "
                "backend answers (it quotes the nodes; no model is called)",
                stacklevel=2,
            )
        #: The synthkit ``Response`` of the latest synthesis, a stream's once it is
        #: drained (usage, citations, and its ``steps`` with ``return_steps=True``).
        self.last_response: Optional[synthkit_rs.Response] = None

    def _build(self) -> synthkit_rs.Synthesizer:
        return synthkit_rs.Synthesizer(
            self._mode,
            qa_template=_template_text(self._templates["text_qa_template"]),
            refine_template=_template_text(self._templates["refine_template"]),
            summary_template=_template_text(self._templates["summary_template"]),
            simple_template=_template_text(self._templates["simple_template"]),
            **self._options,
        )

    @property
    def llm(self) -> LLM:
        """The LLM to give the query engine: ``index.as_query_engine(llm=synth.llm,
        response_synthesizer=synth)``. It is the ``llm`` synthkit calls, or, when synthkit
        calls no LlamaIndex LLM (the offline extractive backend, ``base_url=``), a
        stand-in that answers nothing itself, so that LlamaIndex does not resolve its
        default ``Settings.llm`` (OpenAI, which wants a key)."""
        return self._llm

    @property
    def synthesizer(self) -> synthkit_rs.Synthesizer:
        """The synthkit synthesizer underneath."""
        return self._synth

    # --- PromptMixin -------------------------------------------------------------------

    def _get_prompts(self) -> PromptDictType:
        out: PromptDictType = {}
        for name, t in self._templates.items():
            if isinstance(t, BasePromptTemplate):
                out[name] = t
            elif isinstance(t, str):
                out[name] = PromptTemplate(t)
        return out

    def _update_prompts(self, prompts: PromptDictType) -> None:
        changed = False
        for name in self._templates:
            if name in prompts:
                self._templates[name] = prompts[name]
                changed = True
        if changed:
            self._synth = self._build()

    # --- text chunks (the abstract methods) --------------------------------------------

    def get_response(
        self,
        query_str: str,
        text_chunks: Sequence[str],
        **response_kwargs: Any,
    ) -> RESPONSE_TEXT_TYPE:
        """Answers from plain text chunks: a string, or a generator when streaming."""
        nodes = [{"id": str(i), "text": t} for i, t in enumerate(text_chunks)]
        if self._streaming:
            return _deltas(self._synth.stream(query_str, nodes), self)
        result = self._synth.synthesize(query_str, nodes)
        self.last_response = result
        return result.response

    async def aget_response(
        self,
        query_str: str,
        text_chunks: Sequence[str],
        **response_kwargs: Any,
    ) -> RESPONSE_TEXT_TYPE:
        """Like ``get_response``, awaited (an async generator when streaming)."""
        nodes = [{"id": str(i), "text": t} for i, t in enumerate(text_chunks)]
        if self._streaming:
            return _adeltas(self._synth.stream(query_str, nodes), self)
        result = await self._synth.asynthesize(query_str, nodes)
        self.last_response = result
        return result.response

    # --- nodes -------------------------------------------------------------------------

    @staticmethod
    def _synthkit_nodes(nodes: List[NodeWithScore]) -> List[Dict[str, Any]]:
        """The nodes as the model sees them in LlamaIndex (its metadata mode LLM).

        LlamaIndex passes a node retrieved twice (two retrievers fused, say) to the model
        twice; synthkit refuses two nodes with one id, so a repeat is given the id
        ``"<id>#<n>"`` (its n-th occurrence) and its text is kept, as LlamaIndex keeps it.
        """
        seen: Dict[str, int] = {}
        taken = {n.node.node_id for n in nodes}
        items = []
        for n in nodes:
            node_id = n.node.node_id
            count = seen.get(node_id, 0) + 1
            seen[node_id] = count
            if count > 1:
                candidate = f"{node_id}#{count}"
                while candidate in taken:
                    count += 1
                    candidate = f"{node_id}#{count}"
                seen[node_id] = count
                taken.add(candidate)
                node_id = candidate
            item = {
                "id": node_id,
                "text": n.node.get_content(metadata_mode=MetadataMode.LLM),
                "score": n.score,
            }
            # An ImageNode's image, for synthkit's node reader (which checks it).
            for field in ("image", "image_mimetype", "image_url", "image_path"):
                value = getattr(n.node, field, None)
                if value is not None and not callable(value):
                    item[field] = str(value) if field in ("image_url", "image_path") else value
            items.append(item)
        return items

    def _empty(self, query: QueryTextType, is_async: bool) -> RESPONSE_TYPE:
        if not self._streaming:
            return Response(self._empty_response)
        if is_async:
            return AsyncStreamingResponse(response_gen=self._empty_response_agenerator())
        return StreamingResponse(response_gen=self._empty_response_generator())

    def _finished(
        self, result: synthkit_rs.Response, source_nodes: List[NodeWithScore]
    ) -> RESPONSE_TYPE:
        """The LlamaIndex response for a finished synthesis: a ``PydanticResponse`` with
        the validated object when there is an ``output_cls``, else a ``Response``."""
        self.last_response = result
        if self._output_cls is None:
            return self._prepare_response_output(result.response, source_nodes)
        # synthkit checked the answer against the schema; pydantic builds the object
        # (and checks what a JSON schema cannot say).
        output = self._output_cls.model_validate(result.structured)
        return PydanticResponse(
            output,
            source_nodes=source_nodes,
            metadata=self._get_metadata_for_response([n.node for n in source_nodes]),
        )

    @dispatcher.span
    def synthesize(
        self,
        query: QueryTextType,
        nodes: List[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        """Answers ``query`` from ``nodes``; the response's sources are the given objects."""
        run = _Synthesis(self, query, nodes, additional_source_nodes, is_async=False)
        with run.events() as pending:
            if pending:
                run.finish(self._synth.synthesize(run.query_str, run.items))
        return run.response

    @dispatcher.span
    async def asynthesize(
        self,
        query: QueryTextType,
        nodes: List[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        """Like ``synthesize``, awaited; model calls run while the event loop goes on."""
        run = _Synthesis(self, query, nodes, additional_source_nodes, is_async=True)
        with run.events() as pending:
            if pending:
                run.finish(await self._synth.asynthesize(run.query_str, run.items))
        return run.response
