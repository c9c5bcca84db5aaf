#!/usr/bin/env python3
"""Differential check of the C++ tokenizers against HF on random text (offline; not run by CI).

For each golden tokenizer (tests/golden/tokenizers, plus the SmolLM2 GGUF when present) it makes N
random strings from a mix of ASCII words, digit runs, whitespace runs (incl. Unicode spaces such as
U+0085, U+180E, U+3000), contractions, CJK, Hangul, Cyrillic, Arabic, combining marks, emoji with
ZWJ / skin tones / variation selectors, special-token literals and arbitrary code points, encodes
them with HF (same references as make_tokenizer_golden.py) and with the C++ tokenizer through
build-*/tests/tokenizer/tokenizer_encode_tool, and prints every mismatch (ids with and without
special tokens, special tokens as text, decode).

Rerun (from the repository root, after building tokenizer_encode_tool):
  tools/.venv/bin/python tools/golden/check_tokenizer_random.py \
      --tool build-tokenizer/tests/tokenizer/tokenizer_encode_tool --count 2000 --seed 1
Exit status 0 when every string matches, except strings holding code points that are unassigned
in Unicode 14 (Python 3.11's unicodedata, and the tables of Debian's PCRE2 10.42 and utf8proc):
HF's Oniguruma knows newer Unicode versions, so those are counted separately as a known limit.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import transformers
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tokenizer_golden import random_text  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "tokenizers"

def hf_rows(kind: str, path: Path, texts: list[str]) -> list[dict]:
    if kind == "json":
        tok = Tokenizer.from_file(str(path))

        def encode(text, add_special, split_special):
            tok.encode_special_tokens = split_special
            return tok.encode(text, add_special_tokens=add_special).ids

        decode = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    else:
        if kind == "spm":
            hf = transformers.LlamaTokenizer.from_pretrained(str(path))
        else:
            hf = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            from gguf import GGUFReader

            n_tokens = len(GGUFReader(str(path)).fields["tokenizer.ggml.tokens"].data)
            state = json.loads(hf.backend_tokenizer.to_str())
            state["added_tokens"] = [t for t in state["added_tokens"] if t["id"] < n_tokens]
            hf._tokenizer = Tokenizer.from_str(json.dumps(state))

        def encode(text, add_special, split_special):
            return hf(text, add_special_tokens=add_special, split_special_tokens=split_special)["input_ids"]

        decode = lambda ids: hf.decode(ids, skip_special_tokens=False)  # noqa: E731
    rows = []
    for text in texts:
        ids = encode(text, True, False)
        rows.append(
            {
                "ids": ids,
                "ids_without_special": encode(text, False, False),
                "ids_special_as_text": encode(text, False, True),
                "decoded": decode(ids),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tool", required=True, type=Path)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    r = random.Random(args.seed)
    texts = [random_text(r) for _ in range(args.count)]
    targets = [
        ("json", GOLDEN / "bpe_gpt2" / "tokenizer.json"),
        ("json", GOLDEN / "bpe_gpt2_variant" / "tokenizer.json"),
        ("json", GOLDEN / "bpe_llama3" / "tokenizer.json"),
        ("json", GOLDEN / "bpe_qwen2" / "tokenizer.json"),
        ("spm", GOLDEN / "spm_llama"),
        ("spm", GOLDEN / "spm_llama_legacy"),
        ("gguf", GOLDEN / "gguf" / "llama_bpe.gguf"),
        ("gguf", GOLDEN / "gguf" / "qwen2.gguf"),
        ("gguf", REPO / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = Path(tmp) / "texts.json"
        texts_path.write_text(json.dumps(texts), encoding="utf-8")
        for kind, path in targets:
            if not path.exists():
                print(f"skip {path} (absent)")
                continue
            out_path = Path(tmp) / "out.json"
            subprocess.run([str(args.tool), str(path), str(texts_path), str(out_path)], check=True)
            ours = json.loads(out_path.read_text(encoding="utf-8"))
            expected = hf_rows(kind, path, texts)
            bad = 0
            newer_unicode = 0
            for text, a, b in zip(texts, ours, expected):
                differs = [key for key in ("ids", "ids_without_special", "ids_special_as_text", "decoded") if a[key] != b[key]]
                if not differs:
                    continue
                if any(unicodedata.category(ch) == "Cn" for ch in text):
                    newer_unicode += 1
                    continue
                bad += len(differs)
                if bad <= 5:
                    for key in differs:
                        print(f"MISMATCH {path.name} {key} text={text!r}\n  ours={a[key]!r}\n  hf  ={b[key]!r}")
            print(f"{path.relative_to(REPO)}: {len(texts)} texts, {bad} mismatching fields, "
                  f"{newer_unicode} differing texts with code points unassigned in Unicode {unicodedata.unidata_version}")
            failures += bad
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
