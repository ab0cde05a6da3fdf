#!/usr/bin/env python3
"""Write a tiny llama-architecture GGUF model with random weights.

llama.cpp's llama-server loads it and serves the OpenAI-compatible API with it. The text it
generates is nonsense, but everything synthkit's tests look at behaves as with a real model:
usage counts, streaming, JSON-schema constrained output, context-size errors, /tokenize.

usage: make_tiny_gguf.py VOCAB.gguf OUT.gguf [--ctx 4096] [--seed 7]

VOCAB.gguf is a vocabulary-only GGUF with a BPE ("gpt2") tokenizer, such as
models/ggml-vocab-gpt-2.gguf in the llama.cpp sources. Needs the PyPI packages gguf and numpy.
The model has 2 layers, 4 heads and 64-wide embeddings (about 6.5 M parameters, 13 MB in
f16, nearly all of it the embedding and output matrices) and a ChatML chat template.
"""
import argparse

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

# ChatML, so /chat/completions works without a template on the command line.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

EMBED, HEADS, LAYERS, FEED_FORWARD = 64, 4, 2, 128


def read_field(reader, key):
    """A metadata value of the vocabulary file as a Python value."""
    field = reader.fields[key]
    kind = field.types[0]
    if kind == GGUFValueType.ARRAY:
        if field.types[1] == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return [int(field.parts[i][0]) for i in field.data]
    if kind == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]][0].item()


def write_model(vocab_path, out_path, ctx, seed):
    """Write the model to out_path; returns the vocabulary size.

    make_tiny_vision_gguf.py writes its language model with this too."""
    vocab = GGUFReader(vocab_path)
    tokens = read_field(vocab, "tokenizer.ggml.tokens")
    n_vocab = len(tokens)

    out = GGUFWriter(out_path, "llama")
    out.add_name("tiny-random-llama")
    out.add_context_length(ctx)
    out.add_embedding_length(EMBED)
    out.add_block_count(LAYERS)
    out.add_feed_forward_length(FEED_FORWARD)
    out.add_rope_dimension_count(EMBED // HEADS)
    out.add_head_count(HEADS)
    out.add_head_count_kv(HEADS)
    out.add_layer_norm_rms_eps(1e-5)
    out.add_file_type(1)  # mostly f16
    # The tokenizer, copied from the vocabulary file.
    out.add_tokenizer_model("gpt2")
    out.add_tokenizer_pre(read_field(vocab, "tokenizer.ggml.pre"))
    out.add_token_list(tokens)
    out.add_token_types(read_field(vocab, "tokenizer.ggml.token_type"))
    out.add_token_merges(read_field(vocab, "tokenizer.ggml.merges"))
    out.add_bos_token_id(read_field(vocab, "tokenizer.ggml.bos_token_id"))
    out.add_eos_token_id(read_field(vocab, "tokenizer.ggml.eos_token_id"))
    out.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(seed)

    def random(name, *shape):
        out.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float16))

    def ones(name):
        out.add_tensor(name, np.ones(EMBED, dtype=np.float32))

    random("token_embd.weight", n_vocab, EMBED)
    ones("output_norm.weight")
    random("output.weight", n_vocab, EMBED)
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        ones(f"{block}.attn_norm.weight")
        ones(f"{block}.ffn_norm.weight")
        for proj in ("attn_q", "attn_k", "attn_v", "attn_output"):
            random(f"{block}.{proj}.weight", EMBED, EMBED)
        random(f"{block}.ffn_gate.weight", FEED_FORWARD, EMBED)
        random(f"{block}.ffn_up.weight", FEED_FORWARD, EMBED)
        random(f"{block}.ffn_down.weight", EMBED, FEED_FORWARD)

    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()
    return n_vocab


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vocab", help="a vocabulary-only GGUF with a gpt2 BPE tokenizer")
    parser.add_argument("out", help="where to write the model")
    parser.add_argument("--ctx", type=int, default=4096, help="the trained context length")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    n_vocab = write_model(args.vocab, args.out, args.ctx, args.seed)
    print(f"wrote {args.out}: vocab {n_vocab}, embd {EMBED}, layers {LAYERS}, ctx {args.ctx}")


if __name__ == "__main__":
    main()
