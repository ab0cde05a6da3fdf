"""synthkit as a LlamaIndex response synthesizer.

``SynthkitSynthesizer`` is a ``BaseSynthesizer``: pass it wherever LlamaIndex takes a
response synthesizer::

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    synth = SynthkitSynthesizer(llm=llm, response_mode="compact")  # no llm: offline
    engine = index.as_query_engine(llm=synth.llm, response_synthesizer=synth)

Installed by the ``llama-index-response-synthesizers-synthkit`` distribution, beside the
plain API ``synthkit_rs``. Requires ``llama-index-core`` (0.14): the ``[llama-index]`` extra.
"""

try:
    import llama_index.core  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "llama_index.response_synthesizers.synthkit needs llama-index-core 0.14: install the "
        "wheel with its [llama-index] extra (pip install "
        "'llama-index-response-synthesizers-synthkit[llama-index]'), or use the plain API, "
        "`import synthkit_rs`, which needs nothing else"
    ) from e

from llama_index.response_synthesizers.synthkit.base import SynthkitSynthesizer

__all__ = ["SynthkitSynthesizer"]
