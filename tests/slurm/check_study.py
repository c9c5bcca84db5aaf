#!/usr/bin/python3
"""tests/slurm/check_study.py — checks what a Slurm run of kvaudit left in a study directory.

Usage: check_study.py STUDY_DIR SLURM_JOB_ID WORLD_SIZE   (Debian's /usr/bin/python3: h5py, numpy)

Checks, reading the shards with h5py (docs/RECORDS.md):
  * prereg.json exists and names the number of planned cells N (counts.cells);
  * shards/ holds published part-<job>.*.h5 shards only (no leftover .h5.tmp), named with this job id,
    each with a SHA-256 sidecar that matches it;
  * every shard carries the lock's manifest_sha256, n_cells_manifest = N, slurm_job_id = the job,
    slurm_restart_count = 0, world_size = WORLD_SIZE, a clean close (t_close_utc set) and
    n_records = its /records rows;
  * the ranks 0 .. WORLD_SIZE-1 each wrote a shard, on the nodes of the job (slurm_job_nodelist);
  * the records cover exactly N distinct cell ids, each once, all with status `ok` and a finite
    score, and with the rank of the shard that holds them;
  * the reduce report exists (report/report.md, report/summary.h5) and says all N cells are
    recorded exactly once.
Prints one line per failed check and exits 1 if any failed, else prints a summary and exits 0.
"""
import glob
import hashlib
import json
import math
import os
import sys

import h5py


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: check_study.py STUDY_DIR SLURM_JOB_ID WORLD_SIZE")
    study, job_id, world_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    failures = []

    def check(condition, message):
        if not condition:
            failures.append(message)
        return condition

    with open(os.path.join(study, "prereg.json"), encoding="utf-8") as f:
        prereg = json.load(f)
    n_cells = int(prereg["counts"]["cells"])
    sha = prereg["manifest_sha256"]
    check(n_cells > 0, "prereg.json: counts.cells is 0")

    shard_dir = os.path.join(study, "shards")
    published = sorted(glob.glob(os.path.join(shard_dir, "part-*.h5")))
    temporary = sorted(glob.glob(os.path.join(shard_dir, "part-*.h5.tmp")))
    check(published, f"{shard_dir}: no published shard")
    check(not temporary, f"{shard_dir}: unpublished shards left: {temporary}")

    seen = {}
    ranks = set()
    for path in published:
        name = os.path.basename(path)
        check(name.startswith(f"part-{job_id}."), f"{name}: not named after job {job_id}")
        try:
            with open(path + ".sha256", encoding="ascii") as f:
                sidecar = f.read()
        except OSError as e:
            sidecar = f"unreadable: {e}"
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        check(sidecar == f"{digest}  {name}\n", f"{name}: sidecar {sidecar!r} does not match")
        with h5py.File(path, "r") as f:
            a = f.attrs
            check(a["manifest_sha256"] == sha, f"{name}: manifest_sha256 differs from the lock")
            check(int(a["n_cells_manifest"]) == n_cells, f"{name}: n_cells_manifest != {n_cells}")
            check(a["slurm_job_id"] == job_id, f"{name}: slurm_job_id {a['slurm_job_id']!r}")
            check(a["slurm_restart_count"] in ("", "0"),
                  f"{name}: slurm_restart_count {a['slurm_restart_count']!r}")
            check(int(a["world_size"]) == world_size, f"{name}: world_size {a['world_size']}")
            check(a["t_close_utc"] != "", f"{name}: not closed cleanly (t_close_utc empty)")
            rank = int(a["rank"])
            ranks.add(rank)
            rows = f["records"][...]
            check(int(a["n_records"]) == len(rows), f"{name}: n_records != /records rows")
            status_names = {v: k for k, v in h5py.check_enum_dtype(rows.dtype["status"]).items()}
            for row in rows:
                cell = int(row["cell_id"])
                status = status_names[int(row["status"])]
                check(cell not in seen, f"{name}: cell {cell:016x} already in {seen.get(cell)}")
                seen[cell] = name
                check(status == "ok", f"{name}: cell {cell:016x} status {status}: "
                      f"{row['error'].decode('utf-8')}")
                check(math.isfinite(float(row["score"])), f"{name}: cell {cell:016x} score NaN")
                check(int(row["rank"]) == rank, f"{name}: cell {cell:016x} rank {row['rank']}")
    check(ranks == set(range(world_size)), f"ranks that wrote shards: {sorted(ranks)}")
    check(len(seen) == n_cells, f"{len(seen)} distinct cells recorded, {n_cells} planned")

    report = os.path.join(study, "report")
    for part in ("report.md", "summary.h5"):
        check(os.path.isfile(os.path.join(report, part)), f"{report}/{part}: missing")
    if os.path.isfile(os.path.join(report, "report.md")):
        with open(os.path.join(report, "report.md"), encoding="utf-8") as f:
            text = f.read()
        want = f"Complete: all {n_cells} preregistered cells are recorded exactly once"
        check(want in text, f"{report}/report.md: lacks '{want}'")

    for message in failures:
        print("FAIL:", message)
    if failures:
        return 1
    print(f"check_study: {len(published)} shards from ranks {sorted(ranks)} of job {job_id}, "
          f"{len(seen)} of {n_cells} cells once each, all ok; report present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
