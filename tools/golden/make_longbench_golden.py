#!/usr/bin/env python3
"""Golden fixtures for the LongBench loader (suite/benchmarks/longbench, tests/benchmarks/longbench).

What it writes, under tests/golden/longbench/:
  data/<task>.jsonl        tiny LongBench-format files written here (NOT LongBench data): three
                           records per English task (a short one shaped like the real task, one
                           whose text is full of braces and non-ASCII characters, one long one that
                           needs truncation), and qasper_e.jsonl for the LongBench-E naming.
  malformed/<case>/<task>.jsonl
                           one broken file per reader error (the C++ test lists what each must say).
  templates_expected.json  the upstream tables, extracted from the reference sources without
                           running them (json / ast.literal_eval), and for every sample record:
                           the LongBench prompt `dataset2prompt[task].format(**record)` and kvpress's
                           context / question / answer prefix, computed by Python's own str.format
                           and str.removesuffix exactly as the reference scripts do.
  truncation_expected.json pred.py's middle truncation of every sample record's prompt at a few
                           limits, by transformers (the HF reference the C++ tokenizers follow):
                           ids = tok(prompt).input_ids; if len(ids) > L: half = int(L/2);
                           prompt = tok.decode(ids[:half], skip_special_tokens=True) +
                                    tok.decode(ids[-half:], skip_special_tokens=True)
                           with the original length, the truncated text and its re-tokenized length.
                           Tokenizers: tests/golden/tokenizers/{bpe_gpt2,bpe_llama3}/tokenizer.json
                           (PreTrainedTokenizerFast), tests/golden/tokenizers/spm_llama
                           (LlamaTokenizer), and the default SmolLM2 GGUF when present
                           (AutoTokenizer.from_pretrained(gguf_file=...)).

Reference sources (pinned commits; read with `git show <commit>:<path>`, nothing is executed):
  THUDM/LongBench @ 2e00731f8d0b: LongBench/config/dataset2prompt.json, dataset2maxlen.json
  NVIDIA/kvpress  @ 8bb29b9:      evaluation/benchmarks/longbench/create_huggingface_dataset.py
                                  (its context_prefix, question_template, answer_prefix dicts)

Rerun from the repository root (CPU only, under a minute), with clones of the two repositories:
  tools/.venv/bin/python tools/golden/make_longbench_golden.py \
      --longbench-repo /path/to/LongBench --kvpress-repo /path/to/kvpress
`--no-truncation` skips truncation_expected.json, so Debian's /usr/bin/python3 (no transformers)
can regenerate the rest. Versions: tools/golden/requirements.txt (transformers 5.24.0,
tokenizers 0.23.3). Outputs are deterministic; commit them.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "golden" / "longbench"
LONGBENCH_COMMIT = "2e00731f8d0b"
KVPRESS_COMMIT = "8bb29b9"
ENGLISH_TASKS = [
    "narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "gov_report",
    "qmsum", "multi_news", "trec", "triviaqa", "samsum", "passage_count", "passage_retrieval_en",
    "lcc", "repobench-p",
]
TREC_CLASSES = ["Abbreviation", "Animal", "Description", "Definition", "Location", "Number"]
# Limits for the truncation goldens: two that cut every record (one odd), one that cuts only the
# long records, one that cuts none.
TRUNCATION_LIMITS = [64, 151, 400, 4096]
SMOLLM_GGUF = REPO / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def kvpress_tables(source: str) -> dict:
    """The three dict literals of create_huggingface_dataset.py, without running the script."""
    wanted = {"context_prefix", "question_template", "answer_prefix"}
    tables = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in wanted:
                tables[target.id] = ast.literal_eval(node.value)
    assert set(tables) == wanted, f"missing tables: {wanted - set(tables)}"
    return tables


# ---- sample records (written here; the words are generic English, not LongBench text) ------------

WORDS = ("the river city council report budget meeting school story character letter ship harbor "
         "winter market garden bridge station museum paper experiment result method question "
         "answer village mountain doctor teacher engineer company product summer night morning "
         "train road forest island library music painting history science").split()
EXTRA = ["café", "naïve", "Zürich", "東京", "👍🏽", "{context}", "{input}", "{{x}}", "}", "{",
         "<|im_start|>", "3.14159", "1,024", "--", "e.g."]


def prose(r: random.Random, n_words: int, tricky: bool) -> str:
    out, line = [], []
    for i in range(n_words):
        w = r.choice(EXTRA) if tricky and r.random() < 0.08 else r.choice(WORDS)
        line.append(w.capitalize() if not line else w)
        if len(line) >= r.randint(8, 16):
            out.append(" ".join(line) + ".")
            line = []
        if len(out) == 4 and i % 7 == 0:
            out.append("\n")
    if line:
        out.append(" ".join(line) + ".")
    return " ".join(out).replace(" \n ", "\n")


def code(r: random.Random, n_lines: int, tricky: bool) -> str:
    lines = []
    for i in range(n_lines):
        name = r.choice(WORDS)
        lines.append(r.choice([
            f"def {name}_{i}(x):",
            f"    return {{'{name}': x + {i}}}",
            f"    # {name} {{not a field}}" if tricky else f"    # {name}",
            f"    value = f\"{{x}}-{name}\"",
            f"class {name.capitalize()}{i}:",
            f"        self.{name} = [{i}, {i + 1}]",
        ]))
    return "\n".join(lines) + "\n"


def task_fields(task: str, r: random.Random, size: int, tricky: bool) -> dict:
    """input, context, answers, all_classes shaped like the real task's records."""
    text = prose(r, size, tricky)
    q = prose(r, 9, tricky).rstrip(".") + "?"
    a = [r.choice(WORDS) + " " + r.choice(WORDS)]
    if task in ("narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique"):
        if task in ("hotpotqa", "2wikimqa", "musique"):
            text = "\n".join(f"Passage {i + 1}:\n{prose(r, size // 3, tricky)}" for i in range(3))
        return {"input": q, "context": text, "answers": a, "all_classes": None}
    if task in ("gov_report", "multi_news"):
        return {"input": "", "context": text, "answers": [prose(r, 30, False)], "all_classes": None}
    if task == "qmsum":
        return {"input": "Summarize the discussion about the " + r.choice(WORDS) + ".",
                "context": text, "answers": [prose(r, 25, False)], "all_classes": None}
    if task == "trec":
        shots = "\n".join(f"Question: {prose(r, 7, tricky).rstrip('.')}?\nType: {r.choice(TREC_CLASSES)}"
                          for _ in range(max(3, size // 20)))
        return {"input": f"Question: {q}\nType:", "context": shots,
                "answers": [r.choice(TREC_CLASSES)], "all_classes": TREC_CLASSES}
    if task == "triviaqa":
        shots = "\n\n".join(f"Passage: {prose(r, 25, tricky)}\nQuestion: {q}\nAnswer: {r.choice(WORDS)}"
                            for _ in range(max(2, size // 40)))
        return {"input": f"Passage: {prose(r, 30, tricky)}\nQuestion: {q}\nAnswer:",
                "context": shots, "answers": a, "all_classes": None}
    if task == "samsum":
        shots = "\n\n".join(f"Dialogue: Ann: {prose(r, 12, tricky)}\nBob: {prose(r, 10, tricky)}\n"
                            f"Summary: {prose(r, 10, False)}" for _ in range(max(2, size // 40)))
        return {"input": f"Dialogue: Ann: {prose(r, 12, tricky)}\nBob: {prose(r, 8, tricky)}\nSummary:",
                "context": shots, "answers": [prose(r, 12, False)], "all_classes": None}
    if task == "passage_count":
        paras = [prose(r, 20, tricky) for _ in range(4)]
        seq = [paras[i % 4] for i in range(max(5, size // 20))]
        ctx = "\n\n".join(f"Paragraph {i + 1}: {p}" for i, p in enumerate(seq))
        return {"input": "", "context": ctx, "answers": ["4"], "all_classes": None}
    if task == "passage_retrieval_en":
        n = max(3, size // 25)
        paras = [prose(r, 22, tricky) for _ in range(n)]
        ctx = "\n\n".join(f"Paragraph {i + 1}: {p}" for i, p in enumerate(paras))
        k = r.randrange(n)
        return {"input": paras[k][:80], "context": ctx, "answers": [f"Paragraph {k + 1}"],
                "all_classes": None}
    if task == "lcc":
        ctx = code(r, max(6, size // 6), tricky)
        return {"input": "", "context": ctx, "answers": [f"    return {r.choice(WORDS)}"],
                "all_classes": None}
    if task == "repobench-p":
        ctx = "# path: pkg/util.py\n" + code(r, max(6, size // 8), tricky)
        return {"input": "# path: pkg/main.py\n" + code(r, 4, tricky), "context": ctx,
                "answers": [f"        self.{r.choice(WORDS)} = None"], "all_classes": None}
    raise ValueError(task)


def make_record(task: str, dataset: str, index: int, size: int, tricky: bool) -> dict:
    r = random.Random(f"{task}/{index}")
    f = task_fields(task, r, size, tricky)
    language = "code" if task in ("lcc", "repobench-p") else "en"
    return {"input": f["input"], "context": f["context"], "answers": f["answers"],
            "length": len((f["input"] + " " + f["context"]).split()), "dataset": dataset,
            "language": language, "all_classes": f["all_classes"],
            "_id": f"kvaudit-{task}-{index:02d}"}


def write_jsonl(path: Path, records: list, raw_lines: list | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(rec, ensure_ascii=False).encode() for rec in records]
    if raw_lines is not None:
        lines = raw_lines
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def sample_data() -> dict:
    data = {}
    for task in ENGLISH_TASKS:
        data[task] = [make_record(task, task, 0, 60, False), make_record(task, task, 1, 80, True),
                      make_record(task, task, 2, 400, True)]
    # LongBench-E file naming; the dataset field is accepted as either spelling.
    data["qasper_e"] = [make_record("qasper", "qasper_e", 0, 60, False),
                        make_record("qasper", "qasper", 1, 90, True)]
    return data


def malformed_cases(good: dict) -> dict:
    """case -> (task, list of raw lines). The C++ test states what each must report."""
    def dumps(rec):
        return json.dumps(rec, ensure_ascii=False).encode()

    base = good["narrativeqa"][0]
    trec = good["trec"][0]

    def variant(**changes):
        rec = dict(base)
        for k, v in changes.items():
            if v is ...:
                del rec[k]
            else:
                rec[k] = v
        return rec

    second = dict(base, _id="kvaudit-narrativeqa-99")
    return {
        "not_json": ("narrativeqa", [dumps(base), b'{"input": "x", "context": '] ),
        "not_object": ("narrativeqa", [b'["input", "context"]']),
        "missing_answers": ("narrativeqa", [dumps(base), dumps(variant(answers=...))]),
        "length_string": ("narrativeqa", [dumps(variant(length="12"))]),
        "length_float": ("narrativeqa", [dumps(variant(length=1.5))]),
        "length_negative": ("narrativeqa", [dumps(variant(length=-3))]),
        "answers_not_strings": ("narrativeqa", [dumps(variant(answers=["ok", 7]))]),
        "answers_empty": ("narrativeqa", [dumps(variant(answers=[]))]),
        "context_null": ("narrativeqa", [dumps(variant(context=None))]),
        "unknown_field": ("narrativeqa", [dumps(variant(pred="x"))]),
        "duplicate_field": ("narrativeqa", [dumps(base)[:-1] + b', "input": "again"}']),
        "unknown_dataset": ("narrativeqa", [dumps(variant(dataset="narrative_qa"))]),
        "other_task_dataset": ("narrativeqa", [dumps(base), dumps(dict(second, dataset="hotpotqa"))]),
        "bad_language": ("narrativeqa", [dumps(variant(language="english"))]),
        "trec_without_classes": ("trec", [dumps(dict(trec, all_classes=None))]),
        "all_classes_string": ("trec", [dumps(dict(trec, all_classes="Animal,Number"))]),
        "duplicate_id": ("narrativeqa", [dumps(base), dumps(second), dumps(base)]),
        "empty_id": ("narrativeqa", [dumps(variant(_id=""))]),
        "blank_line": ("narrativeqa", [dumps(base), b"", dumps(second)]),
        "invalid_utf8": ("narrativeqa", [dumps(base), dumps(second).replace(b"kvaudit-", b"kv\xffaudit-", 1)]),
        "deep_nesting": ("narrativeqa", [dumps(base)[:-1] + b', "x": ' + b"[" * 50 + b"]" * 50 + b"}"]),
        "empty_file": ("narrativeqa", []),
    }


# ---- expectations -----------------------------------------------------------------------------

def kvpress_split(task: str, rec: dict, tables: dict) -> dict:
    """create_huggingface_dataset.py's three columns for one record."""
    context = tables["context_prefix"][task].format(**rec)
    suffix = {"trec": "Type:", "triviaqa": "Answer:", "samsum": "Summary:"}.get(task)
    if suffix is not None:
        question = tables["question_template"][task].format(input=rec["input"].removesuffix(suffix))
    else:
        question = tables["question_template"][task].format(**rec)
    return {"context": context, "question": question,
            "answer_prefix": tables["answer_prefix"].get(task, "")}


def base_task(name: str) -> str:
    return name[:-2] if name.endswith("_e") else name


def templates_expected(args, data: dict) -> dict:
    d2p = json.loads(git_show(args.longbench_repo, LONGBENCH_COMMIT, "LongBench/config/dataset2prompt.json"))
    d2m = json.loads(git_show(args.longbench_repo, LONGBENCH_COMMIT, "LongBench/config/dataset2maxlen.json"))
    tables = kvpress_tables(git_show(args.kvpress_repo, KVPRESS_COMMIT,
                                     "evaluation/benchmarks/longbench/create_huggingface_dataset.py"))
    renders = []
    for file_task, records in data.items():
        task = base_task(file_task)
        for rec in records:
            split = kvpress_split(task, rec, tables)
            renders.append({"file_task": file_task, "_id": rec["_id"],
                            "prompt": d2p[task].format(**rec), **split})
    return {
        "sources": {"THUDM/LongBench": LONGBENCH_COMMIT, "NVIDIA/kvpress": KVPRESS_COMMIT},
        "dataset2prompt": d2p, "dataset2maxlen": d2m,
        "kvpress_context_prefix": tables["context_prefix"],
        "kvpress_question_template": tables["question_template"],
        "kvpress_answer_prefix": tables["answer_prefix"],
        "renders": renders,
    }


def truncation_expected(data: dict, d2p: dict) -> dict:
    import transformers  # tools/.venv only

    toks = {
        "tests/golden/tokenizers/bpe_gpt2/tokenizer.json": transformers.PreTrainedTokenizerFast(
            tokenizer_file=str(REPO / "tests/golden/tokenizers/bpe_gpt2/tokenizer.json")),
        "tests/golden/tokenizers/bpe_llama3/tokenizer.json": transformers.PreTrainedTokenizerFast(
            tokenizer_file=str(REPO / "tests/golden/tokenizers/bpe_llama3/tokenizer.json")),
        "tests/golden/tokenizers/spm_llama": transformers.LlamaTokenizer.from_pretrained(
            str(REPO / "tests/golden/tokenizers/spm_llama")),
    }
    if SMOLLM_GGUF.exists():
        toks["models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"] = (
            transformers.AutoTokenizer.from_pretrained(str(SMOLLM_GGUF.parent), gguf_file=SMOLLM_GGUF.name))
    else:
        print(f"note: {SMOLLM_GGUF} absent; no SmolLM2 truncation goldens", file=sys.stderr)
    out = []
    for path, tok in toks.items():
        cases = []
        for file_task, records in data.items():
            task = base_task(file_task)
            for rec in records:
                prompt = d2p[task].format(**rec)
                ids = tok(prompt, truncation=False).input_ids
                for limit in TRUNCATION_LIMITS:
                    text, truncated = prompt, len(ids) > limit
                    if truncated:
                        half = int(limit / 2)
                        text = (tok.decode(ids[:half], skip_special_tokens=True)
                                + tok.decode(ids[-half:], skip_special_tokens=True))
                    case = {"file_task": file_task, "_id": rec["_id"], "max_length": limit,
                            "original_tokens": len(ids), "truncated": truncated,
                            "retokenized_tokens": len(tok(text, truncation=False).input_ids)}
                    # Keep the fixture small: texts only where truncation happened.
                    if truncated:
                        case["text"] = text
                    cases.append(case)
        out.append({"tokenizer": path, "reference": type(tok).__name__, "cases": cases})
    return {"transformers": transformers.__version__, "limits": TRUNCATION_LIMITS, "tokenizers": out}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--longbench-repo", type=Path, required=True, help="clone of THUDM/LongBench")
    p.add_argument("--kvpress-repo", type=Path, required=True, help="clone of NVIDIA/kvpress")
    p.add_argument("--no-truncation", action="store_true", help="skip truncation_expected.json")
    args = p.parse_args()

    data = sample_data()
    for file_task, records in data.items():
        write_jsonl(OUT / "data" / f"{file_task}.jsonl", records)
    for case, (task, lines) in malformed_cases(data).items():
        write_jsonl(OUT / "malformed" / case / f"{task}.jsonl", [], raw_lines=lines)

    expected = templates_expected(args, data)
    (OUT / "templates_expected.json").write_text(
        json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if not args.no_truncation:
        trunc = truncation_expected(data, expected["dataset2prompt"])
        (OUT / "truncation_expected.json").write_text(
            json.dumps(trunc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
