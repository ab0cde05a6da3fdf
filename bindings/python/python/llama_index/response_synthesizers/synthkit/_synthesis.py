"""One ``synthesize`` or ``asynthesize`` call of a ``SynthkitSynthesizer``: the events
LlamaIndex's synthesizers send around it and its response (``_Synthesis``), and a stream's
deltas as the generators LlamaIndex's streaming responses take (``_deltas``,
``_adeltas``)."""

from __future__ import annotations

import contextlib
from typing import Any, AsyncGenerator, Generator, Iterator, List, Optional, Protocol, Sequence

from llama_index.core.base.response.schema import RESPONSE_TYPE
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.instrumentation.events.synthesis import (
    SynthesizeEndEvent,
    SynthesizeStartEvent,
)
from llama_index.core.response_synthesizers.base import QueryTextType
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.types import RESPONSE_TEXT_TYPE
import llama_index.core.instrumentation as instrument

import synthkit_rs


class _Owner(Protocol):
    """What a synthesis asks of the synthesizer that runs it (``SynthkitSynthesizer``
    has each member): named here so that this module needs nothing from ``base``."""

    _callback_manager: CallbackManager
    _streaming: bool
    _synth: synthkit_rs.Synthesizer
    last_response: Optional[synthkit_rs.Response]

    def _empty(self, query: QueryTextType, is_async: bool) -> RESPONSE_TYPE: ...

    def _synthkit_nodes(self, nodes: List[NodeWithScore]) -> Any: ...

    def _prepare_response_output(
        self, response_str: RESPONSE_TEXT_TYPE, source_nodes: List[NodeWithScore]
    ) -> RESPONSE_TYPE: ...

    def _finished(
        self, result: synthkit_rs.Response, source_nodes: List[NodeWithScore]
    ) -> RESPONSE_TYPE: ...


#: The events go through the synthesizer module's dispatcher (the one its spans use), as
#: LlamaIndex's synthesizers send theirs from their own module.
dispatcher = instrument.get_dispatcher("llama_index.response_synthesizers.synthkit.base")


class _Synthesis:
    """One ``synthesize`` or ``asynthesize`` call of a :class:`SynthkitSynthesizer`: the
    events LlamaIndex's synthesizers send around it (the start and end events, the
    callback manager's ``SYNTHESIZE`` event) and its response, written once for both.

    Made, it has sent the start event; with no nodes, ``response`` is already the empty
    response (and the end event sent). The caller runs the synthesis inside ``events()``
    when it yields True (a streamed response is set before the block) and sets the
    response with ``finish``."""

    def __init__(
        self,
        synthesizer: _Owner,
        query: QueryTextType,
        nodes: List[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]],
        is_async: bool,
    ) -> None:
        self._synthesizer = synthesizer
        self.response: Optional[RESPONSE_TYPE] = None
        self._deltas = _adeltas if is_async else _deltas
        dispatcher.event(SynthesizeStartEvent(query=query))
        if len(nodes) == 0:
            self.response = synthesizer._empty(query, is_async=is_async)
            dispatcher.event(SynthesizeEndEvent(query=query, response=self.response))
            return
        self.query = QueryBundle(query_str=query) if isinstance(query, str) else query
        self.query_str = self.query.query_str
        self._nodes = nodes
        self.items: Any = None
        self.source_nodes = list(nodes) + list(additional_source_nodes or [])

    @contextlib.contextmanager
    def events(self) -> Iterator[bool]:
        """The callback manager's ``SYNTHESIZE`` event around the block (the nodes are
        converted inside it, into ``items``; a streaming synthesizer's response is set
        there too), then the end event; an exception sends neither end. Yields whether
        the block has a synthesis to run: False for the empty response (sent already)
        and for a stream."""
        if self.response is not None:
            yield False
            return
        with self._synthesizer._callback_manager.event(
            CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: self.query_str}
        ) as event:
            self.items = self._synthesizer._synthkit_nodes(self._nodes)
            if self._synthesizer._streaming:
                self._stream()
            yield self.response is None
            event.on_end(payload={EventPayload.RESPONSE: self.response})
        dispatcher.event(SynthesizeEndEvent(query=self.query, response=self.response))

    def _stream(self) -> None:
        """The streamed response: ``_deltas`` or ``_adeltas`` over the stream."""
        response_str: RESPONSE_TEXT_TYPE = self._deltas(
            self._synthesizer._synth.stream(self.query_str, self.items), self._synthesizer
        )
        self.response = self._synthesizer._prepare_response_output(
            response_str, self.source_nodes
        )

    def finish(self, result: synthkit_rs.Response) -> None:
        """The response of a finished synthesis."""
        self.response = self._synthesizer._finished(result, self.source_nodes)


def _deltas(
    stream: synthkit_rs.ResponseStream, owner: Any = None
) -> Generator[str, None, None]:
    """The stream's deltas as a generator (what LlamaIndex's StreamingResponse takes); once
    drained, the full response is ``owner.last_response`` (usage, citations)."""
    try:
        yield from stream
        if owner is not None:
            owner.last_response = stream.response
    finally:
        stream.close()


async def _adeltas(
    stream: synthkit_rs.ResponseStream, owner: Any = None
) -> AsyncGenerator[str, None]:
    """The stream's deltas as an async generator (for AsyncStreamingResponse); once
    drained, the full response is ``owner.last_response``."""
    try:
        async for delta in stream:
            yield delta
        if owner is not None:
            owner.last_response = stream.response
    finally:
        stream.close()
