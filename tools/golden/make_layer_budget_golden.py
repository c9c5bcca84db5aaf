#!/usr/bin/env python3
r"""Layer-budget golden: what the OFFICIAL CAKE and SqueezeAttention code keeps on small random inputs.

Writes tests/golden/layer_budgets/official.json, read by tests/methods/layer_budgets_test.cpp
(LayerBudgetsGolden.*), which feeds the same inputs to methods/cake.h and methods/squeezeattention.h.

Neither method is in kvpress 0.5.5, so the peer is each paper's own code, fetched at a named commit into a
scratch directory (never committed):
  git clone https://github.com/antgroup/cakekv /tmp/cakekv
  git -C /tmp/cakekv checkout c4675ce21b1d6f62d262f9a8dc0ad1e1e8ee4edd
  git clone https://github.com/hetailang/SqueezeAttention /tmp/sqz
  git -C /tmp/sqz checkout a1933d18b09c668312cbabdfd7b1fa73888c0f6f
  nice tools/.venv-kvpress/bin/python tools/golden/make_layer_budget_golden.py --hf \
      --cake /tmp/cakekv --squeeze /tmp/sqz
It needs torch and numpy (tools/.venv-kvpress) and scikit-learn (tools/golden/requirements-layer-budgets.txt;
e.g. `pip install --target /tmp/pylib scikit-learn` and PYTHONPATH=/tmp/pylib).

CAKE (runs the official code itself). cake/model/modify_llama.py `llama_attn_forward_cake` is called as the
attention forward of each layer of a fake 6-layer model (a namespace with random q/k/v projections; RoPE with
cos = 1, sin = 0, i.e. the identity, so the post-RoPE queries/keys are the projections) on random hidden states.
Its prefill branch computes the layer preference and eviction indicator, stores them in a cake.cake_cache.CakeCache
and, at the last layer, cake.cake_cache.CakeprefillKVCache (non-cascading, pred_cake.py's default) allocates the
budgets with cake.utils.adjust_budgets and evicts every layer. The forward then reaches its flash-attention call,
which cannot run on a CPU; that exception is caught after the cache has been evicted. Compatibility shims for
transformers 5.2 (the code targets 4.4x): a placeholder transformers.cache_utils.HybridCache; the typing names and
BaseModelOutputWithPast the module used to get from `import *` (only its annotations use them); repeat_kv,
apply_rotary_pos_emb and logger put into its namespace. Cases: three in float32, one in bfloat16.
Kept positions: each row of the evicted cache is matched (exact bytes) to its row of the full keys (rows are
asserted distinct). Exported per case: the window queries [H, w, d] and keys [Hkv, L, d] per layer, the official
layer budgets (non-window part) and kept positions per (layer, KV head).

SqueezeAttention (its code cannot run here: modify_llama_drop.py needs transformers 4.3x internals and
flash-attn). The pure-tensor parts are restated faithfully from utils_hh/modify_llama_drop.py and run with the
same libraries: the per-token cosine of the residual stream before/after self-attention
(`LlamaDecoderLayer_squeeze.forward`: torch.nn.functional.cosine_similarity(vec1, vec2, dim=1)), the per-layer
mean, sklearn KMeans(n_clusters=3) on the means, the classes ordered by centre, the non-class-3 share
a = (N·ini_size − |C3|·percent)/|C1 ∪ C2| and budgets int(a·L) / int(percent·L) (`LlamaModel_squeeze.forward`),
and the StreamingLLM eviction it wraps (start_size sinks + the most recent budget − start_size). Inputs are
random residual streams x and attention outputs whose scale differs by layer group, so the clusters are clear.
Exported per case: attention_cosine [L] per layer (f32), the official groups, budgets and kept positions.

--hf (--hf-only): also (only) writes tests/golden/layer_budgets/hf_attention_cosine.json, what the capture must give
SqueezeAttention (LayerCapture::attention_cosine): the tiny golden models (tests/golden/tiny_models/<model>/<dtype>,
eager attention) prefill 48 random token ids under transformers; hooks record each decoder layer's input x and its
self-attention output a, and after = x + a in the model dtype (HF's residual add); cos(x_i, after_i) is computed
in float64 from those values. Read by tests/methods/layer_budgets_capture_test.cpp against CpuPrefillCapture.
"""
import argparse
import builtins
import json
import os
import platform
import subprocess
import sys
import types
import typing

import numpy as np
import torch

CAKE_COMMIT = "c4675ce21b1d6f62d262f9a8dc0ad1e1e8ee4edd"
SQUEEZE_COMMIT = "a1933d18b09c668312cbabdfd7b1fa73888c0f6f"


def git_head(path):
    return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def f32_list(tensor):
    """The values of a float32/bf16 tensor as the shortest decimal strings that read back as the same float32."""
    return [float(str(v)) for v in tensor.float().flatten().numpy()]


def rows_to_positions(full, kept):
    """full: [L, d], kept: [n, d] → the positions of kept's rows in full (exact match), ascending."""
    full, kept = full.float(), kept.float()
    index = {full[j].numpy().tobytes(): j for j in range(full.shape[0])}
    assert len(index) == full.shape[0], "full key rows are not distinct"
    return sorted(index[kept[r].numpy().tobytes()] for r in range(kept.shape[0]))


# ---------------------------------------------------------------------------------------------------- CAKE
def load_cake(path):
    import transformers.cache_utils as cache_utils
    import transformers.models.llama.modeling_llama as modeling_llama

    if not hasattr(cache_utils, "HybridCache"):
        cache_utils.HybridCache = type("HybridCache", (), {})
    import transformers.modeling_outputs as modeling_outputs

    shims = {name: getattr(typing, name) for name in ("Union", "List", "Optional", "Tuple")}
    shims["BaseModelOutputWithPast"] = modeling_outputs.BaseModelOutputWithPast
    for name, value in shims.items():
        if not hasattr(builtins, name):
            setattr(builtins, name, value)
    sys.path.insert(0, path)
    import cake.cake_cache as cake_cache
    import cake.model.modify_llama as modify_llama

    modify_llama.repeat_kv = modeling_llama.repeat_kv
    modify_llama.apply_rotary_pos_emb = modeling_llama.apply_rotary_pos_emb
    modify_llama.logger = modeling_llama.logger
    return cake_cache, modify_llama


def cake_case(cake_cache, modify_llama, seed, n_layers, heads, kv_heads, head_dim, hidden, length, window,
              cache_size, tau1, tau2, gamma, query_scales, dtype=torch.float32):
    torch.manual_seed(seed)
    hidden_states = torch.randn(1, length, hidden).to(dtype)
    cos = torch.ones(1, length, head_dim, dtype=dtype)
    sin = torch.zeros(1, length, head_dim, dtype=dtype)
    evict = cake_cache.CakeprefillKVCache(cache_size=cache_size, window_size=window, k_seq_dim=2, v_seq_dim=2,
                                          num_heads=heads, num_layers=n_layers, use_cascading=False)
    config = types.SimpleNamespace(
        key_size=[cache_size - window] * n_layers, window_size=[window] * n_layers, prefill=[True] * n_layers,
        decoding_evict=[None] * n_layers, tau1=tau1, tau2=tau2, gamma=gamma, prefill_cake_evict=[evict] * n_layers)
    cache = cake_cache.CakeCache()
    layers = []
    for layer in range(n_layers):
        q_proj = torch.nn.Linear(hidden, heads * head_dim, bias=False)
        k_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        v_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        with torch.no_grad():
            q_proj.weight.mul_(query_scales[layer])
        q_proj, k_proj, v_proj = q_proj.to(dtype), k_proj.to(dtype), v_proj.to(dtype)
        attention = types.SimpleNamespace(
            config=config, layer_idx=layer, num_heads=heads, head_dim=head_dim, num_key_value_heads=kv_heads,
            num_key_value_groups=heads // kv_heads, q_proj=q_proj, k_proj=k_proj, v_proj=v_proj, o_proj=None,
            training=False, attention_dropout=0.0, is_causal=True, _flash_attn_uses_top_left_mask=False)
        with torch.no_grad():
            # What the official forward computes first (same modules, same input: the same bits).
            queries = q_proj(hidden_states).view(1, length, heads, head_dim).transpose(1, 2)[0]
            keys = k_proj(hidden_states).view(1, length, kv_heads, head_dim).transpose(1, 2)[0]
            try:
                modify_llama.llama_attn_forward_cake(attention, hidden_states, attention_mask=None,
                                                     position_ids=None, past_key_value=cache, use_cache=True,
                                                     position_embeddings=(cos, sin))
                raise AssertionError("the official forward was expected to stop at its flash-attention call")
            except AssertionError:
                raise
            except Exception:  # flash attention on a CPU tensor: the prefill branch has run
                pass
        layers.append({"window_queries": queries[:, length - window:, :].contiguous(), "keys": keys.contiguous()})
    assert len(cache.pref_scores) == n_layers
    prefix = length - window
    out_layers = []
    for layer in range(n_layers):
        kept_keys = cache.key_cache[layer][0]  # [Hkv, b + w, d]
        budget = int(cache.layer_budget[layer])
        assert kept_keys.shape[1] == budget + window
        kept = []
        for g in range(kv_heads):
            full = layers[layer]["keys"][g]
            positions = rows_to_positions(full, kept_keys[g])
            assert positions[-window:] == list(range(prefix, length)), "the window must be kept"
            kept.append(positions)
        out_layers.append({
            "window_queries": f32_list(layers[layer]["window_queries"]),
            "keys": f32_list(layers[layer]["keys"]),
            "preference": float(cache.pref_scores[layer]),
            "budget": budget,
            "kept": kept,
        })
    return {"seed": seed, "dtype": "bf16" if dtype == torch.bfloat16 else "f32", "num_layers": n_layers,
            "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim, "length": length, "window": window,
            "cache_size": cache_size, "tau1": tau1, "tau2": tau2, "gamma": gamma, "kernel_size": 5,
            "layers": out_layers}


# ---------------------------------------------------------------------------------------- SqueezeAttention
def squeeze_case(seed, n_layers, heads, kv_heads, length, hidden, ini_size, percent, start_size, attention_scales):
    from sklearn.cluster import KMeans

    torch.manual_seed(seed)
    hidd_data = {}
    for layer in range(n_layers):
        vec1 = torch.randn(length, hidden)  # residual stream entering the layer
        attention_output = torch.randn(length, hidden) * attention_scales[layer]
        vec2 = vec1 + attention_output  # after the self-attention block's residual add
        hidd_data[layer] = torch.nn.functional.cosine_similarity(vec1, vec2, dim=1)
    cosines = {layer: hidd_data[layer].clone() for layer in hidd_data}
    # LlamaModel_squeeze.forward, after the layer loop (restated).
    prompt_len = len(hidd_data[0])
    means = np.array([float(torch.mean(hidd_data[i])) for i in hidd_data])
    kmeans = KMeans(n_clusters=3, random_state=seed, n_init=10)
    kmeans.fit(means.reshape(-1, 1))
    labels = kmeans.labels_
    order = np.argsort(kmeans.cluster_centers_.flatten())
    classes = [np.where(labels == order[k])[0] for k in range(3)]
    others = len(classes[0]) + len(classes[1])
    a = (n_layers * ini_size - len(classes[2]) * percent) / others
    budgets = [0] * n_layers
    for k in range(2):
        for layer in classes[k]:
            budgets[layer] = int(a * prompt_len)
    for layer in classes[2]:
        budgets[layer] = int(percent * prompt_len)
    groups = [0] * n_layers
    for k in range(3):
        for layer in classes[k]:
            groups[int(layer)] = k
    # The StreamingLLM eviction it wraps: start_size sinks + the most recent budget - start_size.
    kept = []
    for layer in range(n_layers):
        recent = budgets[layer] - start_size
        positions = list(range(start_size)) + list(range(length - recent, length))
        kept.append([positions for _ in range(kv_heads)])
    return {"seed": seed, "num_layers": n_layers, "num_heads": heads, "num_kv_heads": kv_heads, "length": length,
            "ini_size": ini_size, "percent": percent, "start_size": start_size,
            "layers": [{"attention_cosine": f32_list(cosines[layer]), "mean": float(means[layer]),
                        "group": groups[layer], "budget": budgets[layer], "kept": kept[layer]}
                       for layer in range(n_layers)]}


def hf_attention_cosines(models_dir, out):
    import transformers

    cases = []
    for model in ("llama", "qwen2"):
        for dtype_name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            directory = os.path.join(models_dir, model, dtype_name)
            net = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=dtype,
                                                                    attn_implementation="eager")
            net.eval()
            generator = torch.Generator().manual_seed(31)
            ids = torch.randint(0, net.config.vocab_size, (1, 48), generator=generator)
            inputs, outputs = {}, {}
            hooks = []
            for index, layer in enumerate(net.model.layers):
                def before(module, args, kwargs, index=index):
                    inputs[index] = (kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]).detach()
                def after(module, args, result, index=index):
                    outputs[index] = (result[0] if isinstance(result, tuple) else result).detach()
                hooks.append(layer.register_forward_pre_hook(before, with_kwargs=True))
                hooks.append(layer.self_attn.register_forward_hook(after))
            with torch.no_grad():
                net(ids)
            for hook in hooks:
                hook.remove()
            layers = []
            for index in range(len(net.model.layers)):
                x = inputs[index][0]
                residual = (x + outputs[index][0]).to(torch.float64)  # the add in the model dtype
                x = x.to(torch.float64)
                cosine = (x * residual).sum(-1) / torch.clamp(x.norm(dim=-1) * residual.norm(dim=-1), min=1e-8)
                layers.append(cosine.tolist())
            cases.append({"model": model, "dtype": dtype_name, "ids": ids[0].tolist(), "attention_cosine": layers})
    golden = {"generator": "tools/golden/make_layer_budget_golden.py --hf", "attention": "eager",
              "versions": {"torch": torch.__version__, "transformers": transformers.__version__}, "cases": cases}
    with open(out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {out}: {len(cases)} cases")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cake", help="checkout of antgroup/cakekv at " + CAKE_COMMIT)
    parser.add_argument("--squeeze", help="checkout of hetailang/SqueezeAttention at " + SQUEEZE_COMMIT)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden",
                                                      "layer_budgets", "official.json"))
    parser.add_argument("--hf", action="store_true", help="also write hf_attention_cosine.json from the tiny models")
    parser.add_argument("--hf-only", action="store_true", help="only write hf_attention_cosine.json")
    args = parser.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    torch.set_num_threads(1)
    if args.hf or args.hf_only:
        hf_attention_cosines(os.path.join(root, "tests", "golden", "tiny_models"),
                             os.path.join(root, "tests", "golden", "layer_budgets", "hf_attention_cosine.json"))
        if args.hf_only:
            return
    if not args.cake or not args.squeeze:
        parser.error("--cake and --squeeze are required (unless --hf-only)")
    for path, commit in ((args.cake, CAKE_COMMIT), (args.squeeze, SQUEEZE_COMMIT)):
        head = git_head(path)
        if head != commit:
            sys.exit(f"{path} is at {head}, expected {commit}")
    torch.set_num_threads(1)
    import sklearn

    cake_cache, modify_llama = load_cake(args.cake)
    scales = [0.2, 0.5, 1.0, 2.0, 3.0, 5.0]
    cake_cases = [
        cake_case(cake_cache, modify_llama, 11, 6, 4, 2, 16, 32, 96, 8, 40, 1.0, 1.0, 200.0, scales),
        cake_case(cake_cache, modify_llama, 12, 6, 4, 2, 16, 32, 96, 8, 24, 1.6, 0.4, 200.0, scales[::-1]),
        cake_case(cake_cache, modify_llama, 13, 6, 4, 1, 16, 32, 80, 16, 48, 1.0, 1.0, 50.0,
                  [1.0, 0.3, 4.0, 1.0, 0.3, 4.0]),
        cake_case(cake_cache, modify_llama, 14, 6, 4, 2, 16, 32, 96, 8, 40, 1.0, 1.0, 200.0, scales,
                  dtype=torch.bfloat16),
    ]
    squeeze_cases = [
        squeeze_case(21, 8, 4, 2, 100, 64, 0.4, 0.2, 4, [0.2, 1.0, 3.0, 0.25, 0.2, 1.1, 3.2, 0.22]),
        squeeze_case(22, 10, 4, 2, 120, 64, 0.5, 0.2, 4, [2.0, 2.2, 0.5, 0.1, 0.12, 0.45, 0.11, 2.1, 0.5, 0.1]),
    ]
    golden = {
        "generator": "tools/golden/make_layer_budget_golden.py",
        "official": {"cake": "antgroup/cakekv@" + CAKE_COMMIT, "squeezeattention":
                     "hetailang/SqueezeAttention@" + SQUEEZE_COMMIT},
        "versions": {"torch": torch.__version__, "numpy": np.__version__, "sklearn": sklearn.__version__,
                     "python": platform.python_version()},
        "cake": cake_cases,
        "squeezeattention": squeeze_cases,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {len(cake_cases)} CAKE cases, {len(squeeze_cases)} SqueezeAttention cases")
    for case in cake_cases:
        print("cake budgets", [layer["budget"] for layer in case["layers"]])
    for case in squeeze_cases:
        print("squeeze groups", [layer["group"] for layer in case["layers"]],
              "budgets", [layer["budget"] for layer in case["layers"]])


if __name__ == "__main__":
    main()
