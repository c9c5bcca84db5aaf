#!/usr/bin/env python3
"""RestoreKV artefacts for the tiny golden models: restore embeddings + a PEFT LoRA adapter per model.

kvpress 0.5.5's RestoreKVPress (kvpress/presses/restorekv_press.py) downloads, per model, the hub repository
higokri/RestoreKV-<model name>[_plus] holding
  restore_embeddings.safetensors   one tensor "restore_embeddings" [n, hidden] (n = 8 restore tokens)
  adapter_config.json + adapter_model.safetensors   a PEFT LoRA adapter (model.load_adapter reads them)
Published repositories exist only for Llama-3.1-8B-Instruct and Qwen3-8B (and the hub is not reachable here). This
script writes SYNTHETIC stand-ins with the same file layout for the tiny models the kvzip press group uses
(tests/golden/tiny_models/{llama,llama3_rope,qwen2,mistral}; every one has 2 layers, hidden 64, intermediate 128,
4 query heads, 2 KV heads, head_dim 16) to

  tests/golden/artefacts/restorekv_tiny_<model>/restore_embeddings.safetensors
      "restore_embeddings" [8, 64] F32: N(0, 1) draws (torch.Generator seeded SEED + model index) times the standard
      deviation of the model's f32 embed_tokens.weight, i.e. the scale of the model's own token embeddings.
  tests/golden/artefacts/restorekv_tiny_<model>/adapter_config.json, adapter_model.safetensors
      made with peft's own API: get_peft_model(<tiny f32 model>, LoraConfig(r=8, lora_alpha=16,
      target_modules=TARGET_MODULES, task_type="CAUSAL_LM", init_lora_weights=False)) and save_pretrained (F32
      tensors "base_model.model.model.layers.<i>.<self_attn|mlp>.<proj>.lora_{A,B}.weight"; the model card
      README.md that save_pretrained also writes is dropped). The published adapters' adapter_config.json cannot be
      read here; TARGET_MODULES are the ones kvpress's own RestoreKV test adapter uses (tests/default_presses.py,
      TestRestoreKVPress: q,k,v,o,gate,up,down_proj, r=8, lora_alpha=16). Every LoRA weight is then refilled from
      the seeded generator, in sorted parameter-name order: lora_A ~ N(0, 1/in_features), lora_B ~ N(0, s^2) with
      s = LORA_RELATIVE * std(base weight) * sqrt(in_features) / (scaling * sqrt(r)), scaling = lora_alpha / r = 2,
      so that the LoRA term is about LORA_RELATIVE (0.5) of the base projection's output: B is non-zero (PEFT's
      default init has B = 0, an adapter that changes nothing).
  The llama bf16 golden model uses restorekv_tiny_llama as well (as a real user loads one published adapter for the
  model in any dtype): kvpress casts the restore embeddings to the model dtype, and transformers' load_adapter puts
  the LoRA weights into the dtype of the base layer (bf16), so both files are rounded to bf16 on load.
  The kvzip_plus_normalization=True variant (kvpress: adapter name "restorekv_plus", repository <...>_plus) reads
  the same directory here.

Provenance (seed, versions, hyper-parameters, SHA-256 of every file) goes into the "restorekv" entry of
tests/golden/artefacts/artefacts.json (the other entries are left as they are).

Run from the repository root (the kvpress venv of tools/golden/make_kvpress_golden.py):
  tools/.venv-kvpress/bin/python tools/golden/make_restorekv_artefacts.py
Reruns are byte-identical (the draws come from a seeded torch.Generator on the CPU; checked with cmp).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "golden" / "artefacts"
MODELS = ("llama", "llama3_rope", "qwen2", "mistral")
SEED = 20261205
N_RESTORE = 8
LORA_R, LORA_ALPHA = 8, 16
TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_RELATIVE = 0.5


def artefact_dir(model_name: str) -> Path:
    return OUT / f"restorekv_tiny_{model_name}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@torch.no_grad()
def make(model_name: str, index: int) -> None:
    relative = f"tests/golden/tiny_models/{model_name}/f32"  # relative: adapter_config's base_model_name_or_path
    model = transformers.AutoModelForCausalLM.from_pretrained(relative, dtype=torch.float32)
    generator = torch.Generator().manual_seed(SEED + index)

    embed_std = model.model.embed_tokens.weight.std().item()
    hidden = model.config.hidden_size
    embeddings = (torch.randn(N_RESTORE, hidden, generator=generator, dtype=torch.float32) * embed_std).contiguous()

    config = LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, target_modules=list(TARGET_MODULES), task_type="CAUSAL_LM",
                        init_lora_weights=False)
    peft_model = get_peft_model(model, config)
    scaling = LORA_ALPHA / LORA_R
    modules = dict(peft_model.named_modules())
    for name, parameter in sorted(peft_model.named_parameters()):
        if ".lora_A." not in name and ".lora_B." not in name:
            continue
        # name: ...<proj>.lora_A.default.weight; the LoRA layer is three components up.
        layer = modules[name.rsplit(".", 3)[0]]
        in_features = layer.base_layer.in_features
        draw = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
        if ".lora_A." in name:
            parameter.copy_(draw / math.sqrt(in_features))
        else:
            base_std = layer.base_layer.weight.std().item()
            std = LORA_RELATIVE * base_std * math.sqrt(in_features) / (scaling * math.sqrt(LORA_R))
            parameter.copy_(draw * std)

    target = artefact_dir(model_name)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        peft_model.save_pretrained(tmp)
        shutil.copyfile(Path(tmp) / "adapter_model.safetensors", target / "adapter_model.safetensors")
        # peft keeps target_modules as a set, written in hash order: sorted here for byte-identical reruns (peft
        # writes the file as json.dumps(indent=2, sort_keys=True), checked by the round trip).
        text = (Path(tmp) / "adapter_config.json").read_text()
        adapter_config = json.loads(text)
        assert json.dumps(adapter_config, indent=2, sort_keys=True) == text
        adapter_config["target_modules"] = sorted(adapter_config["target_modules"])
        (target / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2, sort_keys=True))
    safetensors.torch.save_file({"restore_embeddings": embeddings}, str(target / "restore_embeddings.safetensors"))
    for path in target.iterdir():
        path.chmod(0o644)  # save_file creates files readable by their owner only

    # The adapter reloads as kvpress loads it (transformers' load_adapter) with the values written above.
    check = transformers.AutoModelForCausalLM.from_pretrained(relative, dtype=torch.float32)
    check.load_adapter(str(target), adapter_name="restorekv")
    loaded = dict(check.named_parameters())
    for name, parameter in peft_model.named_parameters():
        if ".lora_" in name:
            key = name.replace("base_model.model.", "", 1).replace(".default.", ".restorekv.")
            assert torch.equal(loaded[key], parameter), f"{model_name}: {key} reloads differently"
    print(f"{target.relative_to(REPO)}: embed std {embed_std:.4f}", file=sys.stderr)


def main() -> int:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    os.chdir(REPO)
    for index, model_name in enumerate(MODELS):
        make(model_name, index)
    files = sorted(p for name in MODELS for p in artefact_dir(name).iterdir() if p.is_file())
    manifest_path = OUT / "artefacts.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["restorekv"] = {
        "generator": "tools/golden/make_restorekv_artefacts.py",
        "versions": {"kvpress": importlib.metadata.version("kvpress"), "peft": importlib.metadata.version("peft"),
                     "torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "seed": SEED,
        "models": {name: {"dir": f"restorekv_tiny_{name}", "base": f"tests/golden/tiny_models/{name}/f32",
                          "seed": SEED + index} for index, name in enumerate(MODELS)},
        "restore_embeddings": {"n": N_RESTORE, "dtype": "F32", "draw": "N(0,1) * std(embed_tokens.weight)"},
        "lora": {"r": LORA_R, "lora_alpha": LORA_ALPHA, "target_modules": TARGET_MODULES, "dtype": "F32",
                 "draw": f"lora_A ~ N(0, 1/in_features); lora_B ~ N(0, s^2), s = {LORA_RELATIVE} * std(base weight)"
                         " * sqrt(in_features) / (scaling * sqrt(r)); sorted parameter-name order after the "
                         "embeddings"},
        "synthetic": True,
        "files": {str(p.relative_to(OUT)): sha256(p) for p in files},
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    total = 0
    for p in files:
        total += p.stat().st_size
        print(f"{p.relative_to(REPO)}: {p.stat().st_size} bytes", file=sys.stderr)
    print(f"total {total} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
