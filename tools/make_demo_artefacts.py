#!/usr/bin/env python3
"""Synthetic method artefacts shaped for a model, so that manifests/every-method.toml can run the
artefact methods (qfilter, expected_attention_stats, duo_attention variant `pattern`, headkv,
fastkvzip, lukv, kvzap) end to end on SmolLM2-135M-Instruct. The values are seeded random numbers with the
right shapes and ranges: they exercise the code paths (reading, checking, hashing, scoring) and say NOTHING about
how well these methods work. Real artefacts come from the methods' authors or their training code
(docs/METHODS.md says where, per method).

Writes into --out (default results/every-method-artefacts):
  qfilter.safetensors          q_filters [layers, kv_heads, head_dim] F32
  ea_stats.safetensors         query_mean [layers, heads, head_dim], query_cov [layers, heads, d, d] F32
                               (cov = A·Aᵀ/d + 0.1·I: symmetric positive definite)
  duo_pattern.tsv              one row per layer, one value in [0, 1] per KV head
  head_scores.json             {"<layer>-<head>": score in [0, 1)} for every layer and query head
  fastkvzip_gates.safetensors  per layer i: i.q_proj.weight [kv_heads*G*16, hidden], i.q_proj.bias,
                               i.k_proj.weight [kv_heads*16, hidden], i.q_norm.weight [16],
                               i.k_norm.weight [16], i.k_base [kv_heads, 1, 16, 16], i.b [kv_heads, 1, G]
                               (G = heads / kv_heads; kvpress FastKVzipGate's state_dict names) F32
  lukv_curve.npy               LU-KV budget curve [99, layers, kv_heads] <f4: row t holds prune ratios whose
                               mean is (t+1)/100, spread ±0.1 at random over layers and KV heads
  kvzap_mlp.safetensors        KVzap mlp surrogate per layer i: layers.i.0.weight [32, hidden], layers.i.0.bias [32],
                               layers.i.2.weight [kv_heads, 32], layers.i.2.bias [kv_heads] (kvpress KVzapModel's
                               state_dict names) F32; drawn after the files above, which stay as they were
  restorekv/                   RestoreKV: restore_embeddings.safetensors (restore_embeddings [8, hidden] F32) and
                               a PEFT LoRA adapter (adapter_config.json: r 8, lora_alpha 16, all seven
                               projections; adapter_model.safetensors: base_model.model.model.layers.i.
                               {self_attn.{q,k,v,o},mlp.{gate,up,down}}_proj.lora_{A,B}.weight, peft's names) F32;
                               drawn after kvzap's, so the files above stay as they were
  README.txt                   says that these are synthetic
Standard library only (no numpy): `python3 tools/make_demo_artefacts.py [--out DIR] [--layers 30
--heads 9 --kv-heads 3 --head-dim 64 --seed 7]`; the defaults are SmolLM2-135M's shape.
"""

import argparse
import json
import random
import struct
from pathlib import Path


def write_safetensors(path: Path, tensors: dict) -> None:
    """tensors: name -> (shape, flat list of floats); F32 little-endian, in insertion order."""
    header, blobs, offset = {}, [], 0
    for name, (shape, values) in tensors.items():
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # align the data to 8 bytes
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" /
                        "every-method-artefacts")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--kv-heads", type=int, default=3)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hidden", type=int, default=576, help="hidden size (fastkvzip gates' input)")
    parser.add_argument("--intermediate", type=int, default=1536, help="MLP size (restorekv adapter)")
    a = parser.parse_args()
    if min(a.layers, a.heads, a.kv_heads, a.head_dim) < 1 or a.heads % a.kv_heads:
        parser.error("layers, heads, kv-heads, head-dim must be positive and heads a multiple of kv-heads")
    rng = random.Random(a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    d = a.head_dim

    filters = [rng.gauss(0, 1) for _ in range(a.layers * a.kv_heads * d)]
    write_safetensors(a.out / "qfilter.safetensors", {"q_filters": ((a.layers, a.kv_heads, d), filters)})

    mean, cov = [], []
    for _ in range(a.layers * a.heads):
        mean += [rng.gauss(0, 0.5) for _ in range(d)]
        m = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(d)]
        for i in range(d):
            for j in range(d):
                cov.append(sum(m[i][k] * m[j][k] for k in range(d)) / d + (0.1 if i == j else 0.0))
    write_safetensors(a.out / "ea_stats.safetensors",
                      {"query_mean": ((a.layers, a.heads, d), mean),
                       "query_cov": ((a.layers, a.heads, d, d), cov)})

    rows = ["\t".join(f"{rng.random():.6f}" for _ in range(a.kv_heads)) for _ in range(a.layers)]
    (a.out / "duo_pattern.tsv").write_text("\n".join(rows) + "\n")

    scores = {f"{layer}-{head}": round(rng.random(), 6) for layer in range(a.layers) for head in range(a.heads)}
    (a.out / "head_scores.json").write_text(json.dumps(scores) + "\n")

    gates, out_dim, sinks, groups = {}, 16, 16, a.heads // a.kv_heads
    for layer in range(a.layers):
        q_rows, k_rows = a.kv_heads * groups * out_dim, a.kv_heads * out_dim
        gates[f"{layer}.q_proj.weight"] = ((q_rows, a.hidden),
                                           [rng.gauss(0, a.hidden ** -0.5) for _ in range(q_rows * a.hidden)])
        gates[f"{layer}.q_proj.bias"] = ((q_rows,), [rng.gauss(0, 0.1) for _ in range(q_rows)])
        gates[f"{layer}.k_proj.weight"] = ((k_rows, a.hidden),
                                           [rng.gauss(0, a.hidden ** -0.5) for _ in range(k_rows * a.hidden)])
        gates[f"{layer}.q_norm.weight"] = ((out_dim,), [1 + rng.gauss(0, 0.1) for _ in range(out_dim)])
        gates[f"{layer}.k_norm.weight"] = ((out_dim,), [1 + rng.gauss(0, 0.1) for _ in range(out_dim)])
        gates[f"{layer}.k_base"] = ((a.kv_heads, 1, sinks, out_dim),
                                    [rng.gauss(0, 1) for _ in range(a.kv_heads * sinks * out_dim)])
        gates[f"{layer}.b"] = ((a.kv_heads, 1, groups), [rng.gauss(0, 0.5) for _ in range(a.kv_heads * groups)])
    write_safetensors(a.out / "fastkvzip_gates.safetensors", gates)

    # LU-KV curve: NumPy format 1.0, little-endian float32, C order (written by hand: no numpy here).
    curve = []
    for t in range(99):
        target = (t + 1) / 100
        spread = [rng.uniform(-0.1, 0.1) for _ in range(a.layers * a.kv_heads)]
        shift = sum(spread) / len(spread)
        curve += [min(1.0, max(0.0, target + x - shift)) for x in spread]
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (99, %d, %d), }" % (a.layers, a.kv_heads)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    (a.out / "lukv_curve.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
                                           + struct.pack(f"<{len(curve)}f", *curve))

    kvzap, kvzap_hidden = {}, 32
    for layer in range(a.layers):
        kvzap[f"layers.{layer}.0.weight"] = ((kvzap_hidden, a.hidden),
                                             [rng.gauss(0, a.hidden ** -0.5) for _ in range(kvzap_hidden * a.hidden)])
        kvzap[f"layers.{layer}.0.bias"] = ((kvzap_hidden,), [rng.gauss(0, 0.1) for _ in range(kvzap_hidden)])
        kvzap[f"layers.{layer}.2.weight"] = ((a.kv_heads, kvzap_hidden),
                                             [rng.gauss(0, kvzap_hidden ** -0.5)
                                              for _ in range(a.kv_heads * kvzap_hidden)])
        kvzap[f"layers.{layer}.2.bias"] = ((a.kv_heads,), [rng.gauss(0, 0.1) for _ in range(a.kv_heads)])
    write_safetensors(a.out / "kvzap_mlp.safetensors", kvzap)

    # RestoreKV: 8 restore embeddings at the scale of token embeddings, and a rank-8 LoRA on every
    # projection whose B is not zero (peft's init_lora_weights=False draws both).
    restore = a.out / "restorekv"
    restore.mkdir(exist_ok=True)
    n_restore, rank, alpha = 8, 8, 16
    write_safetensors(restore / "restore_embeddings.safetensors",
                      {"restore_embeddings": ((n_restore, a.hidden),
                                              [rng.gauss(0, 0.02) for _ in range(n_restore * a.hidden)])})
    q_width, kv_width = a.heads * d, a.kv_heads * d
    shapes = {"self_attn.q_proj": (a.hidden, q_width), "self_attn.k_proj": (a.hidden, kv_width),
              "self_attn.v_proj": (a.hidden, kv_width), "self_attn.o_proj": (q_width, a.hidden),
              "mlp.gate_proj": (a.hidden, a.intermediate), "mlp.up_proj": (a.hidden, a.intermediate),
              "mlp.down_proj": (a.intermediate, a.hidden)}
    lora = {}
    for layer in range(a.layers):
        for module, (fan_in, fan_out) in shapes.items():
            prefix = f"base_model.model.model.layers.{layer}.{module}"
            lora[prefix + ".lora_A.weight"] = ((rank, fan_in),
                                               [rng.gauss(0, fan_in ** -0.5) for _ in range(rank * fan_in)])
            lora[prefix + ".lora_B.weight"] = ((fan_out, rank),
                                               [rng.gauss(0, 0.01) for _ in range(fan_out * rank)])
    write_safetensors(restore / "adapter_model.safetensors", lora)
    (restore / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": rank, "lora_alpha": alpha, "use_rslora": False,
        "target_modules": sorted(m.split(".")[1] for m in shapes), "bias": "none",
        "fan_in_fan_out": False, "lora_dropout": 0.0, "init_lora_weights": False,
        "base_model_name_or_path": "SYNTHETIC (tools/make_demo_artefacts.py)"}, indent=2) + "\n")

    (a.out / "README.txt").write_text(
        "SYNTHETIC artefacts made by tools/make_demo_artefacts.py (seed %d, %d layers, %d heads, %d KV heads, "
        "head_dim %d): seeded random values with the right shapes, for running the artefact methods end to end. "
        "They carry no information about any model; never report results made with them.\n"
        % (a.seed, a.layers, a.heads, a.kv_heads, d))
    print(f"wrote synthetic artefacts to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
