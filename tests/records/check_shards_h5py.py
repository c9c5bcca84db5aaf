#!/usr/bin/python3
"""h5py reads shards written by the C++ ShardWriter: every field of every record, the HDF5 types
and every provenance attribute whose value can be predicted.

Runs tests/records/write_shards_tool twice in a fresh directory under --workdir: once without
Slurm variables (name part-local.0.t0...) and once with a fake Slurm environment (name and slurm_*
attributes from it), then checks both shards against record_formula.py. Needs Debian's
/usr/bin/python3 (h5py). Exit status 0 when every check passes.
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_formula as rf  # noqa: E402

MANIFEST_TEXT = '{"study":"records-test"}\n'


def cpu_model():
    """The first "model name" of /proc/cpuinfo, as the writer reads it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].rstrip("\n").lstrip(" \t")
    except OSError:
        pass
    return ""


def clean_environment(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and k != "CUDA_VISIBLE_DEVICES"}
    env.update(extra)
    return env


def run_tool(tool, env, *args):
    result = subprocess.run([tool, *map(str, args)], env=env, capture_output=True, text=True,
                            timeout=120)
    rf.require(result.returncode == 0, "write_shards_tool failed: %s" % result.stderr)
    return result.stdout.strip()


def check_shard(path, env, rank, world_size, attempt, first, count, tool_version):
    with h5py.File(path, "r") as f:
        rf.require(list(f.keys()) == ["provenance", "records"], "%s: groups %r" % (path, list(f.keys())))
        dataset = f["records"]
        rf.require(dataset.ndim == 1 and dataset.maxshape == (None,),
                   "%s: /records shape %r maxshape %r" % (path, dataset.shape, dataset.maxshape))
        rf.require(dataset.chunks is not None, "%s: /records is not chunked" % path)
        rf.require(dataset.fletcher32, "%s: /records has no fletcher32 filter" % path)
        rf.check_types(path, dataset)
        n = rf.check_records(path, dataset, list(range(first, first + count)), rank, attempt)
        rf.require(n == count, "%s: %d records" % (path, n))

        canonical = f["provenance/manifest_canonical"]
        rf.require(h5py.check_string_dtype(canonical.dtype).encoding == "utf-8",
                   "%s: manifest_canonical is not UTF-8" % path)
        rf.require(canonical.asstr()[()] == MANIFEST_TEXT, "%s: manifest_canonical" % path)

        hex40_or_unknown = re.compile(r"^([0-9a-f]{40}|unknown)$")
        anything = re.compile(r"^.*$", re.S)
        expected = {
            "schema_version": ("int64", 6),
            "manifest_sha256": rf.manifest_sha256(MANIFEST_TEXT),
            "manifest_path": "manifests/records-test ✓.toml",
            "n_cells_manifest": ("uint64", 1000000),
            "study_name": "records-test ✓",
            "tool_version": tool_version,
            "git_commit": hex40_or_unknown,
            "git_dirty": re.compile(r"^(true|false|unknown)$"),
            "build_type": anything,
            "compiler": re.compile(r"^\S.*$"),
            "cxx_flags": anything,
            "hdf5_version": h5py.version.hdf5_version,
            "mpi_library_version": "none (records test tool)",
            "hostname": socket.gethostname(),
            "rank": ("int64", rank),
            "world_size": ("int64", world_size),
            "local_rank": ("int64", rank % 2),
            "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES", ""),
            "gpu_name": "Test GPU ✓",
            "gpu_uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "driver_version": "550.54.15",
            "cuda_runtime_version": "12.4",
            "slurm_job_id": env.get("SLURM_JOB_ID", ""),
            "slurm_step_id": env.get("SLURM_STEP_ID", ""),
            "slurm_array_task_id": env.get("SLURM_ARRAY_TASK_ID", ""),
            "slurm_restart_count": env.get("SLURM_RESTART_COUNT", ""),
            "slurm_job_nodelist": env.get("SLURM_JOB_NODELIST", ""),
            "global_seed": ("uint64", 0xDEADBEEFCAFEF00D),
            "rng": "philox4x32-10",
            "attempt": ("int64", attempt),
            "t_open_utc": rf.ISO_Z,
            "t_close_utc": rf.ISO_Z,
            "n_records": ("uint64", count),
            "launch_id": "0a1b2c3d",
            "salvaged_from": "",
            "cpu_model": cpu_model(),
            "blas_core": "",
        }
        rf.check_attributes(path, f, expected)
        unexpected = set(f.attrs.keys()) - set(expected)
        rf.require(not unexpected, "%s: unexpected attributes %r" % (path, sorted(unexpected)))
        rf.require(f.attrs["t_open_utc"] <= f.attrs["t_close_utc"], "%s: closed before opened" % path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--tool-version", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    directory = tempfile.mkdtemp(prefix="h5py_check.", dir=args.workdir)

    # 1: outside Slurm, 300 records (several flushes, a partial last chunk).
    env = clean_environment({})
    path = run_tool(args.tool, env, "--dir", directory, "--rank", 0, "--records", 300,
                    "--flush-every", 64, "--pid", 4242, "--manifest-text", MANIFEST_TEXT)
    rf.require(os.path.basename(path) == "part-local.0.t0.a1.pid4242.0a1b2c3d-r0.s0.h5",
               "name %s" % path)
    rf.verify_sidecar(path)
    rf.require(not os.path.exists(path + ".tmp"), "%s.tmp left behind" % path)
    check_shard(path, env, rank=0, world_size=1, attempt=1, first=0, count=300,
                tool_version=args.tool_version)

    # 2: under a (fake) Slurm step, requeued twice, rotated once: the name and slurm_* follow.
    env = clean_environment({"SLURM_JOB_ID": "987654", "SLURM_STEP_ID": "3",
                             "SLURM_RESTART_COUNT": "2", "SLURM_ARRAY_TASK_ID": "5",
                             "SLURM_JOB_NODELIST": "node[01-02]", "CUDA_VISIBLE_DEVICES": "1"})
    path = run_tool(args.tool, env, "--dir", directory, "--rank", 3, "--world-size", 4,
                    "--records", 37, "--flush-every", 5, "--seq", 1, "--cell-offset", 300,
                    "--attempt", 2, "--pid", 4242, "--manifest-text", MANIFEST_TEXT)
    rf.require(os.path.basename(path) == "part-987654.3.t2.a2.pid4242.0a1b2c3d-r3.s1.h5",
               "name %s" % path)
    rf.verify_sidecar(path)
    check_shard(path, env, rank=3, world_size=4, attempt=2, first=300, count=37,
                tool_version=args.tool_version)

    rf.require(sorted(os.listdir(directory)) == ["part-987654.3.t2.a2.pid4242.0a1b2c3d-r3.s1.h5",
                                                 "part-987654.3.t2.a2.pid4242.0a1b2c3d-r3.s1.h5.sha256",
                                                 "part-local.0.t0.a1.pid4242.0a1b2c3d-r0.s0.h5",
                                                 "part-local.0.t0.a1.pid4242.0a1b2c3d-r0.s0.h5.sha256"],
               "directory holds %r" % sorted(os.listdir(directory)))
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)
    print("h5py checks passed: 337 records, every field and attribute")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except rf.CheckError as error:
        print("FAILED: %s" % error, file=sys.stderr)
        sys.exit(1)
