"""synthkit on Ray Data, in the shape of Ray's LLM processors (``ray.data.llm``)::

    import ray
    from synthkit_rs.ray import SynthkitProcessorConfig, build_processor

    config = SynthkitProcessorConfig(mode="compact", batch_size=16, concurrency=(1, 2),
                                     should_continue_on_error=True)
    processor = build_processor(
        config,
        preprocess=lambda row: {"id": row["qid"], "query": row["question"], "nodes": row["passages"]},
        postprocess=lambda row: {"qid": row["qid"], "answer": row["response"]["text"]},
    )
    answers = processor(ray.data.read_parquet("questions.parquet"))

``preprocess`` maps a row to a request in the shape of a ``synthkit batch`` line (``query``,
``nodes``, ``mode``, ``templates``, ``citations``, ``plan``, ..., and an optional ``id``);
without it the row is the request. ``postprocess`` gets the row with its own columns and
``id``, ``response`` (the response as ``synthkit batch`` writes it: ``text``,
``source_nodes``, ``usage``, ...) and ``plan`` (the plan of a ``"plan": true`` request, which
calls no model; ``response`` is then ``None``). A request may name files and folders to
read instead of ``nodes`` (``paths``, and ``top_k``, as a ``synthkit batch`` line does) when
the config's ``paths_root`` says the folder they are read under: each actor reads them with
``synthkit batch``'s reader and rules (confined to the root unless
``allow_paths_outside=True``, at most 10,000 files and 64 MiB a request, chunks of
``chunk_size`` tokens ranked for the query). Each actor builds one
``synthkit_rs.Synthesizer`` from the config and answers its batches with
``synthesize_many``, sending a request that failed for a transient cause again up to
``retries`` times.

A request that fails raises (Ray's ``should_continue_on_error=False``), or, with
``should_continue_on_error=True``, becomes an error row that skips ``postprocess``: its own
columns, ``id``, ``error`` (``{"kind", "message", "transient"?}``, ``synthkit batch``'s error
object) and Ray's ``__inference_error__`` column (the message; ``""`` on the other rows).

Files with ``synthkit batch``'s rules (ids defaulting to the line number, duplicate ids
refused before any call, error lines, request hashes and the resume of OUT) are
:func:`run_batch`'s, which answers the lines to run with this processor
(``examples/ray_batch.py`` is its command line).

Importing ``synthkit_rs`` never imports Ray; this module needs ``ray[data]`` (the ``[ray]``
extra) once a processor is called.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import synthkit_rs

__all__ = ["SynthkitProcessor", "SynthkitProcessorConfig", "build_processor", "run_batch"]

#: The most in-run retries of a transient failure.
MAX_RETRIES = 10
#: The first wait before a retry (then doubled).
RETRY_BACKOFF_S = 1.0
#: The internal columns: the request going in, the result coming out (JSON text).
_REQUEST = "__synthkit_request"
_RESULT = "__synthkit_result"
#: Ray's error column of its LLM processors.
ERROR_COLUMN = "__inference_error__"

Row = Dict[str, Any]


@dataclasses.dataclass
class SynthkitProcessorConfig:
    """What a :func:`build_processor` processor runs: Ray Data's fields of an LLM processor
    config (``batch_size``, ``concurrency``, ``should_continue_on_error``) and synthkit's.

    Ray's: ``batch_size`` requests per batch (32); ``concurrency`` actors: an int for a
    fixed pool, a ``(min, max)`` tuple for an autoscaling one (1); ``num_cpus`` each actor
    holds (0.5); ``should_continue_on_error`` (``False``: the first failed request raises).

    synthkit's: ``mode`` (the mode of a request that names none), ``base_url`` (an
    OpenAI-compatible server; neither it nor ``synthesizer_options["llm"]``: the offline
    extractive backend), ``api`` (``"anthropic"`` for a Messages API server), ``model``,
    ``context_window``, ``num_output``, ``max_prompt_tokens``, ``temperature``,
    ``citations``, ``rpm`` / ``tpm`` / ``redis_url`` / ``redis_prefix`` / ``cache`` (one rate
    budget and cache for every actor, see docs/batch.md), and ``synthesizer_options``: any
    other keyword argument of ``synthkit_rs.Synthesizer`` (``concurrency``,
    ``api_key_env``, ``timeout``, ...). ``jobs`` syntheses at once in each actor (8) and
    ``retries`` sends again of a request that failed for a transient cause (2, at most 10;
    1 s, then 2 s, ... apart).

    A request's ``paths``, as ``synthkit batch`` reads them: ``paths_root`` (the folder
    they are read under, on every node of the cluster; ``None``: a request with ``paths``
    is an error), ``allow_paths_outside`` (absolute paths, ``..`` and links out of the
    root read too), ``chunk_size`` (tokens, 1024), ``top_k`` (the chunks kept for a
    request that sets none: a number or ``"all"``; ``None``: the 20 best of a folder) and
    ``index_dir`` (where folder indexes are kept; ``None``: none).

    Bad values raise ``synthkit_rs.InputError`` saying what to change.
    """

    mode: str = "compact"
    base_url: Optional[str] = None
    api: str = "openai"
    model: Optional[str] = None
    context_window: Optional[int] = None
    num_output: Optional[int] = None
    max_prompt_tokens: Optional[int] = None
    temperature: Optional[float] = None
    citations: bool = False
    rpm: Optional[int] = None
    tpm: Optional[int] = None
    redis_url: Optional[str] = dataclasses.field(default=None, repr=False)
    redis_prefix: Optional[str] = None
    cache: Optional[str] = None
    synthesizer_options: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)
    jobs: int = 8
    retries: int = 2
    batch_size: int = 32
    concurrency: Union[int, Tuple[int, int]] = 1
    num_cpus: float = 0.5
    should_continue_on_error: bool = False
    paths_root: Optional[str] = None
    allow_paths_outside: bool = False
    chunk_size: int = 1024
    top_k: Optional[Union[int, str]] = None
    index_dir: Optional[str] = None

    def __post_init__(self) -> None:
        def refuse(message: str) -> None:
            raise synthkit_rs.InputError(f"SynthkitProcessorConfig: {message}")

        if self.mode not in synthkit_rs.MODES:
            refuse(f"unknown mode {self.mode!r}: one of {', '.join(synthkit_rs.MODES)}")
        if not _positive_int(self.batch_size):
            refuse(f"batch_size must be a positive int, got {self.batch_size!r}")
        c = self.concurrency
        if isinstance(c, list):
            c = self.concurrency = tuple(c)  # type: ignore[assignment]
        if isinstance(c, tuple):
            if len(c) != 2 or not all(_positive_int(n) for n in c) or c[0] > c[1]:
                refuse(f"concurrency as a tuple is (min, max) actors with 1 <= min <= max, got {c!r}")
        elif not _positive_int(c):
            refuse(f"concurrency must be a positive int or a (min, max) tuple, got {c!r}")
        if not _positive_int(self.jobs) or self.jobs > 4096:
            refuse(f"jobs must be between 1 and 4096, got {self.jobs!r}")
        if not isinstance(self.retries, int) or not 0 <= self.retries <= MAX_RETRIES:
            refuse(f"retries must be between 0 and {MAX_RETRIES}, got {self.retries!r}")
        if not isinstance(self.num_cpus, (int, float)) or self.num_cpus <= 0:
            refuse(f"num_cpus must be above 0, got {self.num_cpus!r}")
        if self.api != "openai" and not self.base_url:
            refuse(f"api={self.api!r} needs base_url (the server's address)")
        if not _positive_int(self.chunk_size):
            refuse(f"chunk_size must be a positive int (tokens), got {self.chunk_size!r}")
        if not (self.top_k is None or _positive_int(self.top_k) or self.top_k == "all"):
            refuse(f"top_k must be a positive int, \"all\" or None, got {self.top_k!r}")
        clash = sorted(set(_SYNTHESIZER_FIELDS) & set(self.synthesizer_options))
        if clash:
            refuse(f"synthesizer_options repeats {', '.join(clash)}: set them as the config's own fields")

    def synthesizer_kwargs(self) -> Dict[str, Any]:
        """The keyword arguments of each actor's ``synthkit_rs.Synthesizer``."""
        kwargs: Dict[str, Any] = {}
        for name in _SYNTHESIZER_FIELDS:
            value = getattr(self, name)
            if value is not None and value is not False and (name, value) != ("api", "openai"):
                kwargs[name] = value
        kwargs.update(self.synthesizer_options)
        return kwargs

    def paths_kwargs(self) -> Dict[str, Any]:
        """The keyword arguments of ``synthesize_many`` that read requests' ``paths``
        (none without ``paths_root``)."""
        if self.paths_root is None:
            return {}
        kwargs: Dict[str, Any] = {"paths_root": os.fspath(self.paths_root),
                                  "allow_paths_outside": self.allow_paths_outside,
                                  "chunk_size": self.chunk_size, "top_k": self.top_k}
        if self.index_dir is not None:
            kwargs["index_dir"] = os.fspath(self.index_dir)
        return kwargs


#: The config's fields that are ``Synthesizer`` arguments of the same name (the other
#: fields are Ray's and the actors'; ``synthesizer_options["concurrency"]`` is the model
#: calls in flight of each actor, not ``concurrency``, the actors).
_SYNTHESIZER_FIELDS = ("mode", "base_url", "api", "model", "context_window", "num_output",
                       "max_prompt_tokens", "temperature", "citations", "rpm", "tpm",
                       "redis_url", "redis_prefix", "cache")


def _positive_int(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def _result(rid: Any, key: str, value: Any) -> str:
    return json.dumps({"id": rid, key: value}, ensure_ascii=False)


def _error(kind: str, message: str, transient: Optional[str] = None) -> Dict[str, Any]:
    error = {"kind": kind, "message": message}
    if transient:
        error["transient"] = transient
    return error


class _SynthkitStage:
    """The ``map_batches`` actor: one ``Synthesizer`` per actor, built once (its HTTP client
    and Redis connection with it), answering each batch's requests with
    ``synthesize_many``. Requests come as JSON text (``{"request", "label"}``) in the
    ``__synthkit_request`` column; results go out as JSON text (``{"id", "response" |
    "plan" | "error"}``) in ``__synthkit_result``. ``plans=False`` (the files of
    :func:`run_batch`, as ``synthkit batch``) makes a ``"plan": true`` request an error."""

    def __init__(self, options: Dict[str, Any], jobs: int, retries: int, plans: bool = True,
                 paths: Optional[Dict[str, Any]] = None) -> None:
        self._synth = synthkit_rs.Synthesizer(**options)
        self._jobs = jobs
        self._retries = retries
        self._plans = plans
        self._paths = dict(paths or {})

    def _answer(self, requests: List[Row]) -> List[Any]:
        results: List[Any] = list(self._synth.synthesize_many(requests, jobs=self._jobs,
                                                              **self._paths))
        for attempt in range(self._retries):
            again = [i for i, r in enumerate(results)
                     if isinstance(r, synthkit_rs.FailedRequest) and r.transient]
            if not again:
                break
            time.sleep(RETRY_BACKOFF_S * (2 ** attempt))
            retried = self._synth.synthesize_many([requests[i] for i in again], jobs=self._jobs,
                                                  **self._paths)
            for i, r in zip(again, retried):
                results[i] = r
        return results

    def _refused(self, request: Row) -> Optional[str]:
        """Why ``request`` is not run, as ``synthkit batch`` says it, or ``None``."""
        if request.get("paths") is not None and not self._paths:
            return ("`paths` names files to read: set the config's paths_root (the folder "
                    "they are read under, as `synthkit batch --paths-root`), or give `nodes`")
        if request.get("plan") is True and not self._plans:
            return ("`plan` asks for a plan, which a batch's lines do not hold: plan the "
                    "file with `synthkit batch --plan`, or a dataset with "
                    "synthkit_rs.ray.build_processor")
        return None

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        items = [json.loads(raw) for raw in batch.column(_REQUEST).to_pylist()]
        lines: List[str] = [""] * len(items)
        runnable: List[int] = []
        for i, item in enumerate(items):
            request = item["request"]
            why = self._refused(request)
            if why is None:
                runnable.append(i)
            else:
                message = _labelled(item["label"], why)
                lines[i] = _result(request.get("id"), "error", _error("invalid_request", message))
        results = self._answer([items[i]["request"] for i in runnable])
        for i, result in zip(runnable, results):
            rid = items[i]["request"].get("id")
            if isinstance(result, synthkit_rs.FailedRequest):
                message = _labelled(items[i]["label"], _unprefixed(result.message))
                error = _error(result.kind, message, result.transient)
                lines[i] = _result(rid, "error", error)
            elif isinstance(result, dict):
                lines[i] = _result(rid, "plan", result)
            else:
                lines[i] = _result(rid, "response", result.to_dict())
        return batch.append_column(_RESULT, pa.array(lines, type=pa.string()))


def _unprefixed(message: str) -> str:
    """``synthesize_many``'s message without its ``requests[i]: `` (the batch's place)."""
    if message.startswith("requests["):
        return message.split("]: ", 1)[-1]
    return message


def _labelled(label: Optional[str], message: str) -> str:
    return f"{label}: {message}" if label else message


class _Preprocess:
    """Ray's preprocess step: the row's columns kept, and the request (``preprocess(row)``,
    else the row) as JSON text in ``__synthkit_request``."""

    def __init__(self, preprocess: Optional[Callable[[Row], Row]]) -> None:
        self._preprocess = preprocess

    def __call__(self, row: Row) -> Row:
        request = self._preprocess(row) if self._preprocess is not None else dict(row)
        if not isinstance(request, dict):
            raise synthkit_rs.InputError(
                f"preprocess must return a dict (a request in a `synthkit batch` line's "
                f"shape), got {type(request).__name__}"
            )
        label = f"id {json.dumps(request['id'])}" if request.get("id") is not None else None
        text = json.dumps({"request": request, "label": label}, ensure_ascii=False,
                          default=_not_json(request))
        return {**row, _REQUEST: text}


def _not_json(request: Row) -> Callable[[Any], Any]:
    def refuse(value: Any) -> Any:
        if hasattr(value, "tolist"):  # a numpy array or scalar from Ray's blocks
            return value.tolist()
        raise synthkit_rs.InputError(
            f"request {request.get('id')!r}: a {type(value).__name__} cannot be sent: "
            "give a request of strings, numbers, lists and dicts (nodes as strings or dicts)"
        )
    return refuse


class _Postprocess:
    """Ray's postprocess step: an answered row through ``postprocess``; a failed one raises,
    or with ``should_continue_on_error`` becomes an error row that skips it."""

    def __init__(self, postprocess: Optional[Callable[[Row], Row]], continue_on_error: bool) -> None:
        self._postprocess = postprocess
        self._continue = continue_on_error

    def __call__(self, row: Row) -> Row:
        result = json.loads(row[_RESULT])
        own = {k: v for k, v in row.items() if k not in (_REQUEST, _RESULT)}
        error = result.get("error")
        if error is not None:
            if not self._continue:
                raise synthkit_rs.SynthkitError(
                    f"a request failed ({error['kind']}): {error['message']} (set "
                    "should_continue_on_error=True to keep going with error rows)"
                )
            return {**own, "id": result["id"], "response": None, "plan": None,
                    "error": error, ERROR_COLUMN: error["message"]}
        out = {**own, "id": result["id"], "response": result.get("response"),
               "plan": result.get("plan")}
        if self._postprocess is not None:
            out = self._postprocess(out)
            if not isinstance(out, dict):
                raise synthkit_rs.InputError(
                    f"postprocess must return a dict (a row), got {type(out).__name__}"
                )
        elif self._continue:
            out["error"] = None
        if self._continue:
            out[ERROR_COLUMN] = ""
        return out


class SynthkitProcessor:
    """A processor of :func:`build_processor`: ``processor(dataset)`` returns the dataset
    of answered rows (lazily, as Ray Data does: nothing runs until it is read)."""

    def __init__(self, config: SynthkitProcessorConfig, preprocess: Optional[Callable[[Row], Row]],
                 postprocess: Optional[Callable[[Row], Row]],
                 map_kwargs: Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]) -> None:
        if not isinstance(config, SynthkitProcessorConfig):
            raise synthkit_rs.InputError(
                f"build_processor takes a SynthkitProcessorConfig, got {type(config).__name__}"
            )
        self.config = config
        self.preprocess = preprocess
        self.postprocess = postprocess
        self.preprocess_map_kwargs = dict(map_kwargs[0] or {})
        self.postprocess_map_kwargs = dict(map_kwargs[1] or {})
        # Built once here, so that a bad option (or a paths_root that is no folder) is
        # refused before Ray starts an actor (on the driver: a cache file or a Redis
        # connection is opened there too).
        synth = synthkit_rs.Synthesizer(**config.synthesizer_kwargs())
        synth.synthesize_many([], **config.paths_kwargs())

    def __call__(self, dataset: Any) -> Any:
        dataset = dataset.map(_Preprocess(self.preprocess), **self.preprocess_map_kwargs)
        dataset = self._stage(dataset, plans=True)
        return dataset.map(
            _Postprocess(self.postprocess, self.config.should_continue_on_error),
            **self.postprocess_map_kwargs,
        )

    def _stage(self, dataset: Any, plans: bool) -> Any:
        from ray.data import ActorPoolStrategy

        config = self.config
        if isinstance(config.concurrency, tuple):
            pool = ActorPoolStrategy(min_size=config.concurrency[0], max_size=config.concurrency[1])
        else:
            pool = ActorPoolStrategy(size=config.concurrency)
        return dataset.map_batches(
            _SynthkitStage,
            fn_constructor_kwargs={"options": config.synthesizer_kwargs(), "jobs": config.jobs,
                                   "retries": config.retries, "plans": plans,
                                   "paths": config.paths_kwargs()},
            batch_size=config.batch_size,
            compute=pool,
            num_cpus=config.num_cpus,
            batch_format="pyarrow",
        )


def build_processor(
    config: SynthkitProcessorConfig,
    preprocess: Optional[Callable[[Row], Row]] = None,
    postprocess: Optional[Callable[[Row], Row]] = None,
    preprocess_map_kwargs: Optional[Dict[str, Any]] = None,
    postprocess_map_kwargs: Optional[Dict[str, Any]] = None,
) -> SynthkitProcessor:
    """A processor in the shape of ``ray.data.llm.build_processor``: ``preprocess`` maps a
    row to a request (a ``synthkit batch`` line's shape), ``postprocess`` maps the answered
    row (its columns, ``id``, ``response``, ``plan``) to the output row; the map kwargs go
    to those two steps' ``Dataset.map``."""
    return SynthkitProcessor(config, preprocess, postprocess,
                             (preprocess_map_kwargs, postprocess_map_kwargs))


def _pending_path(output: str) -> str:
    folder, name = os.path.split(os.path.abspath(output))
    return os.path.join(folder, f".{name}.ray-pending.jsonl")


def _line_request(row: Row) -> Row:
    """A pending line of :func:`run_batch` (``{"number", "id", "request_sha256",
    "request"}``, JSON text) as the stage's request, labelled ``line N``."""
    item = json.loads(row["text"])
    request = {**item["request"], "id": item["id"]}
    return {"sha": item["request_sha256"],
            _REQUEST: json.dumps({"request": request, "label": f"line {item['number']}"},
                                 ensure_ascii=False)}


def run_batch(
    input: str,
    output: str,
    config: SynthkitProcessorConfig,
    *,
    retry_failed: bool = True,
    start_ray: Optional[Callable[[], Any]] = None,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> Dict[str, Any]:
    """Runs (or resumes) a ``synthkit batch`` file on Ray: ``input`` and ``output`` are read
    and written by the library's own code (``synthkit_rs.BatchFiles``): ids (a line's ``id``,
    else its line number), two lines with one id refused before any call
    (``synthkit_rs.InputError``), bad lines as error lines, request hashes, and the resume
    (``output`` appended to; a line answered, or a permanent error line, with the same hash
    kept; a transient error line run again unless ``retry_failed=False``; a cut last line
    removed; one line per id at the end). The lines to run go to a file beside ``output``
    (``.OUT.ray-pending.jsonl``, removed at the end) that Ray Data reads, and are answered by
    the processor's stage (``config``'s actors, batches and retries). A ``"plan": true``
    line is an error line, as in ``synthkit batch`` (which plans a file with ``--plan``).
    A ``paths`` line is read under ``config.paths_root``, by default ``input``'s folder (as
    ``synthkit batch --paths-root``). A line that fails is an error line whatever
    ``should_continue_on_error`` says (a batch goes on). ``start_ray`` is called once before
    Ray Data runs, only when there are lines
    to run (``lambda: ray.init(...)``; without it Ray Data starts a local Ray unless one
    was started). ``log`` takes the resume's and the summary's lines (standard error).

    Returns ``{"lines", "answered", "failed", "kept", "errors", "seconds",
    "lines_per_second"}``; ``errors`` counts the error lines ``output`` holds at the end."""
    import ray.data

    start = time.monotonic()
    if config.paths_root is None:
        config = dataclasses.replace(config,
                                     paths_root=os.path.dirname(os.path.abspath(input)))
    files = synthkit_rs.BatchFiles(input, output, mode=config.mode,
                                   max_prompt_tokens=config.max_prompt_tokens,
                                   retry_failed=retry_failed)
    survey = files.survey
    if survey["cut_bytes"]:
        log(f"ray_batch: the output's last line was cut ({survey['cut_bytes']} bytes): "
            "rewriting it")
    if survey["kept"] or survey["retry"] or survey["changed"]:
        retry = sum(survey["retry"].values())
        log(f"ray_batch: resuming {output}: {survey['kept']} results kept, {retry} failed "
            f"lines to retry, {survey['changed']} changed, {survey['new']} new")
    counts = {"lines": 0, "answered": 0, "failed": 0, "kept": survey["kept"]}
    pending = _pending_path(output)
    to_run = 0
    with open(pending, "w", encoding="utf-8") as todo:
        for item in files.pending():
            if "error" in item:
                files.append(json.dumps({"id": item["id"], "request_sha256": item["request_sha256"],
                                         "error": item["error"]}, ensure_ascii=False))
                counts["lines"] += 1
                counts["failed"] += 1
            else:
                todo.write(json.dumps(item, ensure_ascii=False) + "\n")
                to_run += 1
    try:
        if to_run:
            if start_ray is not None:
                start_ray()
            stage = SynthkitProcessor(config, None, None, (None, None))._stage(
                ray.data.read_text(pending).map(_line_request), plans=False)
            for batch in stage.iter_batches(batch_format="pyarrow", batch_size=None):
                for sha, text in zip(batch.column("sha").to_pylist(),
                                     batch.column(_RESULT).to_pylist()):
                    result = json.loads(text)
                    key = "response" if "response" in result else "error"
                    files.append(json.dumps({"id": result["id"], "request_sha256": sha,
                                             key: result[key]}, ensure_ascii=False))
                    counts["lines"] += 1
                    counts["answered" if key == "response" else "failed"] += 1
        held = files.finish()
    finally:
        if os.path.exists(pending):
            os.remove(pending)
    seconds = time.monotonic() - start
    errors = sum(held["errors"].values())
    summary = {**counts, "errors": errors, "seconds": seconds,
               "lines_per_second": counts["lines"] / seconds if seconds else 0.0}
    log("ray_batch: {lines} lines: {answered} answered, {failed} failed, {kept} already in "
        "OUT; {seconds:.1f} s, {lines_per_second:.1f} lines/s".format(**summary))
    if errors:
        log(f"ray_batch: {errors} error lines in {output}: run the same command again to "
            "retry those that failed for a transient cause; fix the input for the others")
    return summary
