#!/usr/bin/env python3
"""Write a GGUF holding only the first N transformer blocks of a decoder (for the GPU check).

tests/device/check.sh carries the default model to a GPU machine whose transfers are limited (about
35 MB per call beside the repository); SmolLM2-135M-Instruct's Q4_1 GGUF is 98 MB and barely
compresses (zstd -19: 90 MB). The GPU tests compare the CUDA engine with the CPU engine on the
same file, so a model with the same tokenizer, embedding, head shapes and quantisation but fewer
blocks checks the same kernels at the same shapes. The cut keeps every metadata entry and every
tensor that is not in a block >= N, byte for byte, sets `<architecture>.block_count` to N and
re-lays the tensor data (same alignment). Standard library only (GGUF v2/v3, little-endian).

Usage: cut_gguf.py INPUT.gguf OUTPUT.gguf --blocks N
"""
import argparse
import re
import struct
import sys

# GGUF metadata value types: fixed sizes, 8 = string, 9 = array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data, path):
        self.data, self.pos, self.path = data, 0, path

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            sys.exit("cut_gguf: %s: truncated at byte %d (need %d more)" % (self.path, self.pos, n))
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64()).decode("utf-8")

    def skip_value(self, kind):
        if kind in FIXED:
            self.take(FIXED[kind])
        elif kind == 8:
            self.take(self.u64())
        elif kind == 9:
            inner, count = self.u32(), self.u64()
            for _ in range(count):
                self.skip_value(inner)
        else:
            sys.exit("cut_gguf: %s: unknown metadata type %d at byte %d" % (self.path, kind, self.pos))


def pack_string(text):
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--blocks", type=int, required=True)
    a = ap.parse_args()
    data = open(a.input, "rb").read()
    r = Reader(data, a.input)
    if r.take(4) != b"GGUF":
        sys.exit("cut_gguf: %s is not a GGUF file" % a.input)
    version = r.u32()
    if version not in (2, 3):
        sys.exit("cut_gguf: %s: GGUF version %d (2 or 3 expected)" % (a.input, version))
    tensor_count, kv_count = r.u64(), r.u64()
    metadata = bytearray()
    block_count_at = None  # offset of the u32 value inside `metadata`
    alignment = 32
    architecture = None
    for _ in range(kv_count):
        start = r.pos
        key = r.string()
        kind = r.u32()
        value_at = r.pos
        if key == "general.architecture" and kind == 8:
            architecture = r.string()
        elif key == "general.alignment" and kind == 4:
            alignment = r.u32()
        else:
            r.skip_value(kind)
        if key.endswith(".block_count"):
            if kind != 4:
                sys.exit("cut_gguf: %s: %s has type %d, not uint32" % (a.input, key, kind))
            original_blocks = struct.unpack("<I", data[value_at:value_at + 4])[0]
            block_count_at = len(metadata) + (value_at - start)
        metadata += data[start:r.pos]
    if block_count_at is None or architecture is None:
        sys.exit("cut_gguf: %s: no general.architecture / <arch>.block_count" % a.input)
    if not 1 <= a.blocks <= original_blocks:
        sys.exit("cut_gguf: --blocks %d outside [1, %d]" % (a.blocks, original_blocks))
    struct.pack_into("<I", metadata, block_count_at, a.blocks)

    tensors = []
    for _ in range(tensor_count):
        name = r.string()
        dims = [r.u64() for _ in range(r.u32())]
        kind = r.u32()
        offset = r.u64()
        tensors.append((name, dims, kind, offset))
    data_start = (r.pos + alignment - 1) // alignment * alignment
    ends = sorted(t[3] for t in tensors) + [len(data) - data_start]
    next_offset = {o: ends[i + 1] for i, o in enumerate(ends[:-1])}
    block = re.compile(r"^blk\.(\d+)\.")
    kept, layout, position = [], bytearray(), 0
    for name, dims, kind, offset in tensors:
        m = block.match(name)
        if m and int(m.group(1)) >= a.blocks:
            continue
        size = next_offset[offset] - offset
        kept.append((name, dims, kind, position, offset, size))
        position += (size + alignment - 1) // alignment * alignment
    header = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(kept), kv_count)) + metadata
    for name, dims, kind, new_offset, _, _ in kept:
        header += pack_string(name) + struct.pack("<I", len(dims))
        header += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", kind, new_offset)
    header += b"\0" * ((-len(header)) % alignment)
    with open(a.output, "wb") as out:
        out.write(header)
        for _, _, _, new_offset, offset, size in kept:
            chunk = data[data_start + offset:data_start + offset + size]
            out.write(chunk + b"\0" * ((-len(chunk)) % alignment))
    print("cut_gguf: %s: %s, %d of %d blocks, %d of %d tensors -> %s (%d bytes)"
          % (a.input, architecture, a.blocks, original_blocks, len(kept), tensor_count, a.output,
             len(header) + position))


if __name__ == "__main__":
    main()
