#!/usr/bin/env python3
"""Trains the SentencePiece tokenizer the RULER generator tests use as their second, non-BPE
tokenizer (tests/benchmarks/ruler/golden/spm_ruler/tokenizer.model + tokenizer_config.json).

It is a Llama-2/Gemma-style model: BPE pieces, byte fallback, digits split one by one
(split_digits), "▁" dummy prefix, <unk>=0 <s>=1 </s>=2, trained on kvaudit's bundled RULER text
(data/ruler/essay.txt, the wonderwords lists, the tiny SQuAD/HotpotQA samples), so its vocabulary
covers that text the way a real model's covers English. Deterministic for a given sentencepiece
version (pinned in tools/golden/requirements.txt).

Rerun from the repository root:
    tools/.venv/bin/python tools/golden/make_ruler_spm.py
"""
import io
import json
import pathlib

import sentencepiece as spm

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "benchmarks" / "ruler" / "golden" / "spm_ruler"
VOCAB_SIZE = 3000


def corpus_lines():
    data = ROOT / "data" / "ruler"
    for line in (data / "essay.txt").read_text().splitlines():
        if line.strip():
            yield line
    for name in ("adjectivelist.txt", "nounlist.txt", "verblist.txt"):
        words = [w.rstrip() for w in (data / "wonderwords" / name).read_text().splitlines()]
        for i in range(0, len(words), 12):
            yield " ".join(words[i:i + 12])
    squad = json.loads((data / "squad_v2_sample.json").read_text())
    for article in squad["data"]:
        for p in article["paragraphs"]:
            yield p["context"]
            for q in p["qas"]:
                yield q["question"]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(corpus_lines())),
        model_writer=model,
        model_type="bpe",
        vocab_size=VOCAB_SIZE,
        byte_fallback=True,
        split_digits=True,
        character_coverage=1.0,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        normalization_rule_name="identity",
        num_threads=1,
        minloglevel=2,
    )
    (OUT / "tokenizer.model").write_bytes(model.getvalue())
    (OUT / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "tokenizer_class": "LlamaTokenizer", "legacy": False}, indent=1) + "\n")


if __name__ == "__main__":
    main()
