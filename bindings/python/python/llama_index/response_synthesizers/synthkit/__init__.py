"""synthkit as a LlamaIndex response synthesizer.

``SynthkitSynthesizer`` is a ``BaseSynthesizer``: pass it wherever LlamaIndex takes a
response synthesizer::

    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    synth = SynthkitSynthesizer(llm=llm, response_mode="compact")
    engine = index.as_query_engine(llm=llm, response_synthesizer=synth)

Installed by the ``llama-index-response-synthesizers-synthkit`` distribution, beside the
plain API ``synthkit_rs``. Requires ``llama-index-core`` (0.14): the ``[llama-index]`` extra.
"""

from llama_index.response_synthesizers.synthkit.base import SynthkitSynthesizer

__all__ = ["SynthkitSynthesizer"]
