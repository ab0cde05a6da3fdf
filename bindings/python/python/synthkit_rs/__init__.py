"""synthkit: response synthesis for retrieval-augmented generation, in Rust.

Turns a query and retrieved nodes into an answer with a language model, in one of the
LlamaIndex response modes (``compact``, ``refine``, ``tree_summarize``,
``simple_summarize``, ``accumulate``, ``compact_accumulate``, ``generation``, ``no_text``,
``context_only``, and synthkit's own ``map_reduce``), with exact token budgets and bounded concurrency::

    import synthkit_rs

    synth = synthkit_rs.Synthesizer("compact")          # offline extractive backend
    r = synth.synthesize("How often is the mirror cleaned?",
                         ["The mirror is cleaned every six months."])
    print(r.response, r.usage["calls"])

With ``base_url="http://127.0.0.1:8080/v1"`` an OpenAI-compatible server answers.
``llama_index.response_synthesizers.synthkit.SynthkitSynthesizer`` plugs it into LlamaIndex query engines.
``synthkit_rs.evaluate(cases, answers, synthesizers=...)`` scores answers without a judge, as
``synthkit eval`` does (``await synthkit_rs.aevaluate(...)`` from a coroutine).
``synthkit_rs.ray.build_processor(config, preprocess=..., postprocess=...)`` runs it on Ray
Data, in the shape of Ray's LLM processors (the ``[ray]`` extra; this module never imports
Ray).
"""

from __future__ import annotations

from synthkit_rs._synthkit import (
    MODES,
    BatchFiles,
    EvalResult,
    FailedRequest,
    InputError,
    ModelError,
    Pending,
    RefusalError,
    Response,
    ResponseStream,
    SourceNode,
    SynthkitError,
    Synthesizer,
    TruncationWarning,
    __version__,
    aevaluate,
    evaluate,
)

__all__ = [
    "MODES",
    "BatchFiles",
    "EvalResult",
    "FailedRequest",
    "InputError",
    "ModelError",
    "Pending",
    "RefusalError",
    "Response",
    "ResponseStream",
    "SourceNode",
    "SynthkitError",
    "Synthesizer",
    "TruncationWarning",
    "__version__",
    "aevaluate",
    "evaluate",
]
