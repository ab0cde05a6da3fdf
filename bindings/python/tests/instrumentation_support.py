"""Recording what LlamaIndex's root dispatcher sees, for the tests of synthkit's events.

Import it after ``pytest.importorskip("llama_index.core")``: it needs LlamaIndex.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Tuple

import llama_index.core.instrumentation as instrument
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from pydantic import Field


class Collect(BaseEventHandler):
    """Records every instrumentation event."""

    events: List[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Collect"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@contextlib.contextmanager
def root_recording() -> Iterator[Tuple[List[BaseEvent], SimpleSpanHandler]]:
    """Every event and every finished span of the root dispatcher while the block runs:
    ``(events, span_handler)``; the handlers are removed afterwards."""
    root = instrument.get_dispatcher()
    events, spans = Collect(), SimpleSpanHandler()
    root.add_event_handler(events)
    root.add_span_handler(spans)
    try:
        yield events.events, spans
    finally:
        root.event_handlers.remove(events)
        root.span_handlers.remove(spans)
