"""``synthkit_rs.ray.build_processor`` on a local Ray (2 CPUs): answers for every row, plan
rows that call no model, ``paths`` rows and bad rows as error rows when
``should_continue_on_error``, a raise without it, an autoscaling ``(min, max)`` actor pool;
and ``import synthkit_rs`` without Ray.

Skipped with a message when Ray is not installed, unless ``CI`` is set: then it fails
(scripts/python-tests.sh runs it in the venv of the wheel's [ray] extra).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Dict, Iterator

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI
from sharing_support import need_ray

NODES = ["The primary mirror is cleaned every six months.", "The dome opens at dusk."]

#: Starting Ray on a loaded 2-core machine takes a while.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    ray = need_ray()
    # Ray's workers cannot import this test module: its functions go by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _question(row: Dict[str, Any]) -> Dict[str, Any]:
    """The test's preprocess: a row of the dataset to a request."""
    request: Dict[str, Any] = {"id": row["qid"], "query": row["question"]}
    if row["kind"] == "paths":
        request["paths"] = ["docs"]
    else:
        request["nodes"] = NODES
    if row["kind"] == "plan":
        request["plan"] = True
    if row["kind"] == "bad":
        request["mode"] = "fastest"
    return request


def _rows(n: int) -> list:
    kinds = ["answer"] * n + ["plan", "paths", "bad"]
    return [{"qid": f"q{i}", "question": f"How often is the primary mirror cleaned, question {i}?",
             "kind": kind} for i, kind in enumerate(kinds)]


def test_every_row_answered_plans_and_error_rows_on_an_autoscaling_pool(local_ray: Any) -> None:
    from synthkit_rs.ray import SynthkitProcessorConfig, build_processor

    config = SynthkitProcessorConfig(batch_size=4, concurrency=(1, 2), should_continue_on_error=True)
    processor = build_processor(
        config,
        preprocess=_question,
        postprocess=lambda row: {"qid": row["qid"], "id": row["id"], "kind": row["kind"],
                                 "answer": row["response"]["text"] if row["response"] else None,
                                 "calls": row["plan"]["calls"] if row["plan"] else None},
    )
    rows = _rows(20)
    out = {r["qid"]: r for r in processor(local_ray.data.from_items(rows)).take_all()}
    assert sorted(out) == sorted(r["qid"] for r in rows)
    for row in rows:
        got = out[row["qid"]]
        assert got["id"] == row["qid"], got
        if row["kind"] == "answer":
            assert "six months" in got["answer"], got
            assert got["__inference_error__"] == ""
        elif row["kind"] == "plan":
            assert got["answer"] is None and got["calls"] == 1, got
        elif row["kind"] == "paths":
            assert got["error"]["kind"] == "invalid_request", got
            assert "`paths`" in got["__inference_error__"]
            assert got["__inference_error__"].startswith(f'id "{row["qid"]}": ')
        else:
            assert got["error"]["kind"] == "invalid_request", got
            assert "unknown response mode" in got["__inference_error__"], got


def test_plan_rows_call_no_model_and_rows_keep_their_columns(local_ray: Any) -> None:
    from synthkit_rs.ray import SynthkitProcessorConfig, build_processor

    with FakeOpenAI() as server:
        config = SynthkitProcessorConfig(base_url=server.base_url, context_window=4096,
                                         num_output=64, batch_size=8, concurrency=1,
                                         synthesizer_options={"evidence": False})
        rows = [{"qid": f"q{i}", "question": f"question {i}?", "kind": "plan" if i % 2 else "answer"}
                for i in range(6)]
        out = build_processor(config, preprocess=_question)(local_ray.data.from_items(rows)).take_all()
        assert len(out) == 6
        by_id = {r["id"]: r for r in out}
        assert all(by_id[f"q{i}"]["plan"]["calls"] == 1 for i in (1, 3, 5))
        assert all(by_id[f"q{i}"]["response"]["text"] for i in (0, 2, 4))
        # The rows keep their own columns.
        assert by_id["q0"]["question"] == "question 0?"
        assert server.calls == 3


def test_paths_rows_are_read_under_the_configs_root(local_ray: Any, tmp_path: Any) -> None:
    from synthkit_rs.ray import SynthkitProcessorConfig, build_processor

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "mirror.md").write_text("# Mirror\n\nThe primary mirror is cleaned every six months.\n")
    config = SynthkitProcessorConfig(batch_size=2, concurrency=1, should_continue_on_error=True,
                                     paths_root=str(tmp_path))
    rows = [{"qid": "q0", "question": "How often is the primary mirror cleaned?", "kind": "paths"},
            {"qid": "q1", "question": "How often is the primary mirror cleaned?", "kind": "answer"}]
    out = {r["id"]: r for r in
           build_processor(config, preprocess=_question)(local_ray.data.from_items(rows)).take_all()}
    read = out["q0"]["response"]
    assert "six months" in read["text"], read
    # Named as a batch line's paths are: relative to the root.
    assert [n["id"] for n in read["source_nodes"]] == ["docs/mirror.md#1"], read
    assert out["q1"]["__inference_error__"] == "", out["q1"]


def test_a_paths_root_that_is_no_folder_is_refused_before_ray_runs(tmp_path: Any) -> None:
    from synthkit_rs.ray import SynthkitProcessorConfig, build_processor

    with pytest.raises(synthkit_rs.InputError, match="the folder `paths` are read under.*paths_root="):
        build_processor(SynthkitProcessorConfig(paths_root=str(tmp_path / "nowhere")))


def test_a_failed_row_raises_without_should_continue_on_error(local_ray: Any) -> None:
    from synthkit_rs.ray import SynthkitProcessorConfig, build_processor

    processor = build_processor(SynthkitProcessorConfig(batch_size=2), preprocess=_question)
    rows = [{"qid": "ok", "question": "How often is the primary mirror cleaned?", "kind": "answer"},
            {"qid": "bad", "question": "How often?", "kind": "bad"}]
    with pytest.raises(Exception, match="should_continue_on_error=True") as failed:
        processor(local_ray.data.from_items(rows)).take_all()
    assert "unknown response mode" in str(failed.value)


@pytest.mark.parametrize("field, value, message", [
    ("concurrency", (2, 1), "1 <= min <= max"),
    ("concurrency", 0, "positive int or a (min, max) tuple"),
    ("batch_size", 0, "batch_size must be a positive int"),
    ("mode", "fastest", "unknown mode 'fastest'"),
    ("retries", 11, "retries must be between 0 and 10"),
    ("synthesizer_options", {"mode": "refine"}, "repeats mode"),
    ("chunk_size", 0, "chunk_size must be a positive int"),
    ("top_k", 0, "top_k must be a positive int"),
])
def test_bad_configs_say_what_to_change(field: str, value: Any, message: str) -> None:
    from synthkit_rs.ray import SynthkitProcessorConfig

    with pytest.raises(synthkit_rs.InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SynthkitProcessorConfig(**{field: value})


def test_the_config_repr_holds_no_redis_password() -> None:
    from synthkit_rs.ray import SynthkitProcessorConfig

    config = SynthkitProcessorConfig(redis_url="redis://:hunter2@127.0.0.1:6379/", tpm=1000)
    assert "hunter2" not in repr(config)


def test_importing_synthkit_rs_does_not_import_ray() -> None:
    code = "import sys, synthkit_rs; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
