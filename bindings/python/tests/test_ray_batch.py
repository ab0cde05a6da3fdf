"""The Ray example (examples/ray_batch.py) end to end: a local Ray with 2 CPUs, 2 actors, a
loopback OpenAI-compatible server and a real Redis holding the shared budget and cache;
``synthkit batch``'s ids, duplicate check and error lines; a run killed with SIGKILL and
resumed, offline (the extractive backend) and against a loopback Anthropic Messages API.

Skipped with a message when Ray is not installed, unless ``CI`` is set: then it fails
(scripts/python-tests.sh installs it).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI, JsonHandler
from sharing_support import charges, need_ray, redis_server, steady_tokens_per_minute

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "ray_batch.py"
NODES = ["The primary mirror is cleaned every six months.", "The dome opens at dusk."]
NUM_OUTPUT = 64


def test_ray_actors_answer_every_request_once_within_one_shared_budget(
    tmp_path: pathlib.Path,
) -> None:
    need_ray()
    tpm = 30_000
    steady_s = 25
    with redis_server() as redis_url, FakeOpenAI() as server:
        probe = synthkit_rs.Synthesizer(base_url=server.base_url, num_output=NUM_OUTPUT,
                                        evidence=False)
        probe.synthesize("question 1000?", NODES)
        charge = charges(server.requests)[0]
        server.reset()
        # The budget's burst (a minute's worth), then `steady_s` seconds at the rate.
        total = math.ceil(tpm * (1 + steady_s / 60) / charge) + 2
        requests = tmp_path / "requests.jsonl"
        with requests.open("w") as f:
            for i in range(total):
                f.write(json.dumps({"id": f"r{i}", "query": f"question {i}?", "nodes": NODES,
                                    "evidence": False}) + "\n")
        results = tmp_path / "results.jsonl"
        proc = subprocess.run(
            [sys.executable, str(EXAMPLE), str(requests), str(results),
             "--base-url", server.base_url, "--num-output", str(NUM_OUTPUT),
             "--tpm", str(tpm), "--redis-url", redis_url, "--cache", "redis",
             "--actors", "2", "--num-cpus", "2", "--batch-size", "16"],
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        lines = [json.loads(line) for line in results.read_text().splitlines()]
        ids = [line["id"] for line in lines]
        assert sorted(ids) == sorted(f"r{i}" for i in range(total))
        errors = [line for line in lines if "response" not in line]
        assert errors == []
        # Every request reached the model server exactly once.
        assert server.calls == total
        prompts = sorted(r.prompt for r in server.requests)
        assert len(set(prompts)) == total
        rate = steady_tokens_per_minute(server.requests, burst_tokens=tpm)
        print(f"steady rate at the server: {rate:.0f} tokens/minute, cap {tpm}")
        assert abs(rate / tpm - 1) <= 0.05, f"{rate:.0f} tokens/minute against a cap of {tpm}"


def _write(path: pathlib.Path, lines: List[Any]) -> pathlib.Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def _results(path: pathlib.Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _recipe(inp: pathlib.Path, out: pathlib.Path, *extra: str) -> List[str]:
    return [sys.executable, str(EXAMPLE), str(inp), str(out), "--num-cpus", "2", *extra]


def test_ids_error_lines_and_duplicates_as_synthkit_batch_has_them(tmp_path: pathlib.Path) -> None:
    need_ray()
    inp = _write(tmp_path / "in.jsonl", [
        {"query": "How often is the mirror cleaned?", "nodes": NODES},  # id 1
        {"id": "a", "query": "When does the dome open?", "nodes": NODES},
        "",  # blank: skipped, still counted
        "not json",  # id 4: an error line
        {"query": "When does the dome open?", "nodes": NODES, "paths": ["docs"]},  # id 5
        {"query": "When?", "nodes": NODES},  # id 6
        {"query": "When does the dome open?", "nodes": NODES, "plan": True},  # id 7
    ])
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(_recipe(inp, out, "--actors", "1"), capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 1, proc.stderr[-4000:]
    by_id = {json.dumps(r["id"]): r for r in _results(out)}
    assert sorted(by_id) == sorted(["1", '"a"', "4", "5", "6", "7"])
    assert "six months" in by_id["1"]["response"]["text"]
    assert by_id["4"]["error"]["kind"] == "invalid_request"
    assert by_id["4"]["error"]["message"].startswith("line 4: not JSON")
    assert by_id["5"]["error"]["kind"] == "invalid_request"
    # A plan line is an error line, as in synthkit batch (which plans a file with --plan).
    assert by_id["7"]["error"]["kind"] == "invalid_request"
    assert by_id["7"]["error"]["message"].startswith("line 7: `plan` asks for a plan")
    assert all(len(r["request_sha256"]) == 64 for r in by_id.values())
    # Run again: every result is kept (the error lines are permanent ones).
    again = subprocess.run(_recipe(inp, out, "--actors", "1"), capture_output=True, text=True,
                           timeout=240)
    assert again.returncode == 1, again.stderr[-4000:]
    assert "6 results kept" in again.stderr, again.stderr[-4000:]
    assert [json.dumps(r["id"]) for r in _results(out)] == list(by_id)
    # Two lines with one id: refused before any call, naming both lines (exit 2).
    dup = _write(tmp_path / "dup.jsonl", [
        {"query": "q", "nodes": NODES},
        {"id": 1, "query": "q2", "nodes": NODES},
    ])
    proc = subprocess.run(_recipe(dup, tmp_path / "dup-out.jsonl"), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "lines 1 and 2 of the input have the same id 1" in proc.stderr


class FakeAnthropic:
    """A loopback Messages API server (127.0.0.1): ``POST /v1/messages`` answers after
    ``delay`` seconds with a fixed text (HTTP 500 for the first ``fail_first`` sends of
    each request body), ``/v1/messages/count_tokens`` counts a token per
    3 bytes of the body, ``GET /v1/models`` lists ``fake``; every message request is
    counted."""

    def __init__(self, delay: float, fail_first: int = 0) -> None:
        self.delay = delay
        self.fail_first = fail_first
        self.calls = 0
        self._seen: Dict[bytes, int] = {}
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FakeAnthropic":
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith("/v1/models"):
                    self._send_json(200, {"data": [{"id": "fake", "type": "model"}],
                                     "has_more": False})
                else:
                    self._send_json(404, {"type": "error", "error": {"type": "not_found_error"}})

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/v1/messages/count_tokens":
                    self._send_json(200, {"input_tokens": len(body) // 3 + 1})
                    return
                if self.path != "/v1/messages":
                    self._send_json(404, {"type": "error", "error": {"type": "not_found_error"}})
                    return
                with fake._lock:
                    fake.calls += 1
                    seen = fake._seen[body] = fake._seen.get(body, 0) + 1
                time.sleep(fake.delay)
                if seen <= fake.fail_first:
                    self._send_json(500, {"type": "error",
                                     "error": {"type": "api_error", "message": "down"}})
                    return
                self._send_json(200, {
                    "type": "message", "role": "assistant", "model": "fake",
                    "content": [{"type": "text", "text": "Every six months."}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": len(body) // 3 + 1, "output_tokens": 4},
                })

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _complete_lines(path: pathlib.Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("backend", ["offline", "anthropic"])
def test_a_killed_run_resumes_with_every_id_once(tmp_path: pathlib.Path, backend: str) -> None:
    need_ray()
    total = 3000 if backend == "offline" else 400
    # Half the lines without an id: named by their line number, as synthkit batch does.
    lines = [
        {"query": f"question {i}: how often is the mirror cleaned?", "nodes": NODES,
         "evidence": False}
        if i % 2 else {"id": f"r{i}", "query": f"question {i}?", "nodes": NODES, "evidence": False}
        for i in range(total)
    ]
    expected = sorted(json.dumps(f"r{i}" if i % 2 == 0 else i + 1) for i in range(total))
    inp = _write(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    with FakeAnthropic(delay=0.05) as server:
        extra = ["--actors", "2", "--batch-size", "8", "--jobs", "4"]
        if backend == "anthropic":
            extra += ["--api", "anthropic", "--base-url", server.base_url,
                      "--context-window", "4096", "--num-output", "64"]
        env = {**os.environ, "ANTHROPIC_API_KEY": "test-key"}
        proc = subprocess.Popen(_recipe(inp, out, *extra), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
        deadline = time.monotonic() + 180
        while _complete_lines(out) < 16 and proc.poll() is None:
            assert time.monotonic() < deadline, "no result within 180 s"
            time.sleep(0.02)
        # kill -9 the driver and the local Ray it started (its process group).
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        before = _results_whole(out)
        assert 0 < len(before) < total, f"{len(before)} of {total} written before the kill"
        assert all("response" in r for r in before)
        # Ray's workers learn of the driver's death on their own: let their last calls land.
        calls_before, settle = -1, time.monotonic() + 30
        while server.calls != calls_before and time.monotonic() < settle:
            calls_before = server.calls
            time.sleep(2)
        again = subprocess.run(_recipe(inp, out, *extra), capture_output=True, text=True,
                               env=env, timeout=240)
        assert again.returncode == 0, again.stderr[-4000:]
        assert f"resuming {out}: {len(set(json.dumps(r['id']) for r in before))} results kept" \
            in again.stderr, again.stderr[-4000:]
        after = _results(out)
        ids = sorted(json.dumps(r["id"]) for r in after)
        assert ids == expected  # every id exactly once, no line lost
        assert all("response" in r for r in after)
        # Lines kept from the first run are not sent again.
        if backend == "anthropic":
            assert server.calls - calls_before == total - len(before)


def _results_whole(path: pathlib.Path) -> List[Dict[str, Any]]:
    """The complete lines of a file a killed run was writing."""
    text = path.read_text()
    return [json.loads(line) for line in text.split("\n")[:-1]]


def test_transient_failures_are_retried_in_the_run_and_on_resume(tmp_path: pathlib.Path) -> None:
    need_ray()
    import synthkit_rs as synthkit

    # How many sends one request makes through synthkit's own retries when every send
    # fails with a 500: the recipe's retries come after those.
    with FakeAnthropic(delay=0.0, fail_first=10**6) as server:
        synth = synthkit.Synthesizer(api="anthropic", base_url=server.base_url,
                                     context_window=4096, num_output=64)
        [failed] = synth.synthesize_many([("How often is the mirror cleaned?", NODES)])
        assert isinstance(failed, synthkit.FailedRequest)
        assert failed.to_dict()["transient"] == "server_error"
        sends = server.calls
    lines = [{"query": f"question {i}: how often is the mirror cleaned?", "nodes": NODES,
              "evidence": False}
             for i in range(6)]
    inp = _write(tmp_path / "in.jsonl", lines)
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key"}

    def recipe(out: pathlib.Path, url: str, retries: int) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(
            _recipe(inp, out, "--api", "anthropic", "--base-url", url, "--context-window",
                    "4096", "--num-output", "64", "--actors", "1", "--retries", str(retries)),
            capture_output=True, text=True, env=env, timeout=240)

    # In the run: each request fails `sends` times, then the recipe's one retry answers.
    with FakeAnthropic(delay=0.0, fail_first=sends) as server:
        out = tmp_path / "retried.jsonl"
        proc = recipe(out, server.base_url, 1)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert server.calls == len(lines) * (sends + 1)
        assert sorted(r["id"] for r in _results(out)) == list(range(1, 7))
    # No retry in the run: transient error lines; the next run retries them.
    with FakeAnthropic(delay=0.0, fail_first=sends) as server:
        out = tmp_path / "resumed.jsonl"
        proc = recipe(out, server.base_url, 0)
        assert proc.returncode == 1, proc.stderr[-4000:]
        first = _results(out)
        assert [r["error"]["transient"] for r in first] == ["server_error"] * len(lines)
        proc = recipe(out, server.base_url, 0)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert f"{len(lines)} failed lines to retry" in proc.stderr, proc.stderr[-4000:]
        after = _results(out)
        assert sorted(r["id"] for r in after) == list(range(1, 7))
        assert all("response" in r for r in after)


def test_paths_lines_are_read_under_the_input_folder_as_synthkit_batch_reads_them(
        tmp_path: pathlib.Path) -> None:
    need_ray()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "mirror.md").write_text("# Mirror\n\nThe primary mirror is cleaned every six months.\n")
    (docs / "dome.md").write_text("# Dome\n\nThe dome opens at dusk and closes at dawn.\n")
    (tmp_path / "secret.txt").write_text("outside the folder of paths")
    inp = _write(tmp_path / "in.jsonl", [
        {"id": "mirror", "query": "How often is the primary mirror cleaned?", "paths": ["docs"]},
        {"id": "one", "query": "When does the dome open?", "paths": ["docs/dome.md"],
         "top_k": 1},
        {"id": "up", "query": "What is outside?", "paths": ["../secret.txt"]},
        {"id": "none", "query": "Who painted the ceiling?", "paths": ["docs"], "top_k": 2},
    ])
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(_recipe(inp, out, "--actors", "1"), capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 1, proc.stderr[-4000:]
    by_id = {r["id"]: r for r in _results(out)}
    mirror = by_id["mirror"]["response"]
    assert "six months" in mirror["text"], mirror
    # Named as a batch line's paths are: relative to the root (the input's folder).
    assert "docs/mirror.md#1" in [n["id"] for n in mirror["source_nodes"]], mirror
    one = by_id["one"]["response"]
    assert [n["id"] for n in one["source_nodes"]] == ["docs/dome.md#1"], one
    assert by_id["up"]["error"]["kind"] == "invalid_request"
    assert "goes up a folder" in by_id["up"]["error"]["message"], by_id["up"]
    assert by_id["up"]["error"]["message"].startswith("line 3: "), by_id["up"]
    # Ranked (top_k) and nothing in the folder bears on the question: no nodes.
    assert by_id["none"]["response"]["source_nodes"] == [], by_id["none"]
