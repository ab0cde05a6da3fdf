"""A refusal (or a reply without text) is ``synthkit_rs.RefusalError``, a ``ModelError``."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Any, Iterator

import pytest

import synthkit_rs
from fake_openai import JsonHandler

QUERY = "How often is the mirror cleaned?"
NODES = ["The mirror is cleaned every six months."]

REFUSAL = {
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2},
}


class _Refusing(JsonHandler):

    def do_GET(self) -> None:  # noqa: N802
        self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self._send_json(200, REFUSAL)


@pytest.fixture
def refusing_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_refusal_is_a_refusal_error(refusing_url: str) -> None:
    assert issubclass(synthkit_rs.RefusalError, synthkit_rs.ModelError)
    synth = synthkit_rs.Synthesizer(base_url=refusing_url, model="m", context_window=4096)
    with pytest.raises(synthkit_rs.RefusalError, match="refused"):
        synth.synthesize(QUERY, NODES)
