"""Type stubs for the compiled extension module ``synthkit_rs._synthkit``."""

from __future__ import annotations

import os

from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Iterator, List, Literal, Mapping, Optional, Tuple, Type, Union

__version__: str
MODES: list[str]

class SynthkitError(Exception):
    """Every error synthkit raises, with synthkit's message."""

class InputError(SynthkitError):
    """Bad input or options (unknown mode, node without text, bad template, budget)."""

class ModelError(SynthkitError):
    """A model call failed (connection, HTTP status, timeout, truncated reply, an exception
    the ``llm`` raised: then it is ``__cause__``)."""

class RefusalError(ModelError):
    """The model refused to answer (a refusal, a reply stopped by the server's content
    filter) or its reply held no text (only tool calls or reasoning). Never retried."""

#: A node: a string, a dict (``id``/``id_``, ``text``, ``metadata``, ``score``,
#: ``excluded_llm_metadata_keys``; or ``{"node": {...}, "score": s}``), or a LlamaIndex
#: ``NodeWithScore`` / ``TextNode``.
NodeLike = Union[str, Mapping[str, Any], Any]
#: A template: a string with ``{context_str}``/``{query_str}``/... or a LlamaIndex prompt.
TemplateLike = Union[str, Any]

class SourceNode:
    """One source node of a response."""

    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def score(self) -> Optional[float]: ...
    def to_dict(self) -> dict[str, Any]: ...

class Response:
    """A finished synthesis. ``str(response)`` is the answer."""

    @property
    def response(self) -> str: ...
    @property
    def answerable(self) -> bool:
        """``False`` when the sources do not answer (no nodes, the model said so, or no
        step found anything)."""
    @property
    def source_nodes(self) -> list[SourceNode]: ...
    @property
    def metadata(self) -> dict[str, dict[str, Any]]: ...
    @property
    def usage(self) -> dict[str, int]: ...
    @property
    def citations(self) -> Optional[list[dict[str, Any]]]: ...
    @property
    def grounding(self) -> Optional[dict[str, Any]]:
        """The grounding check of the answer: status, unsupported, source_ids, ..."""
    @property
    def evidence(self) -> Optional[dict[str, Any]]:
        """With evidence on: what was kept (node_id, sentences) and dropped."""
    @property
    def escalation(self) -> Optional[dict[str, Any]]:
        """With escalate=: escalated, reason, from, to, first_nodes, first_answer, first_usage."""
    @property
    def quotes(self) -> Optional[list[dict[str, Any]]]: ...
    @property
    def unsupported_numbers(self) -> Optional[list[dict[str, Any]]]: ...
    @property
    def steps(self) -> Optional[list[dict[str, Any]]]:
        """With ``return_steps=True``, one dict per model call (step, level, index,
        node_ids, tokens, ms, retries, corrections, truncated, reply); else ``None``."""
    @property
    def truncation(self) -> Optional[dict[str, Any]]: ...
    @property
    def structured(self) -> Optional[Any]: ...
    def text_without_markers(self) -> str: ...
    def to_dict(self) -> dict[str, Any]:
        """The response as the service answers it and ``synthkit batch`` writes it."""

class FailedRequest:
    """The slot of a request that failed in ``synthesize_many``."""

    #: The request's position in ``requests`` (0-based).
    index: int
    #: The request dict's ``id``, else ``None``.
    id: Any
    #: ``invalid_request``, ``invalid_option``, ``model_error``, ``model_timeout``,
    #: ``model_rate_limited``, ``truncated``, ``schema_mismatch`` or ``synthesis_failed``.
    kind: str
    #: What went wrong (``str(error)``).
    message: str
    #: The exception ``synthesize`` would have raised.
    error: SynthkitError
    def to_dict(self) -> dict[str, str]:
        """``{"kind", "message"}``, as a ``synthkit batch`` error line's ``error``, with
        ``"transient"`` (the cause) when the failure may pass on a later try."""

class BatchFiles:
    """A batch's input (JSON lines of requests) and output (JSON lines of results), read
    and written as ``synthkit batch`` does: ids (a line's ``id``, else its line number),
    duplicate ids refused (``InputError``), request hashes and the resume (lines answered
    in OUT kept, transient error lines and changed lines run again, OUT appended to and
    compacted to one line per id by ``finish``)."""

    def __init__(
        self,
        input: Union[str, "os.PathLike[str]"],
        output: Union[str, "os.PathLike[str]"],
        mode: Optional[str] = None,
        max_prompt_tokens: Optional[int] = None,
        retry_failed: bool = True,
        max_line_bytes: int = 10 << 20,
    ) -> None: ...
    #: What opening found: ``{"kept", "kept_errors", "retry", "changed", "new",
    #: "cut_bytes", "not_results"}``.
    @property
    def survey(self) -> dict[str, Any]: ...
    def pending(self) -> "Pending":
        """The lines to run, in input order (kept lines left out)."""
    def append(self, line: str) -> None:
        """Appends one result line (a JSON object's text, no newline) in one write."""
    def finish(self) -> dict[str, Any]:
        """Syncs OUT and rewrites it to one line per id: ``{"lines", "errors"}``."""

class Pending:
    """The lines of a ``BatchFiles`` to run: dicts ``{"number", "id", "request_sha256",
    "request"}``, or ``{..., "error": {"kind", "message"}}`` for a line that cannot run."""

    def __iter__(self) -> "Pending": ...
    def __next__(self) -> dict[str, Any]: ...

#: A request of ``synthesize_many``: ``(query, nodes)``, or a dict in the shape of the
#: service's ``POST /v1/synthesize`` body (``query``, ``nodes``, ``mode``, ``templates``,
#: ``citations``, ``citation_markers``, ``output_schema``, ``concurrency``,
#: ``system_prompt``, ``plan``) with an optional ``id``.
RequestLike = Union[Tuple[str, Iterable[NodeLike]], Mapping[str, Any]]

class EvalResult:
    """The scores of ``evaluate``: ``str(result)`` is ``result.table()``."""

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One dict per case, mode and system, in case order: ``id``, ``system``,
        ``mode``, ``answer``, ``error``, ``answerable``, ``correct``, ``f1``,
        ``abstained``, ``in_nodes``, ``in_prompts``, ``cite_precision``, ``cite_recall``,
        ``calls``, ``prompt_tokens``, ``completion_tokens``, ``truncated_calls``,
        ``wall_ms``, ``report``, ``tags``."""
    @property
    def totals(self) -> list[dict[str, Any]]:
        """One dict per system and mode: ``system``, ``mode``, ``cases``, ``correct``,
        ``correct_rate``, ``correct_interval`` (its 95 % bootstrap interval: low, high),
        ``answerable``, ``answerable_correct``, ``unanswerable``,
        ``abstained_right``, ``false_abstentions``, ``errors``, ``f1_mean``,
        ``lost_in_retrieval``, ``lost_in_packing``, ``lost_in_synthesis``,
        ``cite_precision``, ``cite_recall``, ``calls``, ``prompt_tokens``,
        ``completion_tokens``, ``truncated_calls``, ``wall_ms``."""
    @property
    def paired(self) -> list[dict[str, Any]]:
        """Every two systems in one mode, and every two modes of one system, on the cases
        both answered: ``a``, ``b`` (``system/mode``), ``cases``, ``both``, ``only_a``,
        ``only_b``, ``neither``, ``p_value`` (the exact sign test of ``only_a`` against
        ``only_b``: the chance of a split at least that uneven if neither were better)."""
    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        """``{"rows": [...], "totals": [...], "paired": [...]}``, as ``synthkit eval
        --json`` prints it."""
    def table(self) -> str:
        """The totals as a plain-text table with ``synthkit eval``'s headings, then one
        line per paired comparison."""

#: Cases or answers: a JSON-lines file's path, or a list of dicts (or of their JSON texts).
LinesLike = Union[str, "os.PathLike[str]", Iterable[Union[Mapping[str, Any], str]]]

def evaluate(
    cases: LinesLike,
    answers: Optional[LinesLike] = None,
    *,
    synthesizers: Union[Mapping[str, "Synthesizer"], Iterable["Synthesizer"], None] = None,
    system: str = "synthkit",
    jobs: int = 1,
    paths_root: Optional[Union[str, os.PathLike[str]]] = None,
    allow_paths_outside: bool = False,
    chunk_size: int = 1024,
    top_k: Optional[Union[int, Literal["all"]]] = None,
    index_dir: Optional[Union[str, os.PathLike[str]]] = None,
) -> EvalResult:
    """Scores answers to a benchmark's cases without a judge, as ``synthkit eval`` does.

    ``cases``: a ``CASES.jsonl`` path or a list of case dicts (``id``, ``query``,
    ``nodes`` or ``paths``, ``top_k``, ``answers``, ``evidence``, ``answerable``,
    ``tags``). ``answers``: an ``ANSWERS.jsonl`` path or a list of answer dicts (``id``,
    ``mode``, ``answer``; optionally ``system``, ``error``, ``abstained``, ``calls``,
    ``prompt_tokens``, ``completion_tokens``, ``truncated_calls``, ``wall_ms``,
    ``prompts``, ``citations``) from any system. ``synthesizers``: ``{name:
    Synthesizer}`` or a list of Synthesizers (named by their modes), each run on every
    case with its calls, tokens, prompts and (with ``citations=True``) cited node ids
    recorded; the name is the rows' ``mode``. ``system`` names synthesizers' rows and
    answers without ``system``. A case's ``paths`` are read as ``synthkit eval`` reads
    them: under the cases file's folder, or ``paths_root`` (required for a list of
    cases), with ``allow_paths_outside``, ``chunk_size``, ``top_k`` and ``index_dir`` as
    ``synthesize_many`` takes them. ``jobs``: syntheses in flight at once (1 to 256; rows stay in
    case order; above one they share the server, so compare calls and tokens, not wall
    time). Bad input raises ``InputError`` naming the case or answer.
    """

def aevaluate(
    cases: LinesLike,
    answers: Optional[LinesLike] = None,
    *,
    synthesizers: Union[Mapping[str, "Synthesizer"], Iterable["Synthesizer"], None] = None,
    system: str = "synthkit",
    jobs: int = 1,
    paths_root: Optional[Union[str, os.PathLike[str]]] = None,
    allow_paths_outside: bool = False,
    chunk_size: int = 1024,
    top_k: Optional[Union[int, Literal["all"]]] = None,
    index_dir: Optional[Union[str, os.PathLike[str]]] = None,
) -> Awaitable[EvalResult]:
    """Like ``evaluate``, awaited from a coroutine: cancelling the awaiting task cancels the
    model calls in flight."""

class TruncationWarning(UserWarning):
    """A model reply was cut at the output limit (``num_output``): the answer may be
    incomplete (``on_truncation="warn"``, the default)."""

class ResponseStream(Iterator[str], AsyncIterator[str]):
    """Text deltas of a streamed answer, by ``for`` or ``async for``."""

    def __iter__(self) -> ResponseStream: ...
    def __next__(self) -> str: ...
    def __aiter__(self) -> ResponseStream: ...
    def __anext__(self) -> Awaitable[str]: ...
    @property
    def text(self) -> str: ...
    @property
    def done(self) -> bool: ...
    @property
    def response(self) -> Optional[Response]: ...
    def get_response(self) -> Response: ...
    def aget_response(self) -> Awaitable[Response]: ...
    def close(self) -> None: ...

class Synthesizer:
    """Turns a query and retrieved nodes into an answer with a language model."""

    def __init__(
        self,
        mode: str = "compact",
        base_url: Optional[str] = None,
        model: Optional[str] = None,
        api_key_env: Optional[str] = None,
        context_window: Optional[int] = None,
        num_output: Optional[int] = None,
        concurrency: Optional[int] = None,
        citations: Union[bool, str] = False,
        temperature: Optional[float] = None,
        timeout: Optional[float] = None,
        system_prompt: Optional[str] = None,
        qa_template: Optional[TemplateLike] = None,
        refine_template: Optional[TemplateLike] = None,
        summary_template: Optional[TemplateLike] = None,
        chat: bool = True,
        chunk_overlap_ratio: Optional[float] = None,
        llm: Any = None,
        retry_on: Union[Type[BaseException], Tuple[Type[BaseException], ...], None] = None,
        tokenizer: Union[Callable[[str], List[Any]], str, None] = None,
        # the API, structured answers, call events, generation
        api: str = "openai",
        output_schema: Union[Mapping[str, Any], str, Type[Any], None] = None,
        structured_answer_filtering: bool = False,
        on_call: Any = None,
        simple_template: Optional[TemplateLike] = None,
        # where the rate budget and the response cache live
        rpm: Optional[int] = None,
        tpm: Optional[int] = None,
        redis_url: Optional[str] = None,
        redis_prefix: Optional[str] = None,
        cache: Union[str, "os.PathLike[str]", None] = None,
        cache_ttl: Optional[float] = None,
        # the prompt limit
        max_prompt_tokens: Optional[int] = None,
        # the intermediate steps
        return_steps: bool = False,
        # replies cut at the output limit: "warn" (TruncationWarning), "error", "ignore"
        on_truncation: str = "warn",
        # extra output tokens for a reasoning model's thinking, on every call
        thinking_reserve: int = 0,
        # the answer when the model says the sources do not answer
        not_in_sources_answer: Optional[str] = None,
        # whether the model takes images, over what its server says (None: as it says)
        vision: Optional[bool] = None,
        # evidence first: each node shown as its sentences bearing on the question (None: on
        # with a model, off for the extractive backend)
        evidence: Optional[bool] = None,
        evidence_tokens: Optional[int] = None,
        # an answer whose facts are in no source it was shown: "warn", "abstain", "error"
        # (None: "abstain" with a model, "warn" for the extractive backend)
        on_unsupported: Optional[str] = None,
        # a query the model declines though the evidence covers it: "extract" (None, the
        # default: the sources' own sentences) or "keep" (the model's words)
        on_declined: Optional[str] = None,
        # escalation: True (the first 5 nodes) or how many nodes are read first; then
        # map_reduce over every node when that answer abstains or is found in no source
        # (not with stream())
        escalate: Union[bool, int, None] = None,
        # what calls tell a server so that it reuses the prompt prefix they share:
        # "auto" (id_slot, prompt_cache_key to OpenAI's server, cache_control), "all"
        # (prompt_cache_key to every server too) or "none"
        reuse_hints: str = "auto",
    ) -> None: ...
    def synthesize(self, query: str, nodes: Iterable[NodeLike]) -> Response: ...
    def asynthesize(self, query: str, nodes: Iterable[NodeLike]) -> Awaitable[Response]: ...
    def stream(self, query: str, nodes: Iterable[NodeLike]) -> ResponseStream: ...
    def synthesize_many(
        self,
        requests: Iterable[RequestLike],
        jobs: int = 4,
        *,
        paths_root: Optional[Union[str, os.PathLike[str]]] = None,
        allow_paths_outside: bool = False,
        chunk_size: int = 1024,
        top_k: Optional[Union[int, Literal["all"]]] = None,
        index_dir: Optional[Union[str, os.PathLike[str]]] = None,
    ) -> list[Union[Response, FailedRequest, dict[str, Any]]]:
        """A ``Response`` or ``FailedRequest`` per request, in input order; a dict request
        with ``"plan": True`` gets its plan (``{"rows", "calls", "prompt_tokens",
        "max_completion_tokens", "exact"}``), and no model is called for it. With
        ``paths_root``, a dict request's ``paths`` (and ``top_k``) are read under that
        folder as ``synthkit batch`` reads a line's."""
    def asynthesize_many(
        self,
        requests: Iterable[RequestLike],
        jobs: int = 4,
        *,
        paths_root: Optional[Union[str, os.PathLike[str]]] = None,
        allow_paths_outside: bool = False,
        chunk_size: int = 1024,
        top_k: Optional[Union[int, Literal["all"]]] = None,
        index_dir: Optional[Union[str, os.PathLike[str]]] = None,
    ) -> Awaitable[list[Union[Response, FailedRequest, dict[str, Any]]]]: ...
    @property
    def mode(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def context_window(self) -> int: ...
    @property
    def num_output(self) -> int: ...
