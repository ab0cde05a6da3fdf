"""The [ray] extra: one synthesis in a Ray Data pipeline on a local Ray (offline backend)."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator

import pytest

from extra_support import need

ray = need("ray", "ray")
need("ray.data", "ray")

#: Starting Ray on a loaded 2-core machine takes a while.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture()
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_one_synthesis_through_ray_data(local_ray: None) -> None:
    import ray.data

    # Defined here, so that Ray ships it by value (a worker cannot import this test module).
    def _answer(row: Dict[str, Any]) -> Dict[str, Any]:
        import synthkit_rs

        r = synthkit_rs.Synthesizer("compact").synthesize(row["query"], json.loads(row["nodes"]))
        return {"id": row["id"], "answer": r.response, "calls": r.usage["calls"]}

    rows = [{"id": "q1", "query": "How often is the mirror cleaned?",
             "nodes": json.dumps(["The mirror is cleaned every six months.", "The dome opens at dusk."])}]
    out = ray.data.from_items(rows).map(_answer).take_all()
    assert len(out) == 1 and out[0]["id"] == "q1", out
    assert "six months" in out[0]["answer"]
