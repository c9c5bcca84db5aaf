"""Press group fastkvzip: FastKVzipPress (kvpress 0.5.5; layerwise False/True) with seeded gates
-> tests/golden/kvpress/kept_fastkvzip.json (+ the gate files tests/golden/artefacts/fastkvzip_gates_{f32,bf16}.safetensors).

Run from the repository root: tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group fastkvzip
(see that script's docstring for the document shape and the group hooks). C++ side: methods/fastkvzip.h (the
method; it reads LayerCapture::attention_input, the CPU capture's input_layernorm output); parity test
tests/methods/kvpress_parity_test.cpp.

Gates: kvpress downloads trained gates from the hub (Jang-Hyun/Fast-KVzip) for the real models only. Here the gates
of each tiny model are made with kvpress's own FastKVzipGate class (output_dim 16, 16 sink keys, nhead = Hkv,
ngroup = H / Hkv, as kvpress's get_gate_id names the hub files) and every parameter is refilled from a seeded torch
generator (the class initialises b and k_base to zeros and the norm weights to ones, which would leave those terms
untested). All tiny models have the same shapes (hidden 64, 2 layers, 4 heads, 2 KV heads), so one f32 file serves
the f32 models and one bf16 file (projections and b in bf16, k_base and norm weights f32, as the class creates them
for dtype=bfloat16) the bf16 model. The files are written with the names of torch.nn.ModuleList(gates).state_dict()
("<layer>.q_proj.weight", ...), which is the format the C++ `gates` parameter reads; the press gets gates loaded back
from that same file (FastKVzipGate + load_state_dict, as kvpress's load_fastkvzip does with the hub's state dicts),
patched in as press.gates before the prefill (post_init_from_model then loads nothing).

Kept sets: FastKVzipPress masks (attention_patch.py): kept = complement of masked_key_indices (MASKED_KINDS). The
scores kvpress selects from (score_val after the sinks and the window got 1.0) are captured by wrapping
compress_post; boundary_tie flags an exact tie across the global (or, layerwise, per-layer) pruning boundary, and
without a tie the kept sets are checked to be the complement of the bottom-k of those scores with kvpress's budget
arithmetic (compress_post is KVzipPress's).
"""

from __future__ import annotations

from pathlib import Path

import safetensors.torch
import torch

from kvpress import FastKVzipPress
from kvpress.presses.fastkvzip_press import FastKVzipGate

REPO = Path(__file__).resolve().parents[3]
GATE_FILES = {"f32": "tests/golden/artefacts/fastkvzip_gates_f32.safetensors",
              "bf16": "tests/golden/artefacts/fastkvzip_gates_bf16.safetensors"}
GATE_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
GATE_SEED = 20260118
OUTPUT_DIM, GATE_SINKS = 16, 16
# The tiny models' shape (tests/golden/tiny_models/*/config.json).
N_LAYERS, HIDDEN, HEADS, KV_HEADS = 2, 64, 4, 2

MASKED_KINDS = {"fastkvzip"}

NOTES = [
    "fastkvzip group: gates made with kvpress's FastKVzipGate (output_dim 16, 16 sink keys, nhead = Hkv, ngroup = "
    "H/Hkv), every parameter refilled from a seeded torch generator (seed 20260118): projections N(0, 1/hidden), "
    "q_proj.bias N(0, 0.1^2), norm weights 1 + N(0, 0.1^2), k_base N(0, 1), b N(0, 0.5^2); saved as safetensors "
    "(tests/golden/artefacts/fastkvzip_gates_{f32,bf16}.safetensors, names of ModuleList(gates).state_dict()), "
    "loaded back into FastKVzipGate and patched in as press.gates (no hub download); one file per dtype serves every "
    "tiny model (identical shapes)",
    "fastkvzip kept sets: complement of masked_key_indices (FastKVzipPress masks); budget: int(N*cr) entries pruned "
    "over all layers (N = layers*Hkv*L), layerwise: int(Hkv*L*cr) per layer; heads keep different counts; the "
    "n_sink = 4 first and the last max(1, int(L*0.02)) = 2 positions score 1.0",
    "fastkvzip boundary_tie: equal scores (score_val as kvpress selects from it) straddle the global pruning "
    "boundary (layerwise: a layer's boundary). Ties are real here: layer 0's gate reads input_layernorm(embedding) "
    "of the position's own token, so repeated ids of the random prompts score exactly alike",
    "fastkvzip bf16: the C++ method matches every f32 case exactly; untied bf16 cases can fall slightly below 1 "
    "(query-aware, global budget: about 0.997) because the gate's bf16 projections of our CpuModel's bf16 "
    "attention input (its sums in another order, and input entries one bf16 step from HF's) can land one bf16 "
    "step apart, which reorders near-equal scores at the pruning boundary",
]


# ----------------------------------------------------------------------------------------------------------------
# Gates: made once per dtype with kvpress's class, written as safetensors, loaded back for the press.

def _make_gate_file(dtype_name: str) -> None:
    path = REPO / GATE_FILES[dtype_name]
    generator = torch.Generator().manual_seed(GATE_SEED + (1 if dtype_name == "bf16" else 0))
    tensors = {}
    for index in range(N_LAYERS):
        gate = FastKVzipGate(index, HIDDEN, KV_HEADS, HEADS // KV_HEADS, GATE_DTYPES[dtype_name], OUTPUT_DIM,
                             GATE_SINKS)
        with torch.no_grad():
            for name, parameter in gate.named_parameters():
                draw = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
                if name.endswith("proj.weight"):
                    draw = draw / HIDDEN ** 0.5
                elif name == "q_proj.bias":
                    draw = draw * 0.1
                elif name.endswith("norm.weight"):
                    draw = 1.0 + draw * 0.1
                elif name == "b":
                    draw = draw * 0.5
                parameter.copy_(draw.to(parameter.dtype))
        for name, value in gate.state_dict().items():
            tensors[f"{index}.{name}"] = value.contiguous()
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file(tensors, str(path))
    path.chmod(0o644)  # save_file creates the file readable by its owner only


def load_gates(dtype_name: str):
    """The gates of the file, as kvpress's load_fastkvzip builds them from a list of state dicts."""
    flat = safetensors.torch.load_file(str(REPO / GATE_FILES[dtype_name]))
    n_layers = 1 + max(int(name.split(".", 1)[0]) for name in flat)
    state_dicts = [{name.split(".", 1)[1]: value for name, value in flat.items() if name.startswith(f"{i}.")}
                   for i in range(n_layers)]
    first = state_dicts[0]
    head_group_dim, input_dim = first["q_proj.weight"].shape
    head_dim_total = first["k_proj.weight"].shape[0]
    output_dim = first["q_norm.weight"].shape[-1]
    nhead = head_dim_total // output_dim
    ngroup = head_group_dim // head_dim_total
    sink = first["k_base"].shape[2]
    gates = []
    for index, state in enumerate(state_dicts):
        gate = FastKVzipGate(index, input_dim, nhead, ngroup, first["q_proj.weight"].dtype, output_dim, sink)
        gate.load_state_dict(state)
        gates.append(gate)
    return gates


for _dtype_name in GATE_FILES:
    _make_gate_file(_dtype_name)


def fastkvzip_press(cr, dtype_name, layerwise):
    press = FastKVzipPress(compression_ratio=cr, layerwise=layerwise)
    press.gates = load_gates(dtype_name)
    return press


def runs_on(label, model_name, dtype_name):
    return ("bf16" in label) == (dtype_name == "bf16")


def run_press(model, attn, ids, press):
    import sys

    main = sys.modules["__main__"]
    keys = main.prefill(model, attn, ids, press)[0]
    # The gates and scores are dataclass fields; keep them out of the case's "kvpress" description.
    press.gates = None
    press.score_val = None
    return keys


# ----------------------------------------------------------------------------------------------------------------
# Scores: score_val after the sinks and the window got 1.0 (captured per press instance).

def install_recorders(press, log):
    if not isinstance(press, FastKVzipPress):
        return False
    original = type(press).compress_post

    def compress_post(model):
        original(press, model)
        log.append({"scores": press.score_val[:, 0].clone()})  # [layers, Hkv, L]

    press.compress_post = compress_post
    return True


def _pruned_counts(press, scores, cr):
    n_layers, hkv, length = scores.shape
    if press.layerwise:
        return [int(hkv * length * cr)] * n_layers
    pruned = torch.topk(-scores.reshape(-1), int(scores.numel() * cr)).indices
    return torch.bincount(pruned // (hkv * length), minlength=n_layers).tolist()


def _tie_at(ascending, k):
    return 0 < k < ascending.numel() and bool(ascending[k - 1] == ascending[k])


def boundary_tie(kind, press, log, kept, cr):
    if kind != "fastkvzip":
        return None
    (entry,) = log
    scores = entry["scores"].float()
    if press.layerwise:
        counts = _pruned_counts(press, scores, cr)
        return any(_tie_at(scores[l].reshape(-1).sort().values, k) for l, k in enumerate(counts))
    return _tie_at(scores.reshape(-1).sort().values, int(scores.numel() * cr))


def check_budget(label, kind, press, kept, length, cr, where):
    if kind != "fastkvzip":
        return False
    n_layers, hkv = len(kept), len(kept[0])
    per_layer = [sum(len(h) for h in layer) for layer in kept]
    if press.layerwise:
        expected = hkv * length - int(hkv * length * cr)
        assert per_layer == [expected] * n_layers, f"{where}: layerwise fastkvzip keeps {per_layer}, not {expected}"
    else:
        total = n_layers * hkv * length
        assert sum(per_layer) == total - int(total * cr), f"{where}: fastkvzip keeps {sum(per_layer)} in all"
    window = max(1, int(length * press.window_ratio))
    protected = set(range(press.n_sink)) | set(range(length - window, length))
    for layer, per_head in enumerate(kept):
        if hkv * length - per_layer[layer] <= hkv * (length - len(protected)):  # the budget spares them
            for head in per_head:
                assert protected <= set(head), f"{where}: layer {layer}: a sink or window position was evicted"
    return True


def check_against_scores(kind, log, kept, tie, where):
    if kind != "fastkvzip":
        return False
    if tie:
        return True
    (entry,) = log
    scores = entry["scores"].float()
    n_layers, hkv, length = scores.shape
    totals = [sum(len(h) for h in layer) for layer in kept]
    for layer in range(n_layers):
        n_pruned = hkv * length - totals[layer]
        pruned = set(torch.topk(-scores[layer].reshape(-1), n_pruned).indices.tolist())
        expected = [[j for j in range(length) if h * length + j not in pruned] for h in range(hkv)]
        assert expected == kept[layer], f"{where}: layer {layer} kept set is not the complement of the bottom-k"
    return True


# ----------------------------------------------------------------------------------------------------------------

def fastkvzip_method(dtype_name, layerwise):
    return {"id": "fastkvzip", "variant": None,
            "params": {"gates": GATE_FILES[dtype_name], "layerwise": layerwise, "n_sink": 4, "window_size": 4096,
                       "window_ratio": 0.02}, "scorer": None}


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    table = []
    for dtype_name in ("f32", "bf16"):
        for layerwise in (False, True):
            label = "fastkvzip" + (f"({dtype_name} gates" + (",layerwise=True)" if layerwise else ")")
                                   if dtype_name == "bf16" else ("(layerwise=True)" if layerwise else ""))
            table.append((label, None, lambda cr, d=dtype_name, lw=layerwise: fastkvzip_press(cr, d, lw),
                          fastkvzip_method(dtype_name, layerwise), "sdpa", "fastkvzip"))
    return table
