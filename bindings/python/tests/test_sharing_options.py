"""The constructor's rpm=, tpm=, redis_url=, redis_prefix=, cache= and cache_ttl=: what is
refused, and the caches that need no Redis (memory, an SQLite file)."""

from __future__ import annotations

import pathlib

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI

NODES = ["The primary mirror is cleaned every six months."]


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(rpm=0), "rpm must be at least 1"),
        (dict(tpm=-5), "tpm must be at least 1"),
        (dict(tpm=2**40), "tpm must be at most"),
        (dict(cache="redis"), "needs redis_url"),
        (dict(redis_url="redis://127.0.0.1:6379/"), "give one of them"),
        (dict(redis_prefix="x"), "redis_prefix applies with redis_url only"),
        (dict(tpm=100, redis_url="redis://127.0.0.1:6379/", redis_prefix=""), "must not be empty"),
        (dict(cache="memory", cache_ttl=60), "cache_ttl applies to cache=\"redis\" only"),
        (dict(cache=""), "got an empty string"),
        (dict(cache=3), "cache must be None"),
        (dict(tpm=100, redis_url="redis://127.0.0.1:6379/", cache="redis", cache_ttl=0.5),
         "cache_ttl must be at least 1 second"),
    ],
)
def test_bad_options_are_input_errors(kwargs: dict, words: str) -> None:
    with pytest.raises(synthkit_rs.InputError, match=words):
        synthkit_rs.Synthesizer(**kwargs)


def test_the_memory_cache_answers_a_repeated_request(fake_server: FakeOpenAI) -> None:
    synth = synthkit_rs.Synthesizer(base_url=fake_server.base_url, cache="memory", rpm=1000)
    assert 'budget="local", cache="memory"' in repr(synth)
    a = synth.synthesize("How often is the mirror cleaned?", NODES)
    b = synth.synthesize("How often is the mirror cleaned?", NODES)
    assert fake_server.calls == 1
    assert a.response == b.response


def test_an_sqlite_cache_outlives_its_synthesizer(
    fake_server: FakeOpenAI, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "replies.db"
    first = synthkit_rs.Synthesizer(base_url=fake_server.base_url, cache=path)
    first.synthesize("How often is the mirror cleaned?", NODES)
    del first
    second = synthkit_rs.Synthesizer(base_url=fake_server.base_url, cache=str(path))
    assert 'cache="sqlite"' in repr(second)
    second.synthesize("How often is the mirror cleaned?", NODES)
    assert fake_server.calls == 1


def test_a_cache_file_that_cannot_be_opened_is_named(tmp_path: pathlib.Path) -> None:
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("not a database " * 100)
    with pytest.raises(synthkit_rs.SynthkitError, match="notes.txt"):
        synthkit_rs.Synthesizer(cache=not_a_db)
