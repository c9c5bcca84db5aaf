#!/usr/bin/python3
"""`kvaudit run` under a real mpirun with SmolLM2-135M-Instruct (issue 7 acceptance 1-3).

A tiny study (RULER at 512 tokens, 2 tasks x 3 instances, 2 methods x 1 ratio + full, both
protocols, sdpa: 6 units, 36 cells) is planned into five study directories, then:

1. rank-count invariance: `mpirun -np 1`, `-np 2` and `-np 3` each run the study to completion
   (exit 0) into their own directory; `kvaudit reduce --no-figures` of each is complete (exit 0);
   every reduced table (report/tables/*.csv, *.tex) and report.md are byte-identical across the
   three, except the lines that legitimately differ (see VOLATILE_LINE below: the report's
   generation time, the study directory's path and the shard list), and the records of every cell
   agree field by field except rank, attempt and wall-clock times.
2. SIGKILL: a 2-rank run; once rank 1 has finished (and flushed) its first unit, rank 1 gets
   SIGKILL; mpirun fails. A 3-rank rerun salvages the dead ranks' flushed records, runs the rest
   and exits 0; reduce reports 0 missing and 0 duplicated cells, and the published shards (read
   with h5py) hold every cell exactly once.
3. SIGUSR1: a 2-rank run gets SIGUSR1 (sent to mpirun, which forwards it to every rank) after
   rank 0's first unit: every rank stops within one unit (at most one more progress line after the
   signal), mpirun exits 3 ("incomplete"), no .tmp shard is left, the published shards read back
   with h5py, and a rerun completes (exit 0) with 0 missing and 0 duplicated cells.
4. SIGTERM and SIGINT (Ctrl-C), sent to both ranks after rank 0's first unit: the same clean stop
   (exit 3, shards published, no .tmp). While the SIGTERM leg's first launch runs, a second
   `kvaudit run` on the same study directory exits 1 at once naming the holder of run.lock.
5. SIGPIPE: a one-process run whose stderr pipe is closed after its first progress line stops
   cleanly (exit 3, shard published) instead of dying.
6. PID reuse: each launch (`mpirun -np 1`) runs under `unshare -pf --mount-proc` (a new PID
   namespace, as in containers), so rank 0 has the same pid every time; the first two launches are
   stopped with SIGUSR1 after a unit, the third completes — 0 lost, 0 duplicated, and the shard names show the
   repeated pid (they differ by attempt and launch id). Skipped with a printed reason where the
   kernel refuses the namespace.
Every resumed study (2-6) reduces to tables byte-identical to the uninterrupted 1-rank study's.

Usage: run_mpi_test.py --kvaudit BIN --mpiexec MPIEXEC --model GGUF --workdir DIR
Exit 0 = pass, 77 = skipped (the reason is printed), 1 = failure.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import h5py

FAILURES = []
# The lines of report.md that legitimately differ between the reductions of the same study run
# with different rank counts into different directories: the lock's path (each run has its own
# study directory), the number of published shards (one per rank) and the report's creation time.
# Everything else (every table, every other line) must be byte-identical.
VOLATILE_LINE = re.compile(r"^- \*\*(preregistration|records|created_utc)\*\*: ")


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def manifest_text(model):
    return f"""# Tiny study for tests/run_mpi/run_mpi_test.py.
[study]
name = "run-mpi-test"
seed = 7
output_dir = "results"

[[models]]
name = "smollm2-135m-instruct"
path = "{model}"
format = "gguf"
chat_template = "chatml"
dtype = "f32"

[[benchmarks]]
name = "ruler-512"
kind = "ruler"
tasks = ["niah_single_1", "niah_multikey_1"]
length = 512
instances = 3
essay = "builtin"

[methods.snapkv]
[methods.streaming_llm]

[[grids]]
name = "tiny"
benchmarks = ["ruler-512"]
methods = ["snapkv", "streaming_llm"]
compression = [0.5]
protocols = ["query-aware", "query-agnostic"]
backends = ["sdpa"]

[statistics]
bootstrap_resamples = 2000
"""


class Launch:
    """An mpirun of `kvaudit run` in the background; stderr lines are collected as they come."""

    def __init__(self, args, ranks, study_dir, log, prefix=(), tag="launch"):
        self.lines = []
        self.marks = []  # (time, line)
        self.tag = tag
        cmd = [*prefix, args.mpiexec, "-np", str(ranks), "--oversubscribe", "-x",
               "OPENBLAS_NUM_THREADS", "-x", "KVAUDIT_TEST_LAUNCH", args.kvaudit, "run",
               args.manifest, "--output-dir", study_dir]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
                   KVAUDIT_TEST_LAUNCH=tag)
        for k in list(env):
            if k.startswith("SLURM_"):
                del env[k]
        self.log = open(log, "w")
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()
            self.marks.append((time.time(), line.rstrip("\n")))

    def wait_for(self, pattern, timeout):
        deadline = time.time() + timeout
        rx = re.compile(pattern)
        while time.time() < deadline:
            for _, line in list(self.marks):
                if rx.search(line):
                    return True
            if self.proc.poll() is not None:
                self.reader.join(5)
                return any(rx.search(line) for _, line in self.marks)
            time.sleep(0.05)
        return False

    def finish(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
        self.reader.join(10)
        self.seconds = time.time() - self.started
        self.log.close()
        return rc

    def rank_pid(self, rank):
        """The pid of the kvaudit process of MPI rank `rank` (from /proc: OMPI_COMM_WORLD_RANK)."""
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(d + "/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if b"kvaudit" not in cmdline or b"run" not in cmdline:
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() not in env:
                continue
            # Only processes of this launch: children of this mpirun.
            try:
                with open(d + "/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == self.proc.pid:
                return int(os.path.basename(d))
        return None


def launch_pids(tag):
    """Host pids of the `kvaudit run` processes whose environment carries KVAUDIT_TEST_LAUNCH=tag
    (works across PID namespaces, where the parent-child relation is not visible)."""
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(d + "/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
        except OSError:
            continue
        # The ranks themselves: argv[0] is kvaudit (mpirun's argv names kvaudit further on).
        if f"KVAUDIT_TEST_LAUNCH={tag}".encode() in env and cmdline[0].endswith(b"kvaudit") \
                and b"run" in cmdline:
            pids.append(int(os.path.basename(d)))
    return pids


def signal_ranks(launch, sig):
    pids = launch_pids(launch.tag)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


def run_cmd(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def plan(args, study_dir):
    p = run_cmd([args.kvaudit, "plan", args.manifest, "--output-dir", study_dir])
    if p.returncode != 0:
        print(p.stdout, p.stderr)
    return p.returncode == 0


def reduce(args, study_dir):
    p = run_cmd([args.kvaudit, "reduce", study_dir, "--no-figures", "--threads", "2"])
    m = re.search(r"coverage\s+(\d+) of (\d+) preregistered cells recorded \((\d+) scored, "
                  r"(\d+) excluded, (\d+) failed, (\d+) missing\)", p.stdout)
    report = sorted(glob.glob(os.path.join(study_dir, "report*")))
    return p, m, (report[-1] if report else None)


def published_cells(study_dir):
    ids = []
    for f in sorted(glob.glob(os.path.join(study_dir, "shards", "part-*.h5"))):
        with h5py.File(f, "r") as h:
            ids.extend(int(x) for x in h["records"]["cell_id"])
    return ids


def records_by_cell(study_dir):
    out = {}
    for f in sorted(glob.glob(os.path.join(study_dir, "shards", "part-*.h5"))):
        with h5py.File(f, "r") as h:
            rows = h["records"][...]
            for row in rows:
                out[int(row["cell_id"])] = row
    return out


def stable_lines(path):
    """The lines of report.md that must not change between launches, and the line count without
    the Cost section (its per-cell times are measured anew by every launch)."""
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8").splitlines()
    kept, cost_lines, in_cost = [], 0, False
    for ln in lines:
        if ln.startswith("## "):
            in_cost = ln == "## Cost"
        if in_cost:
            cost_lines += 1
        elif not VOLATILE_LINE.search(ln):
            kept.append(ln)
    return kept, len(lines) - cost_lines


def compare_reports(a, b, label):
    files_a = sorted(os.path.relpath(p, a) for p in glob.glob(os.path.join(a, "**", "*"),
                                                             recursive=True) if os.path.isfile(p))
    files_b = sorted(os.path.relpath(p, b) for p in glob.glob(os.path.join(b, "**", "*"),
                                                             recursive=True) if os.path.isfile(p))
    check(files_a == files_b, f"{label}: same report files ({len(files_a)})")
    identical, excluded_lines = 0, 0
    for rel in files_a:
        if rel.endswith(".h5") or rel not in files_b:
            continue  # summary.h5 embeds creation metadata; its tables are the CSVs
        if os.path.basename(rel).startswith("cost"):
            continue  # the cost table and figures: times measured anew by every launch
        pa, pb = os.path.join(a, rel), os.path.join(b, rel)
        if rel.endswith(".csv") or (rel.endswith(".tex") and "tables" in rel):
            same = open(pa, "rb").read() == open(pb, "rb").read()
            check(same, f"{label}: {rel} byte-identical")
            identical += same
        elif rel.endswith(".md"):
            la, na = stable_lines(pa)
            lb, nb = stable_lines(pb)
            check(la == lb and na == nb and na - len(la) == 3,
                  f"{label}: {rel} identical except {na - len(la)} volatile line(s) (3 expected)")
            excluded_lines = na - len(la)
    return identical, excluded_lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvaudit", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    if not os.path.isfile(args.model):
        print(f"SKIP: the SmolLM2 GGUF is absent ({args.model}); tools/fetch_default_model.sh "
              "fetches it")
        return 77
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    args.manifest = os.path.join(work, "manifest.toml")
    with open(args.manifest, "w") as f:
        f.write(manifest_text(os.path.abspath(args.model)))
    dirs = {name: os.path.join(work, name)
            for name in ("np1", "np2", "np3", "kill", "usr1", "term", "int", "pipe", "pidns")}
    for d in dirs.values():
        if not plan(args, d):
            check(False, f"kvaudit plan into {d}")
            return 1

    # 1. Rank-count invariance.
    times = {}
    for n in (1, 2, 3):
        launch = Launch(args, n, dirs[f"np{n}"], os.path.join(work, f"np{n}.log"))
        rc = launch.finish(900)
        times[n] = launch.seconds
        check(rc == 0, f"mpirun -np {n}: exit {rc} (expected 0) in {launch.seconds:.1f} s")
        summary = [ln for _, ln in launch.marks if "cells recorded in all" in ln]
        check(bool(summary), f"-np {n}: rank-0 summary printed: {summary[-1] if summary else ''}")
        progress = [ln for _, ln in launch.marks if re.search(r"\[rank \d+/\d+\] units", ln)]
        check(all("cells/s" in ln and "ETA" in ln for ln in progress) and progress,
              f"-np {n}: {len(progress)} progress lines with cells/s and ETA")
    n_cells = None
    reports = {}
    for n in (1, 2, 3):
        p, m, report = reduce(args, dirs[f"np{n}"])
        check(p.returncode == 0 and m is not None and m.group(6) == "0",
              f"reduce np{n}: exit {p.returncode}, {m.group(0) if m else p.stdout + p.stderr}")
        if m:
            n_cells = int(m.group(2))
        reports[n] = report
    if all(reports.values()):
        for n in (2, 3):
            identical, volatile = compare_reports(reports[1], reports[n], f"np1 vs np{n}")
            print(f"np1 vs np{n}: {identical} tables byte-identical; report.md: {volatile} "
                  "volatile line(s) excluded")
    recs = {n: records_by_cell(dirs[f"np{n}"]) for n in (1, 2, 3)}
    # Who and when computed a record (and its digest, which covers them) differ between launches.
    skip_fields = {"rank", "attempt", "t_start_ns", "t_end_ns", "prefill_ms", "decode_ms",
                   "record_digest", "cell_prefill_ms", "cell_capture_ms", "cell_extra_pass_ms",
                   "cell_select_ms", "cell_evict_ms", "cell_feed_ms", "cell_decode_ms", "shared_costs",
                   "threads"}
    for n in (2, 3):
        same = set(recs[1]) == set(recs[n])
        diffs = []
        for cid, row in recs[1].items():
            other = recs[n].get(cid)
            if other is None:
                continue
            for field in row.dtype.names:
                if field in skip_fields:
                    continue
                x, y = row[field], other[field]
                if isinstance(x, float) and x != x and y != y:
                    continue
                if x != y:
                    diffs.append((cid, field))
        check(same and not diffs, f"records np1 vs np{n}: same {len(recs[1])} cells, "
              f"{len(diffs)} field differences {diffs[:3]}")

    # 2. SIGKILL of rank 1 after its first unit, then a 3-rank rerun.
    launch = Launch(args, 2, dirs["kill"], os.path.join(work, "kill.log"))
    got = launch.wait_for(r"\[rank 1/2\] units 1/", 600)
    pid = launch.rank_pid(1) if got else None
    check(pid is not None, f"kill: rank 1 finished a unit and its pid is {pid}")
    if pid:
        os.kill(pid, signal.SIGKILL)
    rc = launch.finish(300)
    check(rc != 0, f"kill: mpirun exit {rc} after SIGKILL of rank 1 (expected non-zero)")
    tmps = glob.glob(os.path.join(dirs["kill"], "shards", "*.tmp"))
    check(len(tmps) >= 1, f"kill: {len(tmps)} .tmp shard(s) left by the killed launch")
    rerun = Launch(args, 3, dirs["kill"], os.path.join(work, "kill_rerun.log"))
    rc = rerun.finish(900)
    salvage = [ln for _, ln in rerun.marks if "salvage" in ln]
    check(rc == 0, f"kill: rerun with 3 ranks exit {rc} in {rerun.seconds:.1f} s; "
          f"salvage lines: {salvage}")
    ids = published_cells(dirs["kill"])
    check(len(ids) == len(set(ids)) and (n_cells is None or len(ids) == n_cells),
          f"kill: published shards hold {len(ids)} records, {len(set(ids))} distinct cells "
          f"(expected {n_cells})")
    p, m, _ = reduce(args, dirs["kill"])
    dup = re.search(r"duplicat", p.stdout + p.stderr)
    check(p.returncode == 0 and m is not None and m.group(6) == "0" and not dup,
          f"kill: reduce exit {p.returncode}: {m.group(0) if m else p.stdout}; 0 lost, "
          f"0 duplicated")

    # 3. SIGUSR1 after rank 0's first unit: a clean stop within one unit, exit 3, then resume.
    launch = Launch(args, 2, dirs["usr1"], os.path.join(work, "usr1.log"))
    got = launch.wait_for(r"\[rank 0/2\] units 1/", 600)
    t_signal = time.time()
    if got:
        os.kill(launch.proc.pid, signal.SIGUSR1)
    rc = launch.finish(300)
    check(got and rc == 3, f"usr1: mpirun exit {rc} (expected 3, incomplete) "
          f"{time.time() - t_signal:.1f} s after the signal")
    for r in (0, 1):
        after = [ln for t, ln in launch.marks
                 if t > t_signal and re.search(rf"\[rank {r}/2\] units", ln)]
        check(len(after) <= 1, f"usr1: rank {r} finished {len(after)} unit(s) after the signal")
    check(any("run again to resume" in ln for _, ln in launch.marks),
          "usr1: the summary says to run again")
    check(not glob.glob(os.path.join(dirs["usr1"], "shards", "*.tmp")), "usr1: no .tmp left")
    ids = published_cells(dirs["usr1"])
    check(0 < len(ids) and (n_cells is None or len(ids) < n_cells) and len(ids) == len(set(ids)),
          f"usr1: published shards read with h5py: {len(ids)} cells")
    rerun = Launch(args, 2, dirs["usr1"], os.path.join(work, "usr1_rerun.log"))
    rc = rerun.finish(900)
    check(rc == 0, f"usr1: rerun exit {rc} in {rerun.seconds:.1f} s")
    p, m, _ = reduce(args, dirs["usr1"])
    ids = published_cells(dirs["usr1"])
    check(p.returncode == 0 and m is not None and m.group(6) == "0" and
          len(ids) == len(set(ids)) == (n_cells or len(ids)),
          f"usr1: reduce exit {p.returncode}: {m.group(0) if m else p.stdout}; "
          f"{len(ids)} records, no duplicates")

    # Every resumed study reduces to the uninterrupted study's tables.
    def same_tables_as_np1(name):
        _, _, report = reduce(args, dirs[name])
        if report and reports.get(1):
            identical, _ = compare_reports(reports[1], report, f"np1 vs resumed '{name}'")
            print(f"np1 vs resumed '{name}': {identical} tables byte-identical")

    same_tables_as_np1("kill")
    same_tables_as_np1("usr1")

    # 4. SIGTERM / SIGINT to both ranks after rank 0's first unit; the run lock meanwhile.
    for name, sig in (("term", signal.SIGTERM), ("int", signal.SIGINT)):
        launch = Launch(args, 2, dirs[name], os.path.join(work, f"{name}.log"), tag=name)
        got = launch.wait_for(r"\[rank 0/2\] units 1/", 600)
        if name == "term" and got:
            second = run_cmd([args.kvaudit, "run", args.manifest, "--output-dir", dirs[name]],
                             env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                      OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"), timeout=120)
            check(second.returncode == 1 and "another `kvaudit run` is using this study (pid "
                  in second.stderr, f"lock: a second run on the study exits {second.returncode} "
                  f"naming the holder: {second.stderr.strip().splitlines()[-1:]}")
        pids = signal_ranks(launch, sig) if got else []
        rc = launch.finish(300)
        check(got and len(pids) == 2 and rc == 3,
              f"{name}: {signal.Signals(sig).name} to ranks {pids}: mpirun exit {rc} (expected 3)")
        check(not glob.glob(os.path.join(dirs[name], "shards", "*.tmp")), f"{name}: no .tmp left")
        check(any("run again to resume" in ln for _, ln in launch.marks),
              f"{name}: the summary says to run again")
        rerun = Launch(args, 2, dirs[name], os.path.join(work, f"{name}_rerun.log"))
        rc = rerun.finish(900)
        ids = published_cells(dirs[name])
        check(rc == 0 and len(ids) == len(set(ids)) == (n_cells or len(ids)),
              f"{name}: rerun exit {rc}; {len(ids)} records, no duplicates")
        same_tables_as_np1(name)

    # 5. SIGPIPE: stderr is a pipe we close after the first progress line (one process, no mpirun,
    # so that the rank itself writes into the pipe).
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.Popen([args.kvaudit, "run", args.manifest, "--output-dir", dirs["pipe"]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    first_unit = False
    for raw in proc.stderr:
        if b"units 1/" in raw:
            first_unit = True
            break
    proc.stderr.close()
    rc = proc.wait(600)
    check(first_unit and rc == 3, f"pipe: stderr closed after the first unit: exit {rc} "
          "(expected 3: SIGPIPE is a clean stop)")
    check(not glob.glob(os.path.join(dirs["pipe"], "shards", "*.tmp")) and
          len(published_cells(dirs["pipe"])) > 0, "pipe: the shard was published, no .tmp left")
    p = run_cmd([args.kvaudit, "run", args.manifest, "--output-dir", dirs["pipe"]], env=env,
                timeout=900)
    check(p.returncode == 0, f"pipe: rerun exit {p.returncode}")
    same_tables_as_np1("pipe")

    # 6. PID reuse: every launch in a fresh PID namespace.
    probe = run_cmd(["unshare", "-pf", "--mount-proc", "true"])
    if probe.returncode != 0:
        print("SKIP pid-reuse leg: `unshare -pf --mount-proc` is refused here "
              f"({probe.stderr.strip()}); the shard-name unit test covers the rule")
    else:
        rcs = []
        for attempt in (1, 2, 3):
            tag = f"pidns{attempt}"
            # One rank, so that each stopped launch leaves units for the next (6 units in all).
            launch = Launch(args, 1, dirs["pidns"], os.path.join(work, f"{tag}.log"),
                            prefix=("unshare", "-pf", "--mount-proc"), tag=tag)
            if attempt < 3:
                got = launch.wait_for(r"\[rank 0/1\] units 1/", 600)
                if got:
                    signal_ranks(launch, signal.SIGUSR1)
            rcs.append(launch.finish(900))
        names = sorted(os.path.basename(f) for f in
                       glob.glob(os.path.join(dirs["pidns"], "shards", "part-*.h5")))
        pids = {re.search(r"\.pid(\d+)\.", n).group(1) for n in names}
        attempts = {re.search(r"\.a(\d+)\.", n).group(1) for n in names}
        check(rcs == [3, 3, 0], f"pidns: exits {rcs} (expected [3, 3, 0])")
        check(len(pids) == 1 and len(attempts) == 3,
              f"pidns: {len(names)} shards, pid component(s) {sorted(pids)} (one repeated pid), "
              f"attempts {sorted(attempts)}")
        ids = published_cells(dirs["pidns"])
        check(len(ids) == len(set(ids)) == (n_cells or len(ids)),
              f"pidns: {len(ids)} records, {len(set(ids))} distinct (0 lost, 0 duplicated)")
        same_tables_as_np1("pidns")

    print("run times: " + ", ".join(f"{n} rank(s) {t:.1f} s" for n, t in times.items()))
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
