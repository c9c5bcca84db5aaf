#!/usr/bin/env python3
"""Learned artefacts for the tiny golden models, made with kvpress 0.5.5's own code where it has a way to compute them.

kvaudit's artefact methods read a file named in the manifest (methods/qfilter.h, methods/expected_attention_stats.h,
methods/duo_attention.h; docs/METHODS.md). kvpress downloads the same artefacts from the Hugging Face hub (or, for
DuoAttention, from GitHub); nothing here reaches a network. This script writes small stand-ins for the tiny models
(tests/golden/tiny_models; every one has 2 layers, 4 query heads, 2 KV heads, head_dim 16) to tests/golden/artefacts/:

  qfilter_tiny/model.safetensors (+ config.json)
      q_filters [2, 2, 16] F32. SYNTHETIC: Q-filters are trained (Godey et al. 2025) and kvpress only downloads
      them (nthngdy/<model>_qfilt); these are kvpress's own QFilters module initialised by torch.randn under
      torch.manual_seed(QFILTER_SEED) and written by its save_pretrained (huggingface_hub PyTorchModelHubMixin),
      i.e. exactly the file layout of the hub repositories. They carry no meaning beyond testing the arithmetic.
  ea_stats_llama_f32/model.safetensors, ea_stats_llama_bf16/model.safetensors (+ config.json)
      query_mean [2, 4, 16], query_cov [2, 4, 16, 16], F32 resp. BF16: kvpress's collect_queries()
      (kvpress/presses/expected_attention_with_stats.py: pre-RoPE queries captured by patching
      apply_rotary_pos_emb, first n_sink = 4 rows of each sample dropped, mean and unbiased covariance) run on the
      tiny llama in f32 resp. bf16, written by kvpress's ExpectedAttentionStats.save_pretrained. The calibration
      "dataset" replaces kmfoda/booksum: CALIBRATION_SAMPLES sequences of CALIBRATION_LENGTH token ids drawn from
      numpy default_rng(CALIBRATION_SEED) in [3, 300) (the tiny models have no tokenizer; datasets.load_dataset
      and AutoTokenizer are replaced inside kvpress's module for the call, the ids travel as space-separated text).
  duo_pattern_llama_f32.tsv, duo_pattern_llama_bf16.tsv
      [2 layers x 2 KV heads] head scores in DuoAttention's full_attention_heads.tsv layout (numpy.savetxt, tab
      delimiter): kvpress's duo_attention_on_the_fly() (the experimental on-the-fly DuoAttention scoring) on the same
      calibration sequences instead of 50 BookSum chapters (num_samples = CALIBRATION_SAMPLES, q_len 500).
  kvzap_mlp_tiny/model.safetensors, kvzap_linear_tiny/model.safetensors (+ config.json)
      KVzap surrogates for the tiny models (2 modules, input 64, output 2 KV heads; mlp hidden_dim 16): per layer i
      layers.i.0.{weight,bias}, layers.i.2.{weight,bias} (mlp) resp. layers.i.{weight,bias} (linear), F32.
      SYNTHETIC: kvpress's own KVzapModel (kvpress/presses/kvzap_press.py) with torch's default nn.Linear
      initialisation under torch.manual_seed(KVZAP_SEED), written by its save_pretrained, i.e. the file layout of
      the hub repositories nvidia/KVzap-<linear|mlp>-<model> (the trained ones predict KVzip's scores).
  artefacts.json
      provenance: generator, versions, seeds, shapes, and the SHA-256 of every file above.

The kvpress parity group tools/golden/kvpress_groups/artefacts.py loads these files into the real presses (through
kvpress's own loaders where it has them: QFilters.from_pretrained, ExpectedAttentionStats.from_pretrained via
stats_folder; DuoAttention's pattern through np.loadtxt + clip as kvpress's load_attention_pattern does), and
the C++ parity test gives the same files to our methods.

Run from the repository root (the kvpress venv of tools/golden/make_kvpress_golden.py):
  nice tools/.venv-kvpress/bin/python tools/golden/make_artefacts_golden.py
Reruns on one machine are byte-identical (torch.set_num_threads(1), deterministic algorithms; checked with cmp). On
another CPU the f32 calibration artefacts can differ in the last bit (torch's CPU kernels differ: a rerun on an AMD
EPYC machine changed one value of duo_pattern_llama_f32.tsv and ea_stats_llama_f32 by 1 ulp); the committed files
are the ones the goldens were made with, so keep them (git checkout) when only adding an artefact.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import BatchEncoding  # noqa: E402

import kvpress.presses.duo_attention_press as duo_module  # noqa: E402
import kvpress.presses.expected_attention_with_stats as stats_module  # noqa: E402
from kvpress.presses.kvzap_press import KVzapConfig, KVzapModel  # noqa: E402
from kvpress.presses.qfilter_press import QFilters  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "golden" / "tiny_models"
OUT = REPO / "tests" / "golden" / "artefacts"

QFILTER_SEED = 20251202
KVZAP_SEED = 20261203
KVZAP_HIDDEN = 16
CALIBRATION_SEED = 20251203
CALIBRATION_SAMPLES = 4
CALIBRATION_LENGTH = 256
VOCAB_LOW, VOCAB_HIGH = 3, 300
N_SINK = 4  # ExpectedAttentionStats' n_sink (kvpress default)
DUO_Q_LEN = 500  # duo_attention_on_the_fly's default q_len
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def calibration_texts() -> list[str]:
    rng = np.random.default_rng(CALIBRATION_SEED)
    return [" ".join(str(int(i)) for i in rng.integers(VOCAB_LOW, VOCAB_HIGH, CALIBRATION_LENGTH))
            for _ in range(CALIBRATION_SAMPLES)]


class IdTokenizer:
    """Stands in for AutoTokenizer: the 'text' is space-separated token ids."""

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        return cls()

    def __call__(self, text, return_tensors="pt"):
        ids = [int(t) for t in text.split()]
        return BatchEncoding({"input_ids": torch.tensor([ids], dtype=torch.long)})


def fake_load_dataset(*args, **kwargs):
    """Stands in for datasets.load_dataset: the calibration texts in a 'chapter' column (BookSum's)."""
    return datasets.Dataset.from_dict({"chapter": calibration_texts()})


class FakeBookSum:
    """duo_attention_on_the_fly calls load_dataset(...).to_pandas().sample(n, random_state=42)."""

    def to_pandas(self):
        return pd.DataFrame({"chapter": calibration_texts()})


def load(dtype_name: str):
    model = transformers.AutoModelForCausalLM.from_pretrained(TINY / "llama" / dtype_name, dtype=DTYPES[dtype_name],
                                                              attn_implementation="sdpa")
    model.eval()
    return model


def save_module(module, directory: Path):
    """kvpress's hub mixin writes model.safetensors + config.json (+ a README model card, dropped here)."""
    with tempfile.TemporaryDirectory() as tmp:
        module.save_pretrained(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("model.safetensors", "config.json"):
            shutil.copyfile(Path(tmp) / name, directory / name)


def make_qfilters():
    torch.manual_seed(QFILTER_SEED)
    filters = QFilters(num_layers=2, num_kv_heads=2, kv_head_dim=16)
    save_module(filters, OUT / "qfilter_tiny")


def make_kvzap():
    for name, hidden_dim in (("mlp", KVZAP_HIDDEN), ("linear", None)):
        torch.manual_seed(KVZAP_SEED)
        model = KVzapModel(KVzapConfig(input_dim=64, output_dim=2, n_modules=2, hidden_dim=hidden_dim))
        save_module(model, OUT / f"kvzap_{name}_tiny")


@torch.no_grad()
def make_stats(dtype_name: str):
    model = load(dtype_name)
    saved = stats_module.load_dataset, stats_module.AutoTokenizer
    stats_module.load_dataset, stats_module.AutoTokenizer = fake_load_dataset, IdTokenizer
    try:
        # sample_seq_len cuts each text to that many characters; the id texts are shorter, so nothing is cut.
        _, mu, cov = stats_module.collect_queries(model, "calibration", CALIBRATION_SAMPLES, 100_000, N_SINK,
                                                  "chapter")
    finally:
        stats_module.load_dataset, stats_module.AutoTokenizer = saved
    assert mu.dtype == DTYPES[dtype_name] and tuple(mu.shape) == (2, 4, 16) and tuple(cov.shape) == (2, 4, 16, 16)
    stats = stats_module.ExpectedAttentionStats(num_layers=2, num_heads=4, head_dim=16,
                                                dataset_name="calibration-ids", model_name=f"tiny-llama-{dtype_name}",
                                                num_samples=CALIBRATION_SAMPLES, sample_seq_len=CALIBRATION_LENGTH,
                                                n_sink=N_SINK)
    stats.query_mean.data = mu
    stats.query_cov.data = cov
    save_module(stats, OUT / f"ea_stats_llama_{dtype_name}")


@torch.no_grad()
def make_duo_pattern(dtype_name: str):
    model = load(dtype_name)
    saved = duo_module.load_dataset, duo_module.AutoTokenizer
    duo_module.load_dataset, duo_module.AutoTokenizer = (lambda *a, **k: FakeBookSum()), IdTokenizer
    duo_module.cache.clear()
    try:
        scores = duo_module.duo_attention_on_the_fly(model, num_samples=CALIBRATION_SAMPLES, q_len=DUO_Q_LEN)
    finally:
        duo_module.load_dataset, duo_module.AutoTokenizer = saved
        duo_module.cache.clear()
    assert scores.shape == (2, 2)
    np.savetxt(OUT / f"duo_pattern_llama_{dtype_name}.tsv", scores, delimiter="\t")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    OUT.mkdir(parents=True, exist_ok=True)
    make_qfilters()
    make_kvzap()
    for dtype_name in DTYPES:
        make_stats(dtype_name)
        make_duo_pattern(dtype_name)
    # fastkvzip_gates_*.safetensors live here too but are written by tools/golden/kvpress_groups/fastkvzip.py.
    files = sorted(p for p in OUT.rglob("*")
                   if p.is_file() and p.name != "artefacts.json" and not p.name.startswith("fastkvzip_gates"))
    doc = {
        "generator": "tools/golden/make_artefacts_golden.py",
        "versions": {"kvpress": importlib.metadata.version("kvpress"), "torch": torch.__version__,
                     "transformers": transformers.__version__, "datasets": datasets.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "seeds": {"qfilter": QFILTER_SEED, "calibration": CALIBRATION_SEED, "kvzap": KVZAP_SEED},
        "calibration": {"samples": CALIBRATION_SAMPLES, "length": CALIBRATION_LENGTH,
                        "ids": [VOCAB_LOW, VOCAB_HIGH], "model": "tests/golden/tiny_models/llama/<dtype>"},
        "files": {str(p.relative_to(OUT)): sha256(p) for p in files},
    }
    (OUT / "artefacts.json").write_text(json.dumps(doc, indent=1) + "\n")
    for p in files:
        print(f"{p.relative_to(REPO)}: {p.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
