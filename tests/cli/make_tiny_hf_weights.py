#!/usr/bin/env python3
"""Writes MODEL_DIR/model.safetensors for the Llama-style config.json in MODEL_DIR: every tensor
the kvaudit loader reads (runners/model/formats/load_weights.h), F32, with the shape the config
implies and small deterministic values. For CLI tests that need a model whose header and tensor
table `kvaudit plan` accepts (tests/cli/*.sh); standard library only.

Usage: make_tiny_hf_weights.py MODEL_DIR
"""
import json
import os
import struct
import sys


def tensors(c):
    hidden = c["hidden_size"]
    heads = c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads", heads)
    head_dim = c.get("head_dim", hidden // heads)
    inter = c["intermediate_size"]
    vocab = c["vocab_size"]
    out = [("model.embed_tokens.weight", [vocab, hidden])]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", [hidden]),
                (p + "self_attn.q_proj.weight", [heads * head_dim, hidden]),
                (p + "self_attn.k_proj.weight", [kv_heads * head_dim, hidden]),
                (p + "self_attn.v_proj.weight", [kv_heads * head_dim, hidden]),
                (p + "self_attn.o_proj.weight", [hidden, heads * head_dim]),
                (p + "post_attention_layernorm.weight", [hidden]),
                (p + "mlp.gate_proj.weight", [inter, hidden]),
                (p + "mlp.up_proj.weight", [inter, hidden]),
                (p + "mlp.down_proj.weight", [hidden, inter])]
    out.append(("model.norm.weight", [hidden]))
    if not c.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [vocab, hidden]))
    return out


def main():
    model_dir = sys.argv[1]
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    header, blobs, offset = {}, [], 0
    for n, (name, shape) in enumerate(tensors(config)):
        count = 1
        for d in shape:
            count *= d
        values = [((k * 7 + n * 13) % 17 - 8) / 256.0 for k in range(count)]
        blob = struct.pack(f"<{count}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(model_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


if __name__ == "__main__":
    main()
