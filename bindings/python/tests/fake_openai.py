"""A loopback OpenAI-compatible server for tests and benchmarks (127.0.0.1 only).

Serves ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions``,
as JSON or as server-sent events (``"stream": true``), answering instantly with a fixed
text (or one chosen by a function of the prompt), and records every completion request so
tests can count calls and read prompts. Everything else answers 404, as a server without
llama.cpp's ``/props`` or ``/tokenize`` does.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

DEFAULT_ANSWER = "The mirror is cleaned every six months."


@dataclass
class Recorded:
    """One completion request as the server received it."""

    path: str
    body: dict[str, Any]
    prompt: str
    stream: bool
    #: When it arrived (``time.monotonic()``).
    at: float = 0.0


@dataclass
class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 in a background thread.

    Use as a context manager; ``base_url`` is ``http://127.0.0.1:PORT/v1``.

    Args:
        answer: the reply text, or a function from the prompt text to it.
        model: the model id listed at ``/v1/models``.
        context_window: listed as ``max_model_len`` (vLLM's field) when set.
        delay: seconds to wait before answering each completion.
        hold: when given, each completion waits for this event before answering (for
            cancellation tests: a call that ends while the server holds its answer did
            not wait for it; ``answered`` counts the completions answered).
        status: an HTTP error status to answer completions with (with an OpenAI error body).
        report_usage: whether replies carry ``usage`` (word counts, always below token counts).
    """

    answer: Any = DEFAULT_ANSWER
    model: str = "fake-model"
    context_window: Optional[int] = None
    delay: float = 0.0
    hold: Optional[threading.Event] = None
    status: Optional[int] = None
    report_usage: bool = True
    requests: list[Recorded] = field(default_factory=list)
    _answered: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: Optional[ThreadingHTTPServer] = None
    _thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        """The API base URL, up to and including ``/v1``."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    @property
    def calls(self) -> int:
        """Completion requests received so far."""
        with self._lock:
            return len(self.requests)

    @property
    def answered(self) -> int:
        """Completion requests answered so far (past ``delay`` and ``hold``)."""
        with self._lock:
            return self._answered

    def reset(self) -> None:
        """Forgets the recorded requests."""
        with self._lock:
            self.requests.clear()

    def reply_for(self, prompt: str) -> str:
        """The answer to ``prompt``."""
        if callable(self.answer):
            fn: Callable[[str], str] = self.answer
            return fn(prompt)
        return str(self.answer)

    def start(self) -> "FakeOpenAI":
        """Starts serving on a free port of 127.0.0.1."""
        handler = _make_handler(self)
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)


class _Server(ThreadingHTTPServer):
    """Quiet about clients that left before their answer (a cancelled call's connection
    is closed while the server holds its answer)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def _prompt_of(body: dict[str, Any]) -> str:
    """The prompt text of a chat or completion request body."""
    if "messages" in body:
        parts = []
        for m in body.get("messages") or []:
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(
                    c.get("text", "") for c in content if isinstance(c, dict)
                )
            parts.append(str(content or ""))
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return "\n".join(str(p) for p in prompt)
    return str(prompt)


def _words(text: str) -> int:
    return len(text.split())


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler that answers JSON: the base of the tests' fake servers."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _make_handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as separate writes: without TCP_NODELAY each reply waits
        # for the client's delayed ACK (about 40 ms on Linux).
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/") == "/v1/models":
                entry: dict[str, Any] = {
                    "id": server.model,
                    "object": "model",
                    "owned_by": "fake",
                }
                if server.context_window:
                    entry["max_model_len"] = server.context_window
                self._send_json(200, {"object": "list", "data": [entry]})
            else:
                self._send_json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = self.path.rstrip("/")
            if path not in ("/v1/chat/completions", "/v1/completions"):
                self._send_json(404, {"error": {"message": "not found"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "bad json"}})
                return
            prompt = _prompt_of(body)
            stream = bool(body.get("stream"))
            server._record(
                Recorded(
                    path=path, body=body, prompt=prompt, stream=stream, at=time.monotonic()
                )
            )
            if server.delay:
                time.sleep(server.delay)
            if server.hold is not None:
                server.hold.wait()
            with server._lock:
                server._answered += 1
            if server.status is not None:
                self._send_json(
                    server.status,
                    {"error": {"message": "the fake server was told to fail", "type": "test"}},
                )
                return
            text = server.reply_for(prompt)
            chat = path.endswith("chat/completions")
            usage = {
                "prompt_tokens": _words(prompt),
                "completion_tokens": _words(text),
                "total_tokens": _words(prompt) + _words(text),
            }
            if stream:
                self._stream(text, chat, usage, body)
            else:
                choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                payload: dict[str, Any] = {
                    "id": "cmpl-fake",
                    "object": "chat.completion" if chat else "text_completion",
                    "created": int(time.time()),
                    "model": server.model,
                    "choices": [choice],
                }
                if server.report_usage:
                    payload["usage"] = usage
                self._send_json(200, payload)

        def _stream(
            self, text: str, chat: bool, usage: dict[str, int], body: dict[str, Any]
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            pieces = _split_keep_spaces(text)
            base = {
                "id": "cmpl-fake",
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()),
                "model": server.model,
            }
            try:
                for i, piece in enumerate(pieces):
                    if chat:
                        delta: dict[str, Any] = {"content": piece}
                        if i == 0:
                            delta["role"] = "assistant"
                        choice = {"index": 0, "delta": delta, "finish_reason": None}
                    else:
                        choice = {"index": 0, "text": piece, "finish_reason": None}
                    self._event({**base, "choices": [choice]})
                last = (
                    {"index": 0, "delta": {}, "finish_reason": "stop"}
                    if chat
                    else {"index": 0, "text": "", "finish_reason": "stop"}
                )
                self._event({**base, "choices": [last]})
                wants_usage = (body.get("stream_options") or {}).get("include_usage")
                if server.report_usage and wants_usage:
                    self._event({**base, "choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            self.close_connection = True

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


def _split_keep_spaces(text: str) -> list[str]:
    """``text`` in word-sized pieces whose concatenation is ``text``."""
    pieces: list[str] = []
    current = ""
    for ch in text:
        current += ch
        if ch == " ":
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces or [""]
