#!/usr/bin/env python3
"""Golden fixtures for the C++ tokenizers (runners/model/tokenizer, tests/tokenizer).

Writes tests/golden/tokenizers/:
  bpe_gpt2/tokenizer.json          byte-level BPE trained here with HF `tokenizers`, GPT-2/SmolLM
                                   shape: ByteLevel pre-tokenizer (GPT-2 regex), no normalizer,
                                   ByteLevel post-processor, special tokens at ids 0..2.
  bpe_gpt2_variant/tokenizer.json  the same vocabulary with merges as legacy "a b" strings, a
                                   Sequence[Digits(individual), ByteLevel(add_prefix_space)]
                                   pre-tokenizer and a TemplateProcessing that adds BOS and EOS.
  bpe_llama3/tokenizer.json        byte-level BPE trained with a Llama-3 Split regex + ByteLevel, an
                                   NFC normalizer (Qwen-like), ignore_merges, added tokens with
                                   lstrip / rstrip / single_word / normalized flags, and a
                                   Sequence[ByteLevel, TemplateProcessing(BOS $A)] post-processor.
  bpe_qwen2/tokenizer.json         the Llama-3 vocabulary with Qwen2's regex (single digits) and
                                   no BOS.
  spm_llama/                       SentencePiece BPE (byte_fallback) tokenizer.model +
                                   tokenizer_config.json (add_bos_token, legacy=false).
  spm_llama_legacy/                the same model with legacy=true (Metaspace prepend "always").
  gguf/llama_bpe.gguf, gguf/qwen2.gguf
                                   metadata-only GGUF files (no tensors) carrying the Llama-3
                                   vocabulary as tokenizer.ggml.* keys with pre "llama-bpe" / "qwen2".
  expectations.json                (paths relative to the repository root) for every tokenizer and every text in TEXTS: HF ids with and
                                   without special tokens, with special-token literals left as text
                                   (split_special_tokens), and HF decodes (with and without
                                   skip_special_tokens, and of the ids minus their last one, which
                                   exercises invalid UTF-8). Also the embedded default model's
                                   GGUF (models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf)
                                   when it is present.

Which HF code gives the expected ids:
  * tokenizer.json files: `tokenizers.Tokenizer.from_file` (the Rust library), cross-checked against
    transformers' `PreTrainedTokenizerFast(tokenizer_file=...)`.
  * SentencePiece: transformers 5's `LlamaTokenizer` (which *is* `LlamaTokenizerFast` in v5: a
    `tokenizers` BPE converted from tokenizer.model, Metaspace pre-tokenizer with prepend_scheme
    "first" when legacy=false, "always" when legacy=true). Raw `sentencepiece` ids are stored next to
    them ("sentencepiece_ids") for reference only: they differ where HF does not add the dummy
    prefix (text after a special token; text starting with a space).
  * GGUF: `AutoTokenizer.from_pretrained(dir, gguf_file=...)` (transformers'
    integrations/gguf/gguf_tokenizer_mapping.py).

Rerun (from the repository root, CPU only, about a minute):
  tools/.venv/bin/python tools/golden/make_tokenizer_golden.py
Pinned versions (tools/golden/requirements.txt): tokenizers 0.23.3, transformers 5.24.0,
sentencepiece 0.2.3, gguf 0.19.0. Outputs are deterministic for those versions; commit them.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import random
import shutil
import sys
import unicodedata
from pathlib import Path

import gguf
import sentencepiece as spm
import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "golden" / "tokenizers"
SMOLLM_DIR = REPO / "models" / "smollm2-135m-instruct"
SMOLLM_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

GPT2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# The fixed text set: digits and long digit runs, precomposed and combining accents, CJK, emoji
# (with skin tones, flags and ZWJ sequences), whitespace runs, tabs, \n and \r\n, contractions,
# code, special-token literals inside text, control characters, engine edge cases (\s, case folding),
# then RANDOM_TEXT_COUNT seeded random strings (random_text below).
TEXTS = [
    "",
    "Hello world",
    " Hello world",
    "Hello   world  ",
    "The year 2024 had 366 days; pi is about 3.14159265358979.",
    "1234567890 12 123 1234 00000000000000000001 7",
    "Phone: +1 (555) 010-9999, ID #A1B2C3, 1,000,000.00 $",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber \u00e5ngstr\u00f6m",
    "cafe\u0301 nai\u0308ve re\u0301sume\u0301 u\u0308ber",
    "\u212bngstr\u00f6m \u00c5 A\u030a \u2126 \u1e9b\u0323",
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002\u5317\u4eac\u6b22\u8fce\u4f60\uff01",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc640 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03b3\u03c1\u03ac\u03bc\u03bc\u03b1\u03c4\u03b1",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
    "Emoji: \U0001f600 \U0001f44d\U0001f3fd \u2764\ufe0f \U0001f1eb\U0001f1f7!",
    "ZWJ: \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f3f3\ufe0f\u200d\U0001f308 \U0001f469\U0001f3fd\u200d\U0001f4bb",
    "tab\tseparated\tvalues\t\t",
    "line one\nline two\n\nline four\n",
    "windows\r\nline\r\nendings\r\n",
    "   \n\n   \t  \r\n  ",
    "I'm sure it's fine, they'LL say we'VE done it, DON'T you'd",
    "She said: 'hello' and \"bye\" \u2014 isn't it?",
    "def f(x):\n    return x**2  # square\n\nfor i in range(10):\n\tprint(f(i))\n",
    "int main() { std::vector<int> v{1,2,3}; return v[0] != 0 ? 1 : 0; }",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "https://example.com/path?q=1&r=two#frag user@example.org",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "x<|endoftext|>y <|im_end|> <|im_en <|begin_of_text|><|end_of_text|>",
    "<s>[INST] hello [/INST] answer</s>",
    "<think>reasoning</think> done <think>",
    "mask: a <mask> b  <mask>  [SEP]  c <sw>x <sw> y caf\u00e9 cafe\u0301",
    "a\u00a0b\u2009c\u3000d\u0085e\u200bf\u2028g",
    "end\u0085\u0085 \u0085next\u0085 \u1680x\u180e\u001c\u001d\u001e\u001fy\u000b\u000c z\ufeff",
    "\U0001f44d\u180e't x\u180e'LL \u180e\u180e 's",
    "\u017f \u017fs 'S '\u017f 'LL \u212a",
    "\u0130stanbul \u0131l\u0131k I\u015eIK",
    "abc123def\u6771\u4eac456",
    "a" * 50 + " " + "ab" * 30,
    "\x00\x01\x7f bell\x07 end",
    "\u2211_{i=1}^{n} x_i\u00b2 \u2264 \u221e \u2200x\u2208\u211d \u00bd \u2460",
    "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48 \uff21\uff22\uff23 \uff11\uff12\uff13",
    "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "   leading spaces then text",
    "trailing newline\n",
]


# Random strings (fixed seed) mixing the same ingredients; also used by check_tokenizer_random.py.
RANDOM_PIECES = [
    lambda r: r.choice(["the", "The", "model", "cache", "Hello", "world", "ab", "xyz", "I", "a"]),
    lambda r: str(r.randint(0, 10 ** r.randint(1, 12))),
    lambda r: r.choice([" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u0085", "\u180e",
                        "\u2009", "\u3000", "\u200b", "\u2028", "\ufeff", "\x0b", "\x0c", "\x1c"]),
    lambda r: r.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'\u017f", "n't"]),
    lambda r: r.choice(["\u6771\u4eac", "\u65e5\u672c\u8a9e", "\u4e2d\u6587", "\u3053\u3093\u306b\u3061\u306f",
                        "\ud55c\uad6d\uc5b4", "\u041f\u0440\u0438\u0432\u0435\u0442", "\u0645\u0631\u062d\u0628\u0627",
                        "\u0939\u093f\u0928\u094d\u0926\u0940", "\u0e44\u0e17\u0e22"]),
    lambda r: r.choice(["e\u0301", "a\u0308", "\u00e9", "\u212b", "A\u030a", "\u0130", "\u0131", "\u1e9b\u0323",
                        "\uff21\uff11", "\u00bd", "\u2460", "\u00b2"]),
    lambda r: r.choice(["\U0001f600", "\U0001f44d\U0001f3fd", "\u2764\ufe0f", "\U0001f1eb\U0001f1f7",
                        "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f3f3\ufe0f\u200d\U0001f308"]),
    lambda r: r.choice(["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<s>", "</s>",
                        "[INST]", "[/INST]", "<think>", "</think>", "<mask>", "[SEP]", "<sw>", "<|im_",
                        "caf\u00e9", "cafe\u0301", "<unk>"]),
    lambda r: r.choice(list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~")) * r.randint(1, 3),
    lambda r: assigned_code_point(r),
]


def assigned_code_point(r: random.Random) -> str:
    """A random code point assigned in Unicode 14 (the tables of Debian's PCRE2 10.42 and of Python
    3.11's unicodedata); newer ones can be classified differently by HF's Oniguruma."""
    while True:
        ch = chr(r.choice([r.randint(0x20, 0x7E), r.randint(0xA0, 0x2FF), r.randint(0x300, 0xD7FF),
                           r.randint(0xE000, 0xFFFD), r.randint(0x10000, 0x10FFFF), r.randint(0, 0x1F)]))
        if unicodedata.category(ch) not in ("Cn", "Cs"):
            return ch


def random_text(r: random.Random) -> str:
    return "".join(r.choice(RANDOM_PIECES)(r) for _ in range(r.randint(0, 24)))


RANDOM_TEXT_COUNT = 30
TEXTS += [random_text(random.Random(f"kvaudit-tokenizer-golden-{i}")) for i in range(RANDOM_TEXT_COUNT)]


def training_corpus() -> list[str]:
    """Deterministic text with the same ingredients as TEXTS, so merges exist for all of them."""
    rng = random.Random(20240601)
    english = (
        "the of and to in is that it was for on are as with his they at be this from have or by "
        "one had not but what all were when we there can an your which their said if do will each "
        "about how up out them then she many some so these would other into has more her two like "
        "him see time could no make than first been its who now people my made over did down only "
        "way find use may water long little very after words called just where most know world "
        "hello model token cache memory budget eviction attention query key value layer head "
        "benchmark reproducible result sample seed random number digit answer question context"
    ).split()
    other = (
        "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber stra\u00dfe \u6771\u4eac \u65e5\u672c "
        "\u4e2d\u6587 \u5317\u4eac \u9996\u90fd \u3053\u3093\u306b\u3061\u306f \u30c6\u30ad\u30b9\u30c8 "
        "\ud55c\uad6d\uc5b4 \u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440 "
        "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0645\u0631\u062d\u0628\u0627 "
        "\u05e9\u05dc\u05d5\u05dd \u0939\u093f\u0928\u094d\u0926\u0940 \u0e44\u0e17\u0e22 "
        "\U0001f600 \U0001f44d \u2764\ufe0f \U0001f680"
    ).split()
    code = [
        "def f(x):\n    return x + 1\n",
        "for (int i = 0; i < n; ++i) {\n\tsum += v[i];\n}\n",
        'print("hello, world")\n',
        "if x != None and y >= 0:\n    pass\n",
        '{"id": 12, "name": "value", "ok": true}\n',
        "#include <vector>\nstd::vector<int> v;\n",
    ]
    lines = []
    for _ in range(6000):
        kind = rng.random()
        if kind < 0.55:
            words = [rng.choice(english) for _ in range(rng.randint(4, 16))]
            if rng.random() < 0.3:
                words[0] = words[0].capitalize()
            if rng.random() < 0.25:
                words.insert(rng.randrange(len(words)), str(rng.randint(0, 10 ** rng.randint(1, 9))))
            if rng.random() < 0.2:
                words.insert(rng.randrange(len(words)), rng.choice(["I'm", "it's", "don't", "we've", "they'll", "you'd"]))
            lines.append(" ".join(words) + rng.choice([".", ",", "!", "?", ";", ""]))
        elif kind < 0.75:
            lines.append(" ".join(rng.choice(other) for _ in range(rng.randint(2, 8))))
        elif kind < 0.9:
            lines.append(rng.choice(code))
        else:
            lines.append(rng.choice(["\t", "  ", "    ", "\r\n", "\n\n"]).join(rng.choice(english) for _ in range(5)))
    return lines


def train_bpe(pre_tokenizer, normalizer, special_tokens, corpus, vocab_size=1500) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def save_json(tok_json: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tok_json, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def make_bpe_files(corpus: list[str]) -> dict[str, Path]:
    paths = {}
    # (a1) GPT-2 / SmolLM shape.
    gpt2 = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), None, GPT2_SPECIALS, corpus)
    gpt2.post_processor = processors.ByteLevel(trim_offsets=False)
    gpt2_json = json.loads(gpt2.to_str())
    paths["bpe_gpt2"] = OUT / "bpe_gpt2" / "tokenizer.json"
    save_json(gpt2_json, paths["bpe_gpt2"])

    variant = json.loads(gpt2.to_str())
    variant["model"]["merges"] = [" ".join(pair) for pair in variant["model"]["merges"]]
    variant["pre_tokenizer"] = json.loads(
        pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]
        ).__getstate__()
    )
    variant["post_processor"] = json.loads(
        processors.TemplateProcessing(
            single="<|endoftext|> $A <|im_end|>",
            pair="<|endoftext|> $A <|im_end|> $B:1 <|im_end|>:1",
            special_tokens=[("<|endoftext|>", 0), ("<|im_end|>", 2)],
        ).__getstate__()
    )
    paths["bpe_gpt2_variant"] = OUT / "bpe_gpt2_variant" / "tokenizer.json"
    save_json(variant, paths["bpe_gpt2_variant"])

    # (a2) Llama-3 shape: Split regex + ByteLevel(use_regex=false), NFC (as Qwen2), added tokens.
    nfc = normalizers.Sequence([normalizers.NFC()])
    split = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    llama = train_bpe(split, nfc, LLAMA3_SPECIALS, corpus)
    llama.model.ignore_merges = True
    llama.add_tokens(
        [
            AddedToken("<think>", normalized=False, special=False),
            AddedToken("</think>", normalized=False, special=False),
            AddedToken("cafe\u0301", normalized=True, special=False),
            AddedToken("<sw>", normalized=False, special=False, single_word=True),
        ]
    )
    llama.add_special_tokens(
        [
            AddedToken("<mask>", normalized=False, special=True, lstrip=True),
            AddedToken("[SEP]", normalized=False, special=True, rstrip=True),
        ]
    )
    llama.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                special_tokens=[("<|begin_of_text|>", 0)],
            ),
        ]
    )
    llama_json = json.loads(llama.to_str())
    paths["bpe_llama3"] = OUT / "bpe_llama3" / "tokenizer.json"
    save_json(llama_json, paths["bpe_llama3"])

    qwen = json.loads(llama.to_str())
    qwen["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": QWEN2_SPLIT}
    qwen["post_processor"] = json.loads(processors.ByteLevel(trim_offsets=False).__getstate__())
    paths["bpe_qwen2"] = OUT / "bpe_qwen2" / "tokenizer.json"
    save_json(qwen, paths["bpe_qwen2"])
    return paths


def make_sentencepiece(corpus: list[str]) -> None:
    # Trained from an iterator into memory, so that no temporary path ends up in trainer_spec and
    # the model bytes are reproducible.
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([line.replace("\n", " ") for line in corpus]),
        model_writer=model,
        model_type="bpe",
        vocab_size=1200,
        byte_fallback=True,
        character_coverage=0.9995,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        control_symbols=["[INST]", "[/INST]"],
        user_defined_symbols=["<think>"],
        num_threads=1,
        shuffle_input_sentence=False,
        minloglevel=2,
    )
    for name, legacy in (("spm_llama", False), ("spm_llama_legacy", True)):
        directory = OUT / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tokenizer.model").write_bytes(model.getvalue())
        config = {
            "add_bos_token": True,
            "add_eos_token": False,
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "legacy": legacy,
            "tokenizer_class": "LlamaTokenizer",
        }
        (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")


def make_gguf_files(llama_json: dict) -> dict[str, Path]:
    """Metadata-only GGUF files holding the Llama-3-shaped vocabulary, as llama.cpp writes one."""
    size = max(llama_json["model"]["vocab"].values()) + 1
    for token in llama_json["added_tokens"]:
        size = max(size, token["id"] + 1)
    tokens = [None] * size
    types = [1] * size  # 1 NORMAL
    for content, index in llama_json["model"]["vocab"].items():
        tokens[index] = content
    for token in llama_json["added_tokens"]:
        tokens[token["id"]] = token["content"]
        types[token["id"]] = 3 if token["special"] else 4  # 3 CONTROL, 4 USER_DEFINED
    assert all(t is not None for t in tokens)
    merges = [" ".join(pair) for pair in llama_json["model"]["merges"]]
    paths = {}
    for name, pre, add_bos in (("gguf_llama_bpe", "llama-bpe", True), ("gguf_qwen2", "qwen2", False)):
        path = OUT / "gguf" / f"{name.removeprefix('gguf_')}.gguf"
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_name(f"kvaudit tokenizer fixture ({pre})")
        writer.add_context_length(2048)
        writer.add_embedding_length(64)
        writer.add_block_count(1)
        writer.add_feed_forward_length(128)
        writer.add_head_count(4)
        writer.add_head_count_kv(4)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_vocab_size(size)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(pre)
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_bos_token_id(llama_json["model"]["vocab"]["<|begin_of_text|>"])
        writer.add_eos_token_id(llama_json["model"]["vocab"]["<|end_of_text|>"])
        writer.add_eot_token_id(llama_json["model"]["vocab"]["<|im_end|>"])
        writer.add_add_bos_token(add_bos)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        paths[name] = path
    return paths


def hf_cases(encode, decode, texts) -> list[dict]:
    """encode(text, add_special_tokens, split_special_tokens) -> ids; decode(ids, skip) -> str."""
    cases = []
    for text in texts:
        ids = encode(text, True, False)
        plain = encode(text, False, False)
        literal = encode(text, False, True)
        case = {
            "ids": ids,
            "ids_without_special": plain,
            "ids_special_as_text": literal,
            "decoded": decode(ids, False),
            "decoded_skip_special": decode(ids, True),
        }
        if len(plain) > 1:
            case["decoded_without_last"] = decode(plain[:-1], False)
        cases.append(case)
    return cases


def rust_tokenizer_cases(path: Path) -> list[dict]:
    tok = Tokenizer.from_file(str(path))

    def encode(text, add_special, split_special):
        tok.encode_special_tokens = split_special
        return tok.encode(text, add_special_tokens=add_special).ids

    cases = hf_cases(encode, lambda ids, skip: tok.decode(ids, skip_special_tokens=skip), TEXTS)
    # Cross-check: transformers over the same file gives the same ids.
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    for text, case in zip(TEXTS, cases):
        assert fast(text, add_special_tokens=True)["input_ids"] == case["ids"], (path, text)
        assert fast(text, add_special_tokens=False)["input_ids"] == case["ids_without_special"], (path, text)
        assert fast.decode(case["ids"]) == case["decoded"], (path, text)
    return cases


def transformers_cases(tok) -> list[dict]:
    def encode(text, add_special, split_special):
        return tok(text, add_special_tokens=add_special, split_special_tokens=split_special)["input_ids"]

    return hf_cases(encode, lambda ids, skip: tok.decode(ids, skip_special_tokens=skip), TEXTS)


def drop_tokens_beyond_vocabulary(tok, n_tokens: int) -> list[str]:
    """Remove added tokens whose id is past the GGUF's token list from an HF GGUF tokenizer.

    transformers builds a GGUF "gpt2" vocabulary through GPT2Tokenizer, whose default
    unk/bos/eos token "<|endoftext|>" gets added as a special token even when the vocabulary has
    no such token; it then receives id len(tokens), past the model's embedding rows. The C++
    loader does not invent that id, so the expectations come from HF's tokenizer without it (the
    rest of HF's pipeline unchanged). Returns the dropped tokens, recorded in expectations.json.
    """
    state = json.loads(tok.backend_tokenizer.to_str())
    extra = [t["content"] for t in state["added_tokens"] if t["id"] >= n_tokens]
    if extra:
        state["added_tokens"] = [t for t in state["added_tokens"] if t["id"] < n_tokens]
        tok._tokenizer = Tokenizer.from_str(json.dumps(state))
    return extra


def gguf_entry(directory: Path, file_name: str, path_in_json: str) -> dict:
    tok = transformers.AutoTokenizer.from_pretrained(str(directory), gguf_file=file_name)
    as_is = transformers_cases(tok)
    n_tokens = int(gguf.GGUFReader(str(directory / file_name)).fields["tokenizer.ggml.tokens"].data.__len__())
    dropped = drop_tokens_beyond_vocabulary(tok, n_tokens)
    cases = transformers_cases(tok)
    for text, case, original in zip(TEXTS, cases, as_is):
        if case != original:
            assert any(d in text for d in dropped), (file_name, text)
            case["hf_ids_with_tokens_beyond_vocabulary"] = original["ids"]
    return {
        "path": path_in_json,
        "reference": "transformers.AutoTokenizer.from_pretrained(gguf_file=...)",
        "hf_tokens_beyond_vocabulary_dropped": dropped,
        "cases": cases,
    }


def main() -> int:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    corpus = training_corpus()
    expectations = {
        "generator": "tools/golden/make_tokenizer_golden.py",
        "versions": {
            "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
            "sentencepiece": spm.__version__,
            "gguf": importlib.metadata.version("gguf"),
        },
        "texts": TEXTS,
        "tokenizers": {},
    }
    entries = expectations["tokenizers"]

    bpe_paths = make_bpe_files(corpus)
    for name, path in bpe_paths.items():
        entries[name] = {
            "path": str(path.relative_to(REPO)),
            "reference": "tokenizers.Tokenizer.from_file (== transformers.PreTrainedTokenizerFast)",
            "cases": rust_tokenizer_cases(path),
        }

    make_sentencepiece(corpus)
    for name in ("spm_llama", "spm_llama_legacy"):
        directory = OUT / name
        tok = transformers.LlamaTokenizer.from_pretrained(str(directory))
        sp = spm.SentencePieceProcessor(model_file=str(directory / "tokenizer.model"))
        cases = transformers_cases(tok)
        for text, case in zip(TEXTS, cases):
            case["sentencepiece_ids"] = sp.encode(text)
        entries[name] = {
            "path": str((OUT / name).relative_to(REPO)),
            "reference": f"transformers.LlamaTokenizer (tokenizers backend), legacy={tok.legacy}",
            "cases": cases,
        }

    llama_json = json.loads((bpe_paths["bpe_llama3"]).read_text(encoding="utf-8"))
    for name, path in make_gguf_files(llama_json).items():
        entries[name] = gguf_entry(path.parent, path.name, str(path.relative_to(REPO)))

    if (SMOLLM_DIR / SMOLLM_GGUF).is_file():
        # Path relative to the repository root (the model is fetched by tools/fetch_default_model.sh).
        entries["gguf_smollm2"] = gguf_entry(SMOLLM_DIR, SMOLLM_GGUF, "models/smollm2-135m-instruct/" + SMOLLM_GGUF)
    else:
        print(f"warning: {SMOLLM_DIR / SMOLLM_GGUF} is absent; no gguf_smollm2 expectations", file=sys.stderr)

    (OUT / "expectations.json").write_text(
        json.dumps(expectations, ensure_ascii=False, indent=None, separators=(",", ":")) + "\n", encoding="utf-8"
    )
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {OUT} ({total / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
