#!/usr/bin/env python3
"""Golden fixtures for runners/model/chat (chat templates and the kvpress prompt split).

What it writes: tests/golden/chat/chat_golden.json, read by tests/chat/chat_golden_test.cpp.
  * renders: every built-in family x a set of conversations, rendered by transformers' own
    chat-template machinery (PreTrainedTokenizerFast.apply_chat_template(tokenize=False)) on the
    family's REAL template; an entry whose real template raises records "error" instead.
  * splits: kvpress's context / question / answer-prefix strings, computed by re-implementing
    KVPressTextGenerationPipeline.preprocess (NVIDIA/kvpress 8bb29b9, kvpress/pipeline.py) and
    evaluate.py's query_aware step on top of the same apply_chat_template, for every family and
    for "no chat template".
  * templates: where each family's real template came from and its SHA-256. The template texts
    themselves are NOT committed; they are fetched again on every run.
  * detection: what the C++ detector (tests/chat/detect_chat_template_tool) answers for every real
    template fetched (about 110: llama.cpp's models/templates/, the templates quoted in llama.cpp's
    tests/test-chat-template.cpp, mistral-common's generated templates, the SmolLM2 GGUF), and,
    for every template it assigns to a family, whether HF renders all the conversations above
    exactly like that family's golden strings. The script fails if a family's own template is not
    detected as that family or if any detected template renders differently: detection is checked
    here, against the real texts, because the C++ test cannot have them.

Sources (only PyPI is reachable; nothing is fetched from a model hub):
  * llama-cpp-python==0.3.36 sdist (vendors llama.cpp): models/templates/
      meta-llama-Llama-3.1-8B-Instruct.jinja          -> llama3
      Qwen-Qwen2.5-7B-Instruct.jinja                  -> qwen2
      deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja  -> deepseek-r1-distill. The R1-Distill models
        (Qwen-1.5B/7B/14B/32B, Llama-8B/70B) ship one template text; llama.cpp's copy of the
        Qwen-32B one was edited there (an `enable_thinking` switch that HF's original does not
        have and that closes the think block under kvpress's enable_thinking=False), so the
        unedited Llama-8B copy is used. The script records how the edited copy differs.
    tests/test-chat-template.cpp, the case "Mistral-Large-Instruct-2407 (mistralai 'v3'
      template ...)"                                    -> mistral-v3. No PyPI package found ships
        Mistral-7B-Instruct-v0.3's tokenizer_config.json; this is the HF template Mistral wrote in
        2024 for its v3 (SentencePiece) instruct models, quoted verbatim by llama.cpp's test. It is
        cross-checked against mistral-common (Mistral's reference implementation, "ground truth"
        per Mistral's docs): mistral-common==1.13.1 generates its own v3 SentencePiece Jinja
        template, which HF renders too; the golden JSON lists the conversations on which the two
        agree. They agree on every single-user-turn conversation (with or without a system
        message), which is what kvpress sends; they differ where mistral-common keeps assistant
        text untrimmed, skips an empty system message, keeps the system message when the
        conversation ends with an assistant turn, and accepts two user turns in a row or a late
        system message (which the 2024 template refuses).
  * models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf, tokenizer.chat_template
    (read with the gguf package)                        -> chatml

How to rerun (from the repository root; needs network access to PyPI, about a minute):
    cmake --build build-<you> --target detect_chat_template_tool
    tools/.venv/bin/python tools/golden/make_chat_golden.py \
        --detect-tool build-<you>/tests/chat/detect_chat_template_tool
The venv is tools/golden/requirements.txt (transformers, tokenizers, jinja2, gguf). mistral-common
and the packages it imports (pillow, jsonschema, tiktoken, pydantic-extra-types, ...) are
installed by this script into a temporary --target directory, not into the venv.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import jinja2
import transformers
from gguf import GGUFReader
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

REPO = Path(__file__).resolve().parents[2]
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
MISTRAL_COMMON = "mistral-common==1.13.1"
# Packages mistral-common imports; only needed to generate its template text.
MISTRAL_COMMON_IMPORTS = [
    "pillow", "jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "attrs",
    "tiktoken", "regex", "pydantic-extra-types", "pycountry",
]
SMOLLM2_GGUF = REPO / "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
KVPRESS_REFERENCE = {
    "repository": "NVIDIA/kvpress",
    "commit": "8bb29b9",
    "files": ["kvpress/pipeline.py (KVPressTextGenerationPipeline.preprocess)",
              "evaluation/evaluate.py (query_aware)"],
    "separator": "'#' * (len(context) + 10)",
}

R1_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
R1_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"

# family -> special tokens the real tokenizer passes to the template (tokenizer_config.json).
FAMILY_TOKENS = {
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen2": {"eos_token": "<|im_end|>"},  # Qwen2.5 has no bos_token
    "mistral-v3": {"bos_token": "<s>", "eos_token": "</s>"},
    "deepseek-r1-distill": {"bos_token": R1_BOS, "eos_token": R1_EOS},
    "chatml": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
}
FAMILY_SOURCES = {
    "llama3": "models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
    "qwen2": "models/templates/Qwen-Qwen2.5-7B-Instruct.jinja",
    "deepseek-r1-distill": "models/templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    "mistral-v3": "tests/test-chat-template.cpp: Mistral-Large-Instruct-2407 (mistralai 'v3' template",
    "chatml": "SmolLM2-135M-Instruct.Q4_1.gguf: tokenizer.chat_template",
}
LLAMA_CPP_PREFIX = "vendor/llama.cpp/"


def msg(role: str, content: str) -> dict:
    return {"role": role, "content": content}


# name -> (messages, add_generation_prompt, extra template kwargs)
CONVERSATIONS = {
    "user_only": ([msg("user", "What is the capital of France?")], True, {}),
    "system_user": ([msg("system", "You are a concise assistant."),
                     msg("user", "Name three primes.")], True, {}),
    "multiline_spaces": ([msg("user", "  Line one\nLine two\n\n\tindented line three  \n")], True, {}),
    "unicode": ([msg("system", " Syst\u00e8me : r\u00e9ponds en fran\u00e7ais. "),
                 msg("user", "\u3000Gr\u00f6\u00dfe \u6771\u4eac \U0001F600 \u2014 na\u00efve caf\u00e9\u00a0")],
                True, {}),
    "unicode_whitespace_edges": ([msg("user", "\u2003\u00a0\u200bzero-width stays\u2029\u0085")], True, {}),
    "multi_turn": ([msg("system", "Be brief."), msg("user", "Hi"),
                    msg("assistant", "  Hello! How can I help?  "), msg("user", "What is 2+2?")],
                   True, {}),
    "multi_turn_no_generation_prompt": ([msg("system", "Be brief."), msg("user", "Hi"),
                                         msg("assistant", "  Hello! How can I help?  "),
                                         msg("user", "What is 2+2?")], False, {}),
    "assistant_with_think": ([msg("user", "Solve 1+1."),
                              msg("assistant", "<think>\nsimple\n</think>\n\nThe answer is 2."),
                              msg("user", "And 2+2?")], True, {}),
    "empty_system": ([msg("system", ""), msg("user", "Hello")], True, {}),
    "control_token_literals": ([msg("user", "Ignore this: <|eot_id|><|im_end|>[/INST]</s>"
                                     "<\uff5cUser\uff5c><think> end")], True, {}),
    "custom_date_string": ([msg("user", "What is today's date?")], True, {"date_string": "05 Mar 2026"}),
    "ends_with_assistant": ([msg("system", "S"), msg("user", "Q"), msg("assistant", "A")], False, {}),
    "system_only": ([msg("system", "Only a system message.")], True, {}),
    "whitespace_only_user": ([msg("user", " \n\t ")], True, {}),
    "two_user_turns": ([msg("user", "first"), msg("user", "second")], True, {}),
    "late_system": ([msg("user", "a"), msg("assistant", "b"), msg("system", "late system"),
                     msg("user", "c")], True, {}),
}

# (name, context, question, answer_prefix, system)
SPLITS = [
    ("ruler_like", "The capital of France is Paris. The capital of Japan is Tokyo.\n",
     "\nQuestion: What is the capital of Japan?", " Answer:", None),
    ("leading_space_unicode", "  \u3000Le caf\u00e9 co\u00fbte 3 \u20ac.\n",
     "Combien co\u00fbte le caf\u00e9 ? ", " R\u00e9ponse :", None),
    ("context_ends_with_hashes", "Section ##", "Q?", "", None),
    ("empty_context", "", "Question only?", "Answer:", None),
    ("with_system", "Document text.", "What does it say?", "", "You are a careful reader."),
]
NO_TEMPLATE_BOS = ["<|begin_of_text|>", ""]


def make_tokenizer(template: str, tokens: dict) -> PreTrainedTokenizerFast:
    """A tokenizer whose only role is to carry the chat template and special tokens to HF's
    apply_chat_template, exactly as a real tokenizer with that tokenizer_config.json would."""
    vocab = {"<unk>": 0}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="<unk>")),
                                   chat_template=template, **tokens)


def hf_render(tok, messages, add_generation_prompt, kwargs):
    """HF's rendering, or ("error", message) when the real template raises."""
    try:
        return ("text", tok.apply_chat_template(messages, tokenize=False,
                                                add_generation_prompt=add_generation_prompt,
                                                **kwargs))
    except jinja2.exceptions.TemplateError as e:
        return ("error", f"{type(e).__name__}: {e}")


def kvpress_strings(tok, bos, context, question, answer_prefix, query_aware, system):
    """KVPressTextGenerationPipeline.preprocess (kvpress 8bb29b9) on strings, after evaluate.py's
    query_aware step; returns (context string, question string, question_suffix)."""
    if query_aware:  # evaluate.py: df.context = df.context + df.question; df.question = ""
        context = context + question
        question = ""
    if tok is None:  # self.tokenizer.chat_template is None
        context = bos + context
        question_suffix = "\n"
    else:
        separator = "#" * (len(context) + 10)
        messages = [] if system is None else [msg("system", system)]
        messages.append(msg("user", context + separator))
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                           enable_thinking=False)
        context, question_suffix = rendered.split(separator)
    return context, question + question_suffix + answer_prefix, question, question_suffix


def unescape_cpp_literal(text: str, start: int) -> tuple[str, int]:
    """Parses the C++ string literal whose opening quote is at text[start]; returns (value, end)."""
    assert text[start] == '"'
    out = []
    i = start + 1
    simple = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "0": "\0"}
    while text[i] != '"':
        c = text[i]
        if c == "\\":
            e = text[i + 1]
            if e in simple:
                out.append(simple[e])
                i += 2
            elif e == "x":
                m = re.match(r"[0-9a-fA-F]+", text[i + 2:])
                out.append(chr(int(m.group(0), 16)))
                i += 2 + len(m.group(0))
            else:
                raise ValueError(f"unsupported escape \\{e} at {i}")
        else:
            out.append(c)
            i += 1
    return "".join(out), i + 1


def templates_from_llama_cpp_test(source: str) -> list[tuple[str, str]]:
    """(case name, template text) for every template quoted in tests/test-chat-template.cpp."""
    found = []
    marker = "/* .template_str= */"
    for m in re.finditer(re.escape(marker), source):
        line_start = source.rfind("\n", 0, m.start()) + 1
        if source[line_start:m.start()].lstrip().startswith("//"):
            continue  # commented-out case
        i = m.end()
        while source[i].isspace():
            i += 1
        if source.startswith("U8C(", i):
            i += 4
        elif source.startswith("u8", i):
            i += 2
        value, _ = unescape_cpp_literal(source, i)
        name_at = source.rfind("/* .name= */", 0, m.start())
        previous = source.rfind(marker, 0, m.start())
        name = f"case at offset {m.start()}"
        if name_at > previous:
            j = name_at + len("/* .name= */")
            while source[j].isspace():
                j += 1
            name, _ = unescape_cpp_literal(source, j)
        found.append((name, value))
    return found


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, stdout=subprocess.DEVNULL)


def fetch_llama_cpp(workdir: Path) -> tuple[dict[str, str], str]:
    """{path under vendor/llama.cpp: text} of models/templates/*.jinja, and the test source."""
    pip("download", "--no-binary", ":all:", "--no-deps", LLAMA_CPP_PYTHON, "-d", str(workdir))
    archive = next(workdir.glob("llama_cpp_python-*.tar.gz"))
    templates, test_source = {}, None
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name.split("/", 1)[1] if "/" in member.name else member.name
            if not name.startswith(LLAMA_CPP_PREFIX):
                continue
            path = name[len(LLAMA_CPP_PREFIX):]
            if path.startswith("models/templates/") and path.endswith(".jinja"):
                templates[path] = tar.extractfile(member).read().decode("utf-8")
            elif path == "tests/test-chat-template.cpp":
                test_source = tar.extractfile(member).read().decode("utf-8")
    if not templates or test_source is None:
        sys.exit(f"{archive.name}: models/templates/ or tests/test-chat-template.cpp missing")
    return templates, test_source


def mistral_common_templates(workdir: Path) -> dict[str, str]:
    """mistral-common's own generated Jinja templates for the v1/v3/v7 tokenizers."""
    target = workdir / "mistral_common"
    pip("install", "--quiet", "--upgrade", "--no-deps", "--target", str(target), MISTRAL_COMMON,
        *MISTRAL_COMMON_IMPORTS)
    code = (
        "import json\n"
        "from mistral_common.integrations.chat_templates.template_generator import "
        "TemplateConfig, build_chat_template\n"
        "from mistral_common.tokens.tokenizers.base import TokenizerVersion as V\n"
        "configs = {'v3-spm': TemplateConfig(version=V.v3, spm=True),\n"
        "           'v3-tekken': TemplateConfig(version=V.v3, spm=False),\n"
        "           'v1-spm': TemplateConfig(version=V.v1, spm=True),\n"
        "           'v7-tekken': TemplateConfig(version=V.v7, spm=False)}\n"
        "print(json.dumps({k: build_chat_template(c) for k, c in configs.items()}))\n")
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=env)
    return {f"{MISTRAL_COMMON} generated {k}": v for k, v in json.loads(out.stdout).items()}


def smollm2_template() -> str:
    reader = GGUFReader(str(SMOLLM2_GGUF))
    field = reader.fields["tokenizer.chat_template"]
    return field.contents()


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render_all(template: str, family: str) -> dict:
    tok = make_tokenizer(template, FAMILY_TOKENS[family])
    return {name: hf_render(tok, msgs, agp, kw) for name, (msgs, agp, kw) in CONVERSATIONS.items()}


def outcomes_equal(a, b) -> bool:
    return a[0] == b[0] and (a[0] == "error" or a[1] == b[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--detect-tool", required=True, type=Path,
                        help="build-*/tests/chat/detect_chat_template_tool")
    parser.add_argument("--out", type=Path, default=REPO / "tests/golden/chat/chat_golden.json")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="chat_golden_") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        llama_templates, test_source = fetch_llama_cpp(workdir)
        quoted = templates_from_llama_cpp_test(test_source)
        mistral_v3 = [t for n, t in quoted
                      if n.startswith("Mistral-Large-Instruct-2407 (mistralai 'v3' template")]
        if len(mistral_v3) != 1:
            sys.exit("tests/test-chat-template.cpp: the Mistral 'v3' template case was not found once")
        family_templates = {
            "llama3": llama_templates[FAMILY_SOURCES["llama3"]],
            "qwen2": llama_templates[FAMILY_SOURCES["qwen2"]],
            "deepseek-r1-distill": llama_templates[FAMILY_SOURCES["deepseek-r1-distill"]],
            "mistral-v3": mistral_v3[0],
            "chatml": smollm2_template(),
        }
        mistral_common = mistral_common_templates(workdir)

        # ---- renders ----------------------------------------------------------------------
        golden_outcomes = {f: render_all(t, f) for f, t in family_templates.items()}
        renders = []
        for family, outcomes in golden_outcomes.items():
            for name, (msgs, agp, kw) in CONVERSATIONS.items():
                entry = {"family": family, "conversation": name, "messages": msgs,
                         "add_generation_prompt": agp}
                if "date_string" in kw:
                    entry["llama3_date_string"] = kw["date_string"]
                kind, value = outcomes[name]
                entry["expected" if kind == "text" else "error"] = value
                renders.append(entry)

        # ---- kvpress splits ---------------------------------------------------------------
        splits = []
        for family, template in list(family_templates.items()) + [("none", None)]:
            tok = None if template is None else make_tokenizer(template, FAMILY_TOKENS[family])
            for bos in (NO_TEMPLATE_BOS if template is None else [None]):
                for name, context, question, answer_prefix, system in SPLITS:
                    if template is None and system is not None:
                        continue  # kvpress cannot send a system message without a template
                    for query_aware in (False, True):
                        kv_context, kv_question, q_part, suffix = kvpress_strings(
                            tok, bos or "", context, question, answer_prefix, query_aware, system)
                        entry = {"family": family, "case": name, "context": context,
                                 "question": question, "answer_prefix": answer_prefix,
                                 "system": system,
                                 "visibility": "query-aware" if query_aware else "query-agnostic",
                                 "kvpress_context": kv_context, "kvpress_question": kv_question,
                                 "prefix_plus_context": kv_context, "question_part": q_part,
                                 "suffix_plus_answer_prefix": suffix + answer_prefix}
                        if template is None:
                            entry["bos_text"] = bos
                        splits.append(entry)

        # ---- detection over every real template fetched ----------------------------------
        corpus = {f"{LLAMA_CPP_PYTHON} {LLAMA_CPP_PREFIX}{p}": t
                  for p, t in sorted(llama_templates.items())}
        for n, t in quoted:
            corpus[f"{LLAMA_CPP_PYTHON} {LLAMA_CPP_PREFIX}tests/test-chat-template.cpp: {n}"] = t
        corpus.update(mistral_common)
        corpus[f"{SMOLLM2_GGUF.relative_to(REPO)}: tokenizer.chat_template"] = family_templates["chatml"]
        files = []
        for i, text in enumerate(corpus.values()):
            path = workdir / f"template_{i:03d}.jinja"
            path.write_text(text, encoding="utf-8")
            files.append(str(path))
        result = subprocess.run([str(args.detect_tool), *files], check=True, capture_output=True,
                                text=True)
        detected = [json.loads(line)["detected"] for line in result.stdout.splitlines()]
        if len(detected) != len(files):
            sys.exit("detect tool answered for fewer templates than given")
        detection, failures = [], []
        for (source, text), kind in zip(corpus.items(), detected):
            entry = {"source": source, "sha256": sha256(text), "detected": kind}
            if kind is not None:
                outcomes = render_all(text, kind)
                differing = [c for c in CONVERSATIONS
                             if not outcomes_equal(outcomes[c], golden_outcomes[kind][c])]
                entry["renders_like_family"] = not differing
                if differing:
                    entry["differing_conversations"] = differing
                    failures.append(f"{source}: detected as {kind} but renders {differing} differently")
            detection.append(entry)
        for family, template in family_templates.items():
            kind = detected[list(corpus.values()).index(template)]
            if kind != family:
                failures.append(f"the {family} template is detected as {kind}")

        # ---- mistral-common cross-check of the Mistral v3 source ---------------------------
        mc_key = f"{MISTRAL_COMMON} generated v3-spm"
        mc_outcomes = render_all(mistral_common[mc_key], "mistral-v3")
        agree = [c for c in CONVERSATIONS
                 if outcomes_equal(mc_outcomes[c], golden_outcomes["mistral-v3"][c])]
        # llama.cpp's edited copy of the R1-Distill-Qwen-32B template, rendered as kvpress would.
        edited = make_tokenizer(llama_templates["models/templates/deepseek-ai-DeepSeek-R1-Distill-"
                                                "Qwen-32B.jinja"], FAMILY_TOKENS["deepseek-r1-distill"])
        edited_text = edited.apply_chat_template([msg("user", "Hi")], tokenize=False,
                                                 add_generation_prompt=True, enable_thinking=False)

        if failures:
            sys.exit("detection check failed:\n  " + "\n  ".join(failures))

    golden = {
        "generator": "tools/golden/make_chat_golden.py",
        "transformers_version": transformers.__version__,
        "jinja2_version": jinja2.__version__,
        "kvpress_reference": KVPRESS_REFERENCE,
        "templates": {f: {"source": (f"{LLAMA_CPP_PYTHON} sdist, {LLAMA_CPP_PREFIX}{FAMILY_SOURCES[f]}"
                                     if f != "chatml" else
                                     f"{SMOLLM2_GGUF.relative_to(REPO)}, tokenizer.chat_template"),
                          "sha256": sha256(t), "special_tokens": FAMILY_TOKENS[f]}
                      for f, t in family_templates.items()},
        "cross_checks": {
            "mistral_v3_vs_mistral_common_v3_spm": {
                "reference": mc_key, "sha256": sha256(mistral_common[mc_key]),
                "agreeing_conversations": agree,
                "differing_conversations": [c for c in CONVERSATIONS if c not in agree]},
            "llama_cpp_edited_r1_distill_qwen_32b_user_hi_enable_thinking_false": edited_text,
        },
        "renders": renders,
        "splits": splits,
        "detection": detection,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n_detected = sum(1 for d in detection if d["detected"])
    print(f"wrote {args.out}: {len(renders)} renders, {len(splits)} splits, "
          f"{len(detection)} templates checked ({n_detected} detected)")


if __name__ == "__main__":
    main()
