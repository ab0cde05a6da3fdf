#!/usr/bin/env python3
"""Write a tiny random-weight vision pair: a language model and a LLaVA-style projector.

llama.cpp's llama-server loads the pair (`-m LM.gguf --mmproj MMPROJ.gguf`), advertises vision
in /props and /v1/models and accepts images in chat requests. What it says about an image is
nonsense, but everything synthkit's tests look at behaves as with a real vision model: image
parts are decoded and encoded, usage counts them, and POST /v1/chat/completions/input_tokens
and /v1/messages/count_tokens count requests with images exactly.

usage: make_tiny_vision_gguf.py VOCAB.gguf LM_OUT.gguf MMPROJ_OUT.gguf [--ctx 4096] [--seed 7]

The language model is make_tiny_gguf.py's (64-wide embeddings, ChatML, the gpt2 vocabulary of
VOCAB.gguf, about 13 MB). The projector (`clip.projector_type = "mlp"`, as LLaVA-1.5: a
CLIP-style ViT, then mm.0, GELU, mm.2) is about 100 KB: 64x64-pixel input, 16x16 patches, a
32-wide 2-block encoder and a 32 -> 64 -> 64 projection, so its output width is the language
model's embedding width (llama-server refuses a pair where they differ).

Token cost: every image, whatever its pixel size, is resized to 64x64 and costs
(64 / 16)^2 = 16 prompt tokens; the projector adds no image start/end tokens.

Needs the PyPI packages gguf and numpy.
"""
import argparse
import os
import sys

import numpy as np
from gguf import GGUFWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_gguf  # noqa: E402  (beside this script)

IMAGE_SIZE, PATCH_SIZE = 64, 16
# The vision encoder: width, heads, feed-forward width, blocks.
V_EMBED, V_HEADS, V_FEED_FORWARD, V_LAYERS = 32, 2, 64, 2
# The projector's hidden width; its output width is the language model's embedding width.
PROJ_HIDDEN = 64
TOKENS_PER_IMAGE = (IMAGE_SIZE // PATCH_SIZE) ** 2


def write_projector(out_path, seed):
    n_embd_text = make_tiny_gguf.EMBED
    n_patches = TOKENS_PER_IMAGE

    out = GGUFWriter(out_path, "clip")
    out.add_name("tiny-random-llava-projector")
    out.add_file_type(1)  # mostly f16
    out.add_bool("clip.has_vision_encoder", True)
    out.add_bool("clip.has_text_encoder", False)
    out.add_bool("clip.use_gelu", True)
    out.add_string("clip.projector_type", "mlp")
    out.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    out.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    out.add_uint32("clip.vision.embedding_length", V_EMBED)
    out.add_uint32("clip.vision.feed_forward_length", V_FEED_FORWARD)
    out.add_uint32("clip.vision.block_count", V_LAYERS)
    out.add_uint32("clip.vision.attention.head_count", V_HEADS)
    out.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    out.add_uint32("clip.vision.projection_dim", n_embd_text)
    out.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    out.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])

    rng = np.random.default_rng(seed)

    # numpy shapes are GGUF's dimensions reversed: a linear layer is (out, in).
    def random(name, *shape):
        out.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float16))

    def const(name, width, value):
        out.add_tensor(name, np.full(width, value, dtype=np.float32))

    random("v.patch_embd.weight", V_EMBED, 3, PATCH_SIZE, PATCH_SIZE)
    out.add_tensor(
        "v.position_embd.weight",
        (rng.standard_normal((n_patches, V_EMBED)) * 0.02).astype(np.float32),
    )
    for layer in range(V_LAYERS):
        block = f"v.blk.{layer}"
        for norm in ("ln1", "ln2"):
            const(f"{block}.{norm}.weight", V_EMBED, 1.0)
            const(f"{block}.{norm}.bias", V_EMBED, 0.0)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            random(f"{block}.{proj}.weight", V_EMBED, V_EMBED)
            const(f"{block}.{proj}.bias", V_EMBED, 0.0)
        random(f"{block}.ffn_up.weight", V_FEED_FORWARD, V_EMBED)
        const(f"{block}.ffn_up.bias", V_FEED_FORWARD, 0.0)
        random(f"{block}.ffn_down.weight", V_EMBED, V_FEED_FORWARD)
        const(f"{block}.ffn_down.bias", V_EMBED, 0.0)
    random("mm.0.weight", PROJ_HIDDEN, V_EMBED)
    const("mm.0.bias", PROJ_HIDDEN, 0.0)
    random("mm.2.weight", n_embd_text, PROJ_HIDDEN)
    const("mm.2.bias", n_embd_text, 0.0)

    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vocab", help="a vocabulary-only GGUF with a gpt2 BPE tokenizer")
    parser.add_argument("lm_out", help="where to write the language model")
    parser.add_argument("mmproj_out", help="where to write the projector")
    parser.add_argument("--ctx", type=int, default=4096, help="the trained context length")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    n_vocab = make_tiny_gguf.write_model(args.vocab, args.lm_out, args.ctx, args.seed)
    write_projector(args.mmproj_out, args.seed + 1)
    print(
        f"wrote {args.lm_out}: vocab {n_vocab}, embd {make_tiny_gguf.EMBED}; "
        f"{args.mmproj_out}: image {IMAGE_SIZE}/{PATCH_SIZE}, {TOKENS_PER_IMAGE} tokens an image"
    )


if __name__ == "__main__":
    main()
