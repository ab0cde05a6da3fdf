"""Python models for ``synthkit_rs.Synthesizer(llm=...)``: the adapters the Rust engine calls.

The engine only knows one protocol, an *adapter*:

- ``name``, ``context_window``, ``num_output`` (``None``: not known), ``is_chat``,
  ``system_prompt``, ``tokenizer`` (``None``, a built-in tokenizer's name, or a callable
  ``str -> list``);
- ``has_sync`` / ``has_async``: which of ``call`` and ``acall`` it can run;
- ``call(prompt, stream)`` (blocking) and ``async acall(prompt, stream)``: ``prompt`` is a
  string (a completion prompt) or a list of ``(role, content)`` pairs (chat messages).
  Without ``stream`` the reply is ``(text, usage, finish_reason)``; with it, an iterator
  (``call``) or an async iterator (``acall``) of ``(delta, usage, finish_reason)``, where
  ``usage`` is ``(prompt_tokens, completion_tokens)`` or ``None`` and ``finish_reason`` is
  ``"stop"``, ``"length"``, another string or ``None``.

``adapt`` builds one for a LlamaIndex LLM (:class:`LlamaIndexLLM`) or for any callable
(:class:`CallableLLM`), so both go through the same Rust model. The helpers at the end
(``submit``, ``anext``, ``next_item``, ``private_loop``) are how the Rust side runs the
coroutines and iterators on an event loop or a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import sys
import threading
from typing import Any, AsyncIterator, Iterator, List, Optional, Sequence, Tuple, Union

Prompt = Union[str, List[Tuple[str, str]]]
Usage = Optional[Tuple[int, int]]
Reply = Tuple[str, Usage, Optional[str]]
Item = Tuple[str, Usage, Optional[str]]

#: What the engine takes when neither the LLM nor the caller says.
DEFAULT_NUM_OUTPUT = 256


def adapt(
    llm: Any,
    *,
    chat: bool = True,
    name: Optional[str] = None,
    tokenizer: Any = None,
) -> Any:
    """The adapter for ``llm``: a LlamaIndex LLM, or a callable ``(prompt) -> reply``."""
    if _is_llama_index_llm(llm):
        adapter: Any = LlamaIndexLLM(llm)
    elif callable(llm):
        adapter = CallableLLM(llm, chat=chat)
    else:
        raise TypeError(
            f"llm must be a LlamaIndex LLM or a callable, got {type(llm).__name__}"
        )
    if name:
        adapter.name = name
    if tokenizer is not None:
        adapter.tokenizer = tokenizer
    return adapter


def _is_llama_index_llm(obj: Any) -> bool:
    # Imported only if the caller has LlamaIndex loaded already (an LLM object implies it).
    base = sys.modules.get("llama_index.core.base.llms.base")
    return base is not None and isinstance(obj, base.BaseLLM)


# --- LlamaIndex ------------------------------------------------------------------------


#: The adapters whose call is running in this context (their ids). A synthesis started
#: from inside one of them on a synthesizer built on it would wait for a place in flight
#: that its own caller holds: ``synthkit`` refuses it at once instead (``in_call``).
_IN_CALL: "contextvars.ContextVar[frozenset[int]]" = contextvars.ContextVar(
    "synthkit_in_llm_call", default=frozenset()
)


def in_call(adapter_id: int) -> bool:
    """Whether the adapter ``adapter_id`` is running a call in this context."""
    return adapter_id in _IN_CALL.get()


def call_adapter(adapter: Any, prompt: Any, stream: bool) -> Any:
    """``adapter.call(prompt, stream)``, marked as running in this context."""
    token = _IN_CALL.set(_IN_CALL.get() | {id(adapter)})
    try:
        return adapter.call(prompt, stream)
    finally:
        _IN_CALL.reset(token)


async def acall_adapter(adapter: Any, prompt: Any, stream: bool) -> Any:
    """``await adapter.acall(prompt, stream)``, marked as running in this task's context."""
    token = _IN_CALL.set(_IN_CALL.get() | {id(adapter)})
    try:
        return await adapter.acall(prompt, stream)
    finally:
        _IN_CALL.reset(token)


class LlamaIndexLLM:
    """A LlamaIndex LLM as an adapter.

    Calls go through the LLM's own methods, so its client, keys, headers, retries, callback
    manager and instrumentation events are LlamaIndex's: ``achat``/``acomplete`` (and
    ``astream_chat``/``astream_complete``) from the async API, ``chat``/``complete`` (and
    the ``stream_*`` ones) from the blocking API, as LlamaIndex's own synthesizers do.
    A chat model gets chat messages (a completion prompt as one user message); a completion
    model gets one prompt (chat messages through the LLM's ``messages_to_prompt``).
    """

    has_sync = True
    has_async = True

    def __init__(self, llm: Any) -> None:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        self._llm = llm
        self._message = ChatMessage
        self._role = MessageRole
        md = llm.metadata
        model_name = getattr(md, "model_name", None)
        self.name = (
            model_name if model_name and model_name != "unknown" else type(llm).__name__
        )
        self.context_window = _positive(getattr(md, "context_window", None))
        self.num_output = _positive(getattr(md, "num_output", None))
        self.is_chat = bool(getattr(md, "is_chat_model", False))
        prompt = getattr(llm, "system_prompt", None)
        self.system_prompt = prompt if isinstance(prompt, str) and prompt else None
        self.tokenizer = configured_tokenizer()

    def _messages(self, prompt: Prompt) -> List[Any]:
        if isinstance(prompt, str):
            return [self._message(role=self._role.USER, content=prompt)]
        return [self._message(role=self._role(r), content=c) for r, c in prompt]

    def _text(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        return self._llm.messages_to_prompt(self._messages(prompt))

    def call(self, prompt: Prompt, stream: bool) -> Any:
        llm = self._llm
        if self.is_chat:
            messages = self._messages(prompt)
            if stream:
                return _capped(_item(r) for r in llm.stream_chat(messages))
            return _checked(_reply(llm.chat(messages)))
        text = self._text(prompt)
        if stream:
            return _capped(_item(r) for r in llm.stream_complete(text, formatted=True))
        return _checked(_reply(llm.complete(text, formatted=True)))

    async def acall(self, prompt: Prompt, stream: bool) -> Any:
        try:
            return await self._acall(prompt, stream)
        except NotImplementedError:
            # An LLM without async methods: its blocking ones, off the event loop.
            reply = await _in_thread(self.call, prompt, stream)
            return _athreaded(reply) if stream else reply

    async def _acall(self, prompt: Prompt, stream: bool) -> Any:
        llm = self._llm
        if self.is_chat:
            messages = self._messages(prompt)
            if stream:
                return _acapped(_aitems(await llm.astream_chat(messages)))
            return _checked(_reply(await llm.achat(messages)))
        text = self._text(prompt)
        if stream:
            return _acapped(_aitems(await llm.astream_complete(text, formatted=True)))
        return _checked(_reply(await llm.acomplete(text, formatted=True)))


def configured_tokenizer() -> Any:
    """LlamaIndex's configured tokenizer (``Settings.tokenizer``) when one is set.

    ``None`` when none is (synthkit's cl100k_base then counts); a built-in tokenizer's name
    when it is tiktoken's ``cl100k_base`` or ``o200k_base`` (LlamaIndex's default is
    cl100k_base: synthkit's own copy counts the same, without calling into Python).
    """
    core = sys.modules.get("llama_index.core")
    tok = getattr(core, "global_tokenizer", None) if core is not None else None
    if tok is None:
        return None
    func = getattr(tok, "func", tok)
    encoding = getattr(func, "__self__", None)
    name = getattr(encoding, "name", None)
    if type(encoding).__module__.startswith("tiktoken") and name in (
        "cl100k_base",
        "o200k_base",
    ):
        return name
    return tok


def _positive(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and v > 0 else None


def _field(obj: Any, *names: str) -> Any:
    for n in names:
        v = obj.get(n) if isinstance(obj, dict) else getattr(obj, n, None)
        if v is not None:
            return v
    return None


#: Prompt tokens Anthropic's usage counts apart from ``input_tokens`` (a server's prompt
#: cache: llama-server caches every prompt's prefix, Anthropic the marked ones).
_CACHED_INPUT = ("cache_read_input_tokens", "cache_creation_input_tokens")


def _usage(resp: Any) -> Usage:
    """The usage a LlamaIndex response reports: ``raw.usage`` (OpenAI, Anthropic: its
    cached prompt tokens added back) or the token counts LlamaIndex's OpenAI LLMs copy into
    ``additional_kwargs``."""
    raw = getattr(resp, "raw", None)
    usage = _field(raw, "usage") if raw is not None else None
    for source in (usage, getattr(resp, "additional_kwargs", None)):
        if source is None:
            continue
        p = _field(source, "prompt_tokens", "input_tokens")
        c = _field(source, "completion_tokens", "output_tokens")
        if isinstance(p, int) and isinstance(c, int):
            if _field(source, "prompt_tokens") is None:
                p += sum(v for v in (_field(source, n) for n in _CACHED_INPUT) if isinstance(v, int))
            return (p, c)
    return None


def _finish(resp: Any) -> Optional[str]:
    raw = getattr(resp, "raw", None)
    choices = _field(raw, "choices") if raw is not None else None
    if isinstance(choices, (list, tuple)) and choices:
        reason = _field(choices[0], "finish_reason")
        if isinstance(reason, str):
            return reason
    reason = _field(raw, "stop_reason") if raw is not None else None
    if reason == "max_tokens":
        return "length"
    return "stop" if reason == "end_turn" else None


def _text_of(resp: Any) -> str:
    message = getattr(resp, "message", None)
    text = getattr(message, "content", None) if message is not None else resp.text
    return text or ""


def _reply(resp: Any) -> Reply:
    return (_text_of(resp), _usage(resp), _finish(resp))


def _item(resp: Any) -> Item:
    return (resp.delta or "", _usage(resp), _finish(resp))


async def _aitems(gen: Any) -> AsyncIterator[Item]:
    async for r in gen:
        yield _item(r)


async def _in_thread(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` on the loop's default executor, in a copy of the current context."""
    run = contextvars.copy_context().run
    return await asyncio.get_running_loop().run_in_executor(None, run, fn, *args)


async def _athreaded(items: Iterator[Item]) -> AsyncIterator[Item]:
    """A blocking iterator's items, each taken on the executor (never on the loop)."""
    while True:
        item = await _in_thread(next_item, items)
        if item is None:
            return
        yield item


async def _aiter_of(items: Iterator[Item]) -> AsyncIterator[Item]:
    for item in items:
        yield item


# --- the cap on one reply ----------------------------------------------------------------

#: The most bytes (UTF-8) of one reply's text, as the HTTP backends read at most
#: (``Transport::DEFAULT_MAX_REPLY_BYTES`` on the Rust side): an LLM whose reply never
#: ends fails the call instead of filling memory.
MAX_REPLY_BYTES = 8 << 20


class ReplyTooLarge(RuntimeError):
    """An LLM reply over ``MAX_REPLY_BYTES``."""

    def __init__(self) -> None:
        super().__init__(
            f"the llm's reply is over {MAX_REPLY_BYTES} bytes, the cap on one reply (as for "
            "HTTP replies): a reply that never ends, such as an endless iterator, is cut here"
        )


def _text_size(d: Any) -> int:
    text = d if isinstance(d, str) else (d[0] if isinstance(d, tuple) and d else "")
    return len(text.encode("utf-8", "replace")) if isinstance(text, str) else 0


def _capped(items: Any) -> Iterator[Any]:
    """``items`` (deltas or items), failing once their text is over the cap."""
    size = 0
    for d in items:
        size += _text_size(d)
        if size > MAX_REPLY_BYTES:
            raise ReplyTooLarge()
        yield d


async def _acapped(items: Any) -> AsyncIterator[Any]:
    """An async iterator's deltas or items, failing once their text is over the cap."""
    size = 0
    async for d in items:
        size += _text_size(d)
        if size > MAX_REPLY_BYTES:
            raise ReplyTooLarge()
        yield d


def _checked(reply: Reply) -> Reply:
    """A whole reply, refused when its text is over the cap."""
    if _text_size(reply) > MAX_REPLY_BYTES:
        raise ReplyTooLarge()
    return reply


# --- any callable ----------------------------------------------------------------------


class CallableLLM:
    """A plain callable as an adapter: ``fn(prompt) -> str``.

    ``prompt`` is a list of ``{"role", "content"}`` dicts (``chat=True``) or one string.
    ``fn`` may be a function, a coroutine function, or return an (async) iterator of text
    deltas: a streamed synthesis hands the deltas on, a plain one joins them. A function
    runs on a worker thread (never on the event loop); a coroutine function on the
    caller's event loop (a private one for the blocking API).
    """

    tokenizer: Any = None
    system_prompt: Optional[str] = None
    context_window: Optional[int] = None
    num_output: Optional[int] = None

    def __init__(self, fn: Any, chat: bool) -> None:
        self._fn = fn
        self.is_chat = chat
        self.name = getattr(fn, "__name__", None) or type(fn).__name__
        is_async = _is_async_callable(fn)
        self.has_async = is_async
        self.has_sync = not is_async

    def _arg(self, prompt: Prompt) -> Any:
        if isinstance(prompt, str):
            return prompt
        return [{"role": r, "content": c} for r, c in prompt]

    def call(self, prompt: Prompt, stream: bool) -> Any:
        out = self._fn(self._arg(prompt))
        if inspect.isawaitable(out) or hasattr(out, "__aiter__"):
            # A function that returned a coroutine or an async iterator: run it on the
            # private loop, from this worker thread.
            out = submit(private_loop(), None, _collect(out)).result()
        return _shape(out, stream)

    async def acall(self, prompt: Prompt, stream: bool) -> Any:
        out = self._fn(self._arg(prompt))
        if inspect.isawaitable(out):
            out = await out
        if hasattr(out, "__aiter__"):
            gen = _acapped(_as_item(d) async for d in out)
            return gen if stream else _join([i async for i in gen])
        return _aiter_of(iter(_shape(out, True))) if stream else _shape(out, False)


def _is_async_callable(fn: Any) -> bool:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(
        fn, "__call__", fn
    )
    return inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)


async def _collect(out: Any) -> Any:
    if inspect.isawaitable(out):
        out = await out
    if hasattr(out, "__aiter__"):
        return [d async for d in _acapped(out)]
    return out


def _as_item(d: Any) -> Item:
    if isinstance(d, str):
        return (d, None, None)
    if isinstance(d, tuple) and len(d) == 3:
        return d
    raise TypeError(f"a streamed delta must be a string, got {type(d).__name__}")


def _join(items: Sequence[Item]) -> Reply:
    usage = next((i[1] for i in reversed(items) if i[1] is not None), None)
    finish = next((i[2] for i in reversed(items) if i[2] is not None), None)
    return ("".join(i[0] for i in items), usage, finish)


def _shape(out: Any, stream: bool) -> Any:
    """A callable's return value as a reply (or, with ``stream``, an iterator of items)."""
    if isinstance(out, str):
        reply = _checked((out, None, None))
        return iter([reply]) if stream else reply
    if isinstance(out, (list, tuple)) or inspect.isgenerator(out) or hasattr(out, "__next__"):
        items = _capped(_as_item(d) for d in out)
        return items if stream else _join(list(items))
    raise TypeError(
        f"the llm callable must return a string (or an iterator of strings), got {type(out).__name__}"
    )


# --- running calls: the Rust side's helpers ---------------------------------------------


def submit(loop: Any, context: Any, coro: Any) -> "concurrent.futures.Future[Any]":
    """Schedules ``coro`` on ``loop`` (from any thread) in a copy of ``context``.

    Returns a ``concurrent.futures.Future``; cancelling it cancels the task on the loop.
    """
    if context is None:
        return asyncio.run_coroutine_threadsafe(coro, loop)
    # The task copies the context current when it is scheduled: the caller's, so its
    # contextvars (LlamaIndex's active span, say) are seen inside the LLM call.
    return context.copy().run(asyncio.run_coroutine_threadsafe, coro, loop)


def run_in(context: Any, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a copy of ``context`` (on a worker thread)."""
    if context is None:
        return fn(*args)
    return context.copy().run(fn, *args)


async def anext(it: Any) -> Optional[Item]:
    """The next item of an async iterator, ``None`` at its end."""
    try:
        return await it.__anext__()
    except StopAsyncIteration:
        return None


def next_item(it: Iterator[Item]) -> Optional[Item]:
    """The next item of an iterator, ``None`` at its end."""
    return next(it, None)


_private: Optional[asyncio.AbstractEventLoop] = None
_private_lock = threading.Lock()


def private_loop() -> asyncio.AbstractEventLoop:
    """synthkit's own event loop, on a daemon thread: the blocking API runs coroutine
    functions there (started on first use)."""
    global _private
    with _private_lock:
        if _private is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="synthkit-llm-loop", daemon=True
            )
            thread.start()
            _private = loop
        return _private
