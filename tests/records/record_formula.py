"""Python twin of tests/records/record_formula.h, plus h5py checks of a shard against it.

The expected record of global cell index g is computed here with the same formulas as the C++
writer side; check_shard() compares EVERY field of every record, the dataset's HDF5 types and the
provenance attributes. Used by check_shards_h5py.py and sigkill_resume_test.py (run with Debian's
/usr/bin/python3, which has h5py).
"""

import hashlib
import math
import os
import re
import struct

import h5py
import numpy as np

MASK64 = (1 << 64) - 1
MULTIBYTE = "naïve — 東京 ✓ 🙂"
NAN = float("nan")

STATUS = {"ok": 0, "oom": 1, "error": 2, "excluded": 3, "abandoned": 4}
BACKEND = {"sdpa": 0, "eager": 1}
PROTOCOL = {"query-aware": 0, "query-agnostic": 1, "reuse": 2}
SPLIT = {"none": 0, "calibration": 1, "test": 2}
BUDGET_KIND = {"none": 0, "compression": 1, "retention": 2, "threshold": 3}
DEVICE = {"unknown": 0, "cpu": 1, "cuda": 2}
ENUMS = {"status": STATUS, "attention_backend": BACKEND, "protocol": PROTOCOL, "split": SPLIT,
         "budget_kind": BUDGET_KIND, "device": DEVICE}

# (member, kind) in file order; kind: u32/u64/i32/i64/f64/str/enum
FIELDS = [
    ("cell_id", "u64"), ("unit_id", "u64"), ("attempt", "i32"), ("rank", "i32"),
    ("status", "enum"), ("model", "str"), ("benchmark", "str"), ("task", "str"),
    ("method", "str"), ("method_id", "str"), ("params_digest", "str"),
    ("attention_backend", "enum"),
    ("protocol", "enum"), ("split", "enum"), ("budget_kind", "enum"), ("compression", "f64"),
    ("retention", "f64"), ("threshold", "f64"), ("instance", "u32"), ("nominal_length", "u32"),
    ("n_prompt_tokens", "u32"), ("n_context_tokens", "u32"), ("n_question_tokens", "u32"),
    ("n_generated_tokens", "u32"), ("kept_tokens", "u64"), ("kept_bytes", "u64"),
    ("full_bytes", "u64"), ("realised_retention", "f64"), ("score", "f64"),
    ("t_start_ns", "i64"), ("t_end_ns", "i64"), ("prefill_ms", "f64"), ("decode_ms", "f64"),
    ("error", "str"), ("output", "str"), ("prompt_digest", "u64"), ("kept_digest", "u64"),
    ("cell_prefill_ms", "f64"), ("cell_capture_ms", "f64"), ("cell_extra_pass_ms", "f64"),
    ("cell_select_ms", "f64"), ("cell_evict_ms", "f64"), ("cell_feed_ms", "f64"),
    ("cell_decode_ms", "f64"), ("peak_kv_bytes", "u64"), ("shared_costs", "u32"),
    ("device", "enum"), ("threads", "i32"),
    ("question", "u32"), ("n_questions", "u32"), ("final_kv_bytes", "u64"),
    ("decode_compressions", "u32"),
    ("record_digest", "u64"),
]
SIZES = {"u32": 4, "u64": 8, "i32": 4, "i64": 8, "f64": 8, "enum": 1}
STRUCT_FORMAT = {"u32": "<I", "u64": "<Q", "i32": "<i", "i64": "<q", "f64": "<d", "enum": "<b"}


def record_digest(record):
    """docs/RECORDS.md §Integrity, recomputed from outside kvaudit: SHA-256 over every member but
    record_digest, in file order (integers little-endian at their width, doubles as IEEE-754 bits,
    enums as their stored int8, strings as u64 byte length + UTF-8 bytes); the first 8 bytes
    big-endian."""
    message = bytearray()
    for name, kind in FIELDS:
        if name == "record_digest":
            continue
        value = record[name]
        if kind == "str":
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            message += struct.pack("<Q", len(data)) + data
        elif kind == "f64":
            message += struct.pack("<d", float(value))
        else:
            message += struct.pack(STRUCT_FORMAT[kind], int(value))
    return int.from_bytes(hashlib.sha256(bytes(message)).digest()[:8], "big")


def verify_sidecar(path):
    """The published shard's SHA-256 sidecar (<shard>.sha256, sha256sum format) matches."""
    with open(path + ".sha256", "r", encoding="ascii") as f:
        line = f.read()
    with open(path, "rb") as f:
        actual = hashlib.sha256(f.read()).hexdigest()
    require(line == "%s  %s\n" % (actual, os.path.basename(path)),
            "%s: sidecar %r does not match the file's SHA-256 %s" % (path, line, actual))


def long_output():
    return "0123456789" * 10000 + "東京"


def cell_id_of(g):
    return ((g + 1) * 0x9E3779B97F4A7C15) & MASK64


def formula_record(g, rank, attempt):
    models = ["Llama-3.1-8B-Instruct", "Qwen2.5-7B-Instruct", "naïve — 東京 ✓ model"]
    method_ids = ["full", "snapkv", "keydiff", "tova", "", "expected_attention"]
    status = g % 5
    budget_kind = g % 4
    tenth = float(g % 10) / 10.0
    t_start = 1700000000000000000 + g * 1000003
    peak = 0 if g % 5 == 4 else (1 << 41) + g * 65536
    if g % 7 == 0:
        output = ""
    elif g % 50 == 1:
        output = long_output()
    else:
        output = "answer %d: %s" % (g, MULTIBYTE)
    return {
        "cell_id": cell_id_of(g),
        "unit_id": g // 7,
        "attempt": attempt,
        "rank": rank,
        "status": status,
        "model": models[g % 3],
        "benchmark": ["ruler", "longbench"][g % 2],
        "task": "niah_single_%d" % (g % 3 + 1),
        "method": "method-config-%d" % (g % 6),
        "method_id": method_ids[g % 6],
        "params_digest": "%016x" % ((g * 0x2545F4914F6CDD1D) & MASK64),
        "attention_backend": g % 2,
        "protocol": (g // 2) % 2,
        "split": g % 3,
        "budget_kind": budget_kind,
        "compression": tenth if budget_kind == 1 else NAN,
        "retention": 1.0 - tenth if budget_kind in (1, 2) else NAN,
        "threshold": float(g % 32) / 64.0 if budget_kind == 3 else NAN,
        "instance": 4294967295 if g % 11 == 10 else g % 100,
        "nominal_length": 4096 << (g % 4),
        "n_prompt_tokens": 1000 + g,
        "n_context_tokens": 900 + g,
        "n_question_tokens": 50 + g % 13,
        "n_generated_tokens": g % 64,
        "kept_tokens": g * 3,
        "kept_bytes": (1 << 40) + g * 131072,
        "full_bytes": MASK64 - g,
        "realised_retention": float(g % 100) / 100.0,
        "score": float(g % 17) / 16.0 if status == 0 else NAN,
        "t_start_ns": t_start,
        "t_end_ns": -1 if g % 13 == 12 else t_start + 12345 + g,
        "prefill_ms": float(g) * 0.25,
        "decode_ms": float(g) / 3.0 if status == 0 else NAN,
        "error": "" if status == 0 else "cell %d failed: %s" % (g, MULTIBYTE),
        "output": output,
        "prompt_digest": ((g * 0x9E3779B97F4A7C15) & MASK64) ^ 0xFFFFFFFF00000000,
        "kept_digest": 0 if g % 5 == 0 else MASK64 - g * 7,
        "cell_prefill_ms": float(g) * 0.125,
        "cell_capture_ms": float(g % 9) / 8.0 if g % 4 != 3 else NAN,
        "cell_extra_pass_ms": float(g) * 2.0 if g % 6 == 5 else NAN,
        "cell_select_ms": float(g % 33) / 32.0,
        "cell_evict_ms": float(g % 65) / 64.0,
        "cell_feed_ms": float(g) * 0.5 if status == 0 else NAN,
        "cell_decode_ms": float(g) / 5.0 if status == 0 else NAN,
        "peak_kv_bytes": peak,
        "shared_costs": g % 32,
        "device": g % 3,
        "threads": g % 17,
        "question": g % 5,
        "n_questions": g % 5 + 1 + g % 2,
        "final_kv_bytes": 0 if peak == 0 else peak - (g % 3) * 4096,
        "decode_compressions": g % 7,
    }


class CheckError(AssertionError):
    pass


def require(condition, message):
    if not condition:
        raise CheckError(message)


def same_value(kind, got, want):
    if kind == "f64":
        got = float(got)
        if math.isnan(want):
            return math.isnan(got)
        return got == want  # exact: the formulas are single IEEE operations
    return got == want


def check_types(path, dataset):
    """HDF5-level checks: packed little-endian compound, vlen UTF-8 strings, int8 enums."""
    tid = dataset.id.get_type()
    require(tid.get_class() == h5py.h5t.COMPOUND, "%s: /records is not a compound" % path)
    require(tid.get_nmembers() == len(FIELDS), "%s: %d members" % (path, tid.get_nmembers()))
    offset = 0
    for index, (name, kind) in enumerate(FIELDS):
        require(tid.get_member_name(index).decode() == name,
                "%s: member %d is %r, expected %r" % (path, index, tid.get_member_name(index), name))
        require(tid.get_member_offset(index) == offset,
                "%s: member %s at offset %d, expected %d (packed)"
                % (path, name, tid.get_member_offset(index), offset))
        member = tid.get_member_type(index)
        offset += member.get_size()
        if kind == "str":
            require(member.get_class() == h5py.h5t.STRING and member.is_variable_str(),
                    "%s: %s is not a vlen string" % (path, name))
            require(member.get_cset() == h5py.h5t.CSET_UTF8, "%s: %s is not UTF-8" % (path, name))
        elif kind == "enum":
            require(member.get_class() == h5py.h5t.ENUM and member.get_size() == 1,
                    "%s: %s is not an int8 enum" % (path, name))
        else:
            require(member.get_size() == SIZES[kind], "%s: %s size" % (path, name))
            require(member.get_order() == h5py.h5t.ORDER_LE, "%s: %s not LE" % (path, name))
            want_class = h5py.h5t.FLOAT if kind == "f64" else h5py.h5t.INTEGER
            require(member.get_class() == want_class, "%s: %s class" % (path, name))
            if kind != "f64":
                want_sign = h5py.h5t.SGN_NONE if kind[0] == "u" else h5py.h5t.SGN_2
                require(member.get_sign() == want_sign, "%s: %s sign" % (path, name))
    require(tid.get_size() == offset, "%s: compound has padding (%d vs %d)"
            % (path, tid.get_size(), offset))
    dtype = dataset.dtype
    for name, mapping in ENUMS.items():
        require(h5py.check_enum_dtype(dtype[name]) == mapping,
                "%s: enum %s maps %r" % (path, name, h5py.check_enum_dtype(dtype[name])))
    for name, kind in FIELDS:
        if kind == "str":
            info = h5py.check_string_dtype(dtype[name])
            require(info is not None and info.encoding == "utf-8" and info.length is None,
                    "%s: %s string dtype %r" % (path, name, info))


def check_records(path, dataset, expected_indices, rank, attempt):
    """Every field of every row equals formula_record(g) for g in expected_indices, in order."""
    rows = dataset[...]
    require(len(rows) == len(expected_indices),
            "%s: %d rows, expected %d" % (path, len(rows), len(expected_indices)))
    columns = {name: rows[name] for name, _ in FIELDS}
    for row, g in enumerate(expected_indices):
        want = dict(formula_record(g, rank, attempt))
        want["record_digest"] = record_digest(want)
        for name, kind in FIELDS:
            got = columns[name][row]
            if kind == "str":
                require(isinstance(got, bytes), "%s: %s comes back as %r" % (path, name, type(got)))
                got = got.decode("utf-8")
            elif kind != "f64":
                got = int(got)
            require(same_value(kind, got, want[name]),
                    "%s: row %d (g=%d) field %s = %r, expected %r"
                    % (path, row, g, name, got if kind != "str" else got[:80],
                       want[name] if kind != "str" else want[name][:80]))
    return len(rows)


ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def check_attributes(path, f, expected):
    """expected: attribute name -> value (exact), or a compiled regex for strings, or a type."""
    for name, want in expected.items():
        require(name in f.attrs, "%s: attribute %s missing" % (path, name))
        got = f.attrs[name]
        dtype = f.attrs.get_id(name).dtype
        if isinstance(want, str):
            require(isinstance(got, str), "%s: attribute %s is %r, not str" % (path, name, type(got)))
            require(got == want, "%s: attribute %s = %r, expected %r" % (path, name, got, want))
        elif isinstance(want, re.Pattern):
            require(isinstance(got, str), "%s: attribute %s is %r, not str" % (path, name, type(got)))
            require(want.match(got), "%s: attribute %s = %r !~ %s" % (path, name, got, want.pattern))
        elif isinstance(want, tuple):  # (numpy dtype, value)
            require(dtype == np.dtype(want[0]),
                    "%s: attribute %s has dtype %s, expected %s" % (path, name, dtype, want[0]))
            require(int(got) == want[1], "%s: attribute %s = %r, expected %r" % (path, name, got, want[1]))
        else:
            raise CheckError("bad expectation for %s" % name)


def manifest_sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()
