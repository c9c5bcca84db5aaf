#!/usr/bin/python3
"""A shard writer killed with SIGKILL: what survives, what salvage recovers, and that a resumed
writer plus salvage never counts a cell twice.

1. Writer A (rank 0, cells 0..299) publishes completely.
2. Writer B (rank 1, cells 1000..1299, flush every 64) hangs after 200 appends; once it prints
   "flushed 192" it is killed with SIGKILL (the 8 unflushed records are lost).
3. A is byte-for-byte unchanged and reads back completely (C++ reader and h5py, every field).
   The reader reports B's .tmp as unpublished and skips it; with salvage it recovers exactly the
   192 flushed records, which h5py also reads from the killed file (no h5clear needed).
4. Writer C (rank 1, next seq) republishes B's 300 cells. read_study counts every cell exactly
   once, with and without salvage (B's salvaged cells are all already present).
"""

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_formula as rf  # noqa: E402

N = 300
HANG_AFTER = 200
FLUSH_EVERY = 64
EXPECTED_FLUSHED = (HANG_AFTER // FLUSH_EVERY) * FLUSH_EVERY  # 192: the tail after it is lost
B_OFFSET = 1000


def environment():
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def write(tool, directory, rank, offset, seq=0):
    result = subprocess.run([tool, "--dir", directory, "--rank", str(rank), "--records", str(N),
                             "--flush-every", str(FLUSH_EVERY), "--cell-offset", str(offset),
                             "--seq", str(seq), "--pid", "777"],
                            env=environment(), capture_output=True, text=True, timeout=120)
    rf.require(result.returncode == 0, "writer failed: %s" % result.stderr)
    return result.stdout.strip()


def read_study(reader, directory, *flags):
    result = subprocess.run([reader, "--dir", directory, *flags], capture_output=True, text=True,
                            timeout=120)
    rf.require(result.returncode == 0, "read_study_tool failed (%d): %s %s"
               % (result.returncode, result.stdout, result.stderr))
    return json.loads(result.stdout)


def start_and_kill_b(tool, directory):
    process = subprocess.Popen(
        [tool, "--dir", directory, "--rank", "1", "--records", str(N), "--flush-every",
         str(FLUSH_EVERY), "--cell-offset", str(B_OFFSET), "--hang-after", str(HANG_AFTER),
         "--pid", "777"],
        env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)
        rf.require(ready, "writer B printed nothing within 120 s")
        line = process.stdout.readline().strip()
        rf.require(line == "flushed %d" % EXPECTED_FLUSHED,
                   "writer B said %r, expected 'flushed %d'" % (line, EXPECTED_FLUSHED))
        rf.require(process.poll() is None, "writer B exited instead of hanging")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        process.stdout.close()
        process.stderr.close()
    rf.require(process.returncode == -signal.SIGKILL, "B ended with %r" % process.returncode)


def check_with_h5py(path, first, count, rank, n_records_attribute):
    with h5py.File(path, "r") as f:
        rf.require(int(f.attrs["n_records"]) == n_records_attribute,
                   "%s: n_records %r" % (path, f.attrs["n_records"]))
        rf.check_types(path, f["records"])
        rf.check_records(path, f["records"], list(range(first, first + count)), rank, 1)


def ids(first, count):
    return {rf.cell_id_of(g) for g in range(first, first + count)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--reader", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    directory = tempfile.mkdtemp(prefix="sigkill.", dir=args.workdir)

    # 1. A publishes completely.
    shard_a = write(args.tool, directory, 0, 0)
    checksum_a = rf.file_sha256(shard_a)
    mtime_a = os.stat(shard_a).st_mtime_ns

    # 2. B is killed after its third flush.
    start_and_kill_b(args.tool, directory)
    temps = sorted(n for n in os.listdir(directory) if n.endswith(".h5.tmp"))
    rf.require(len(temps) == 1, "temporary shards: %r" % temps)
    temp_b = os.path.join(directory, temps[0])
    rf.require(not os.path.exists(temp_b[:-len(".tmp")]), "B was published")

    # 3. A untouched and complete; B skipped by default, salvaged on request.
    rf.require(rf.file_sha256(shard_a) == checksum_a, "shard A changed")
    rf.require(os.stat(shard_a).st_mtime_ns == mtime_a, "shard A was rewritten")
    check_with_h5py(shard_a, 0, N, 0, N)
    study = read_study(args.reader, directory)
    rf.require(study["n_records"] == N and set(study["cell_ids"]) == ids(0, N),
               "default read: %d records" % study["n_records"])
    rf.require([p["file"] for p in study["published"]] == [shard_a], "published %r" % study["published"])
    rf.require(len(study["temporary"]) == 1, "temporary %r" % study["temporary"])
    rf.require(study["temporary"][0]["file"] == temp_b and study["temporary"][0]["outcome"] == "skipped",
               "temporary %r" % study["temporary"])
    rf.require(any(temp_b in w and "unpublished" in w for w in study["warnings"]),
               "no warning names %s: %r" % (temp_b, study["warnings"]))

    salvaged = read_study(args.reader, directory, "--salvage")
    info = salvaged["temporary"][0]
    rf.require(info["outcome"] == "salvaged", "salvage outcome %r" % info)
    rf.require(info["n_flushed"] == EXPECTED_FLUSHED and info["n_added"] == EXPECTED_FLUSHED,
               "salvage recovered %r, expected exactly %d" % (info, EXPECTED_FLUSHED))
    rf.require(salvaged["n_records"] == N + EXPECTED_FLUSHED, "salvaged study %d records"
               % salvaged["n_records"])
    rf.require(set(salvaged["cell_ids"]) == ids(0, N) | ids(B_OFFSET, EXPECTED_FLUSHED),
               "salvaged cell ids differ")
    check_with_h5py(temp_b, B_OFFSET, EXPECTED_FLUSHED, 1, EXPECTED_FLUSHED)
    rf.require(rf.file_sha256(shard_a) == checksum_a, "shard A changed while reading")

    # 4. C republishes B's cells: every cell exactly once, salvage or not.
    shard_c = write(args.tool, directory, 1, B_OFFSET, seq=1)
    for flags in ([], ["--salvage"]):
        study = read_study(args.reader, directory, *flags)
        rf.require(study["n_records"] == 2 * N, "%r: %d records" % (flags, study["n_records"]))
        rf.require(len(study["cell_ids"]) == len(set(study["cell_ids"])), "%r: a cell twice" % flags)
        rf.require(set(study["cell_ids"]) == ids(0, N) | ids(B_OFFSET, N), "%r: cell ids" % flags)
        rf.require(study["duplicates"] == [], "%r: duplicates %r" % (flags, study["duplicates"]))
        rf.require(sorted(p["file"] for p in study["published"]) == sorted([shard_a, shard_c]),
                   "%r: published %r" % (flags, study["published"]))
        if flags:
            info = study["temporary"][0]
            rf.require(info["n_flushed"] == EXPECTED_FLUSHED and info["n_added"] == 0
                       and info["n_already_present"] == EXPECTED_FLUSHED,
                       "salvage after resume: %r" % info)
    check_with_h5py(shard_c, B_OFFSET, N, 1, N)
    rf.require(rf.file_sha256(shard_a) == checksum_a, "shard A changed at the end")

    shutil.rmtree(directory)
    print("SIGKILL test passed: A intact, %d of %d of B salvaged, resume counts %d cells once"
          % (EXPECTED_FLUSHED, HANG_AFTER, 2 * N))
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except rf.CheckError as error:
        print("FAILED: %s" % error, file=sys.stderr)
        code = 1
    sys.exit(code)
