#!/usr/bin/env python3
"""HF-parity golden fixture for the embedded default model, SmolLM2-135M-Instruct (GGUF Q4_1).

transformers loads the GGUF file itself (dequantizing Q4_1 to float32 and undoing llama.cpp's Q/K row
permutation), so its logits are the reference for our GGUF loader + CPU runtime in f32 mode:
  AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., dtype=torch.float32, attn_implementation=...)
  AutoTokenizer.from_pretrained(dir, gguf_file=...)   (token ids and the chat template from the GGUF)

What it writes (tests/golden/smollm2/, read by tests/parity/smollm2_parity_test.cpp):
  reference.json          prompts (text, how rendered, token ids), per backend and prompt: argmax,
                          max logit and second-largest logit at every position, greedy continuations;
                          where full logits are stored; versions; the model file's size and SHA-256.
  reference.safetensors   F32 full logits [vocab] at FULL_LOGIT_POSITIONS (prompt, position) pairs,
                          per backend: "<impl>.logits.<prompt>.<position>"
Prompts: three plain texts and two chat-rendered user turns (the GGUF's chat template with
add_generation_prompt=True, tokenized as apply_chat_template does: no extra BOS).
Backends: "eager" and "sdpa" (pinned to SDPBackend.FLASH_ATTENTION; on the CPU that is
aten::_scaled_dot_product_flash_attention_for_cpu, see make_model_golden.py), one torch thread.
Greedy: generate(do_sample=False, max_new_tokens=GREEDY_NEW_TOKENS) with the GGUF's eos id; every prompt
is chosen so that the continuation does not stop before GREEDY_NEW_TOKENS (checked below).

Rerun (from the repository root; needs tools/.venv with `accelerate`, which transformers requires to load
GGUF files, and the model: tools/fetch_default_model.sh):
  tools/.venv/bin/python tools/golden/make_smollm2_golden.py \
      [--model models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf] [--out tests/golden/smollm2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import torch
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

IMPLEMENTATIONS = ("eager", "sdpa")
CPU_SDPA_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"
GREEDY_NEW_TOKENS = 48
PLAIN_PROMPTS = [
    "The printing press, invented by Johannes Gutenberg around 1440, changed how knowledge spread "
    "across Europe. Within a few decades, printed books were available in most major cities, and",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"
    "    a, b = 0, 1\n    for _ in range(n - 1):\n",
    "Photosynthesis is the process by which green plants, algae and some bacteria convert light energy "
    "into chemical energy. During this process, carbon dioxide and water are combined to form glucose, "
    "while oxygen is released as a by-product. The reactions take place in",
]
CHAT_PROMPTS = [
    "Explain in a few sentences why the sky is blue during the day and red at sunset.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
]
# (prompt index, position) pairs whose full logits are stored: 4 per backend keep the file < 2 MB.
FULL_LOGIT_POSITIONS = [(0, -1), (1, 20), (3, -1), (4, 30)]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def attention_context(implementation: str):
    if implementation == "sdpa":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    return torch.no_grad()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path,
                        default=Path("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--out", type=Path, default=Path("tests/golden/smollm2"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    model_dir, gguf_name = args.model.parent, args.model.name

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf_name)
    prompts = []
    for text in PLAIN_PROMPTS:
        prompts.append({"kind": "plain", "text": text,
                        "token_ids": tokenizer(text, add_special_tokens=True)["input_ids"]})
    for text in CHAT_PROMPTS:
        messages = [{"role": "user", "content": text}]
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding here
            ids = ids["input_ids"]
        assert ids == tokenizer(rendered, add_special_tokens=False)["input_ids"]
        prompts.append({"kind": "chat", "text": text, "rendered": rendered, "token_ids": list(ids)})

    tensors: dict[str, torch.Tensor] = {}
    backends = {}
    eos_ids = None
    for implementation in IMPLEMENTATIONS:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, gguf_file=gguf_name, dtype=torch.float32, attn_implementation=implementation)
        model.eval()
        assert next(model.parameters()).dtype == torch.float32
        eos = model.generation_config.eos_token_id
        eos_ids = sorted(eos if isinstance(eos, list) else [eos])
        entry = {"prompts": []}
        for p, prompt in enumerate(prompts):
            ids = torch.tensor([prompt["token_ids"]], dtype=torch.long)
            with torch.no_grad(), attention_context(implementation):
                with profile(activities=[ProfilerActivity.CPU]) as profiler:
                    logits = model(input_ids=ids).logits[0].to(torch.float32)
                ops = {event.key for event in profiler.key_averages()}
                if implementation == "sdpa" and CPU_SDPA_OP not in ops:
                    raise RuntimeError(f"sdpa forward did not run {CPU_SDPA_OP}")
                if implementation == "eager" and any("scaled_dot_product" in op for op in ops):
                    raise RuntimeError("eager forward ran a scaled_dot_product kernel")
                generated = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                           max_new_tokens=GREEDY_NEW_TOKENS)
            top = torch.topk(logits, 2, dim=-1)
            new_tokens = generated[0, ids.shape[1]:].tolist()
            if len(new_tokens) < GREEDY_NEW_TOKENS:
                raise RuntimeError(f"prompt {p} stops after {len(new_tokens)} tokens under {implementation}")
            entry["prompts"].append({
                "argmax": top.indices[:, 0].tolist(),
                "max_logit": top.values[:, 0].tolist(),
                "second_logit": top.values[:, 1].tolist(),
                "greedy_new_tokens": new_tokens,
            })
            for prompt_index, position in FULL_LOGIT_POSITIONS:
                if prompt_index == p:
                    absolute = position % ids.shape[1]
                    tensors[f"{implementation}.logits.{p}.{absolute}"] = logits[absolute].contiguous()
        backends[implementation] = entry
        print(f"{implementation}: " + ", ".join(
            f"prompt {i}: {len(pr['token_ids'])} tokens -> {tokenizer.decode(e['greedy_new_tokens'][:12])!r}"
            for i, (pr, e) in enumerate(zip(prompts, entry["prompts"]))))

    # HF's own eager-vs-sdpa agreement (the noise floor of the comparison).
    eager, sdpa = backends["eager"], backends["sdpa"]
    agree = [a == b for pe, ps in zip(eager["prompts"], sdpa["prompts"])
             for a, b in zip(pe["argmax"], ps["argmax"])]
    full_diff = []
    for name, tensor in tensors.items():
        if name.startswith("eager."):
            other = tensors["sdpa." + name[len("eager."):]]
            norm = torch.linalg.vector_norm
            full_diff.append(float(norm(other - tensor) / norm(tensor)))

    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file(tensors, out_dir / "reference.safetensors",
                                metadata={"generator": "tools/golden/make_smollm2_golden.py"})
    manifest = {
        "generator": "tools/golden/make_smollm2_golden.py",
        "model_file": gguf_name,
        "model_file_bytes": args.model.stat().st_size,
        "model_file_sha256": sha256(args.model),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "safetensors": safetensors.__version__,
                     "numpy": np.__version__},
        "torch_threads": torch.get_num_threads(),
        "sdpa_kernel": {"pinned_with": "torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION])",
                        "observed_op": CPU_SDPA_OP},
        "dtype": "float32 (Q4_1 dequantized by transformers)",
        "vocab_size": model.config.vocab_size,
        "eos_token_ids": eos_ids,
        "greedy_new_tokens": GREEDY_NEW_TOKENS,
        "full_logits": sorted(name.split(".", 1)[1] for name in tensors if name.startswith("eager.")),
        "hf_eager_vs_sdpa": {"argmax_agreement": sum(agree) / len(agree),
                             "max_relative_norm_at_full_logits": max(full_diff),
                             "greedy_identical": all(pe["greedy_new_tokens"] == ps["greedy_new_tokens"]
                                                     for pe, ps in zip(eager["prompts"], sdpa["prompts"]))},
        "prompts": prompts,
        "backends": backends,
    }
    (out_dir / "reference.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f.stat().st_size for f in out_dir.iterdir() if f.is_file())
    print(f"wrote {out_dir} ({total / 1e6:.2f} MB); HF eager vs sdpa: {manifest['hf_eager_vs_sdpa']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
