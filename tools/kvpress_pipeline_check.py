#!/usr/bin/env python3
"""Cross-check kvaudit's quickstart findings with kvpress's own generation pipeline.

Runs kvpress's `KVPressTextGenerationPipeline` on RULER instances dumped by `kvaudit generate ruler`
and prints, per instance, whether full KV, the press under query-agnostic and the press under
query-aware recover the needle, with the first characters of each answer (compare them with
kvaudit's records of the same cells: `output` in the shards). docs/design/quickstart.md reports
two such checks on SmolLM2-135M-Instruct in f32 sdpa: SnapKVPress(0.5) 0/12 under both protocols,
and TOVAPress(0.5) query-aware 9/12, query-agnostic 6/12 with every answer equal to kvaudit's.

Protocols as kvpress runs them: query-agnostic = the pipeline's `question` argument (the context
is compressed before the question is seen); query-aware = the question appended to the context
and an empty `question` (the question is compressed with the context).

Set-up: the git-ignored venv of tools/golden/requirements-kvpress.txt plus the `gguf` package
(transformers needs it to load a GGUF file; pinned in that requirements file):

    tools/.venv-kvpress/bin/pip install gguf
    build/kvaudit generate ruler \\
        --model models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf --length 512 \\
        --tasks niah_single_1,niah_single_2,niah_multikey_1 --instances 4 --seed 42 \\
        --out /tmp/instances.jsonl
    OMP_NUM_THREADS=1 tools/.venv-kvpress/bin/python tools/kvpress_pipeline_check.py \\
        --instances /tmp/instances.jsonl --press tova --compression 0.5

(On CPUs that list AMX, also set ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: AMX instructions die with
SIGILL on these VMs.) About 20 s per instance on one core.
"""
import argparse
import json
import os

import torch
from kvpress import KnormPress, SnapKVPress, StreamingLLMPress, TOVAPress
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

PRESSES = {
    "snapkv": SnapKVPress,
    "tova": TOVAPress,
    "knorm": KnormPress,
    "streaming_llm": StreamingLLMPress,
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", required=True, help="JSONL from `kvaudit generate ruler`")
    ap.add_argument("--press", required=True, choices=sorted(PRESSES))
    ap.add_argument("--compression", type=float, required=True)
    ap.add_argument("--model-dir",
                    default=os.path.join(here, "..", "models", "smollm2-135m-instruct"))
    ap.add_argument("--gguf", default="SmolLM2-135M-Instruct.Q4_1.gguf")
    a = ap.parse_args()

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, gguf_file=a.gguf,
                                                 dtype=torch.float32, attn_implementation="sdpa")
    tokenizer = AutoTokenizer.from_pretrained(a.model_dir, gguf_file=a.gguf)
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer, device="cpu")

    def press():
        return PRESSES[a.press](compression_ratio=a.compression)

    totals = {"full": 0, "agnostic": 0, "aware": 0}
    n = 0
    with open(a.instances) as f:
        for line in f:
            x = json.loads(line)
            common = dict(answer_prefix=x["answer_prefix"], max_new_tokens=x["max_new_tokens"])
            answers = {
                "full": pipe(x["context"], question=x["question"], press=None, **common)["answer"],
                "agnostic": pipe(x["context"], question=x["question"], press=press(),
                                 **common)["answer"],
                "aware": pipe(x["context"] + x["question"], question="", press=press(),
                              **common)["answer"],
            }
            n += 1
            cells = []
            for name, answer in answers.items():
                ok = all(v.lower() in answer.lower() for v in x["answers"])
                totals[name] += ok
                cells.append("%s %s %r" % (name, ok, answer[:30]))
            print(x["task"], x["index"], x["answers"], "| " + " | ".join(cells), flush=True)
    print("%s(compression_ratio=%g), %d instances: full KV %d, query-agnostic %d, query-aware %d"
          % (PRESSES[a.press].__name__, a.compression, n, totals["full"], totals["agnostic"],
             totals["aware"]))


if __name__ == "__main__":
    main()
