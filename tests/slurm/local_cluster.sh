#!/usr/bin/env bash
# tests/slurm/local_cluster.sh — a real, throw-away Slurm cluster on this host: munged, slurmctld and
# one slurmd per emulated node, started as plain background processes (no systemd, no cgroups, no
# accounting database), loopback traffic only. Everything it writes (config, munge key, state,
# logs, PID files, fake GPU device nodes) lives under one run directory; nothing under /etc is read
# or changed. Config facts: docs/design/hpc.md §Local Slurm test cluster (tested with Debian 12's
# slurm-wlm 22.05.8 and munge 0.5.15).
#
# Use as a library (the ctest does):   source local_cluster.sh; cluster_start RUN NODES GPUS; ...;
#                                      cluster_stop RUN
# or by hand:                          local_cluster.sh start RUN [NODES [GPUS_PER_NODE]]
#                                      export SLURM_CONF=RUN/slurm.conf; sinfo; sbatch ...
#                                      local_cluster.sh stop RUN
#
# Layout: NODES emulated nodes n1..nN (NodeHostname = this host, NodeAddr 127.0.0.1, one slurmd
# each on its own port), CPUs = cores / NODES each, one partition `debug`. GPUS_PER_NODE > 0 gives
# each node that many fake GPUs: character devices with /dev/null's numbers (c 1 3), which pass
# slurmd's device check, so --gpus-per-task and CUDA_VISIBLE_DEVICES behave as on a GPU node (a
# count-only GRES drains the node in 22.05). Ports: slurmctld BASE, slurmd BASE+1..BASE+N, where
# BASE is the first of 6817, 16817, 26817, 36817 whose ports nobody listens on (so a concurrent
# run, or a system Slurm on 6817, does not collide). Every daemon's PID goes to RUN/pids (one
# "name pid" per line); cluster_stop signals exactly those PIDs (TERM, then KILL after 10 s).
#
# Needs: munged, slurmctld, slurmd, sinfo (Debian: munge slurmctld slurmd slurm-client); root
# (slurmd starts jobs as the submitting user; munged is dropped to the `munge` user with setpriv
# when that user exists).

# cluster_log RUN MESSAGE...: a timestamped progress line on stderr.
cluster_log() {
  shift
  printf '[local_cluster %s] %s\n' "$(date +%T)" "$*" >&2
}

# cluster_missing_tools: prints the missing programs (empty when all are there).
cluster_missing_tools() {
  local tool missing=()
  for tool in munged slurmctld slurmd sinfo sbatch srun scontrol setpriv; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  echo "${missing[*]}"
}

# port_in_use PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# cluster_pick_base_port NODES: the first base port whose NODES+1 ports are all free.
cluster_pick_base_port() {
  local nodes=$1 base p free
  for base in 6817 16817 26817 36817; do
    free=1
    for ((p = base; p <= base + nodes; p++)); do
      if port_in_use "$p"; then free=0; break; fi
    done
    if [ "$free" = 1 ]; then echo "$base"; return 0; fi
  done
  return 1
}

# cluster_record_pid RUN NAME PID
cluster_record_pid() {
  echo "$2 $3" >>"$1/pids"
}

# cluster_write_config RUN NODES GPUS BASE_PORT: slurm.conf and gres.conf into RUN.
cluster_write_config() {
  local run=$1 nodes=$2 gpus=$3 base=$4
  local host cores cpus mem_mb i gres_line="" dev=0 g
  host=$(hostname -s)
  cores=$(nproc)
  cpus=$((cores / nodes))
  [ "$cpus" -ge 1 ] || cpus=1
  mem_mb=$(awk -v n="$nodes" '/^MemTotal:/ { printf "%d", $2 / 1024 / n * 0.8 }' /proc/meminfo)
  [ "$gpus" -gt 0 ] && gres_line="Gres=gpu:$gpus"
  {
    echo "# Written by tests/slurm/local_cluster.sh for a throw-away local cluster; see that file."
    echo "ClusterName=kvaudittest"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmUser=$(id -un)"
    echo "SlurmdUser=root"
    echo "SlurmctldPort=$base"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$run/munge/munge.socket"
    echo "MpiDefault=none"
    echo "MailProg=/bin/true"
    echo "StateSaveLocation=$run/state"
    echo "SlurmdSpoolDir=$run/spool-%n"
    echo "SlurmctldPidFile=$run/slurmctld.pid"
    echo "SlurmdPidFile=$run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$run/slurmctld.log"
    echo "SlurmdLogFile=$run/slurmd-%n.log"
    # Per-node TmpFS: the PMIx plugin creates TmpFS/spmix_appdir_<uid>_<job>.<step>; two emulated
    # nodes sharing /tmp collide ("File exists") and srun --mpi=pmix -N 2 fails.
    echo "TmpFS=$run/tmp-%n"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "SchedulerType=sched/backfill"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "ReturnToService=2"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=30"
    echo "InactiveLimit=0"
    # sbatch --wait polls after 2 s, then multiplies its sleep by 4 while it is below both 32 s and
    # MinJobAge/2 (so that a finished job cannot be purged unseen): 16 gives polls every 8 s
    # instead of 32 s. Finished jobs stay visible to scontrol for 16 s.
    echo "MinJobAge=16"
    echo "KillWait=5"
    echo "Waittime=0"
    echo "JobRequeue=1"
    echo "GresTypes=gpu"
    for ((i = 1; i <= nodes; i++)); do
      echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + i)) CPUs=$cpus" \
        "RealMemory=$mem_mb $gres_line State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
  } >"$run/slurm.conf"
  : >"$run/gres.conf"
  for ((i = 1; i <= nodes; i++)); do
    for ((g = 0; g < gpus; g++)); do
      mknod "$run/fakegpu$dev" c 1 3 || return 1
      echo "NodeName=n$i Name=gpu File=$run/fakegpu$dev" >>"$run/gres.conf"
      dev=$((dev + 1))
    done
  done
}

# cluster_start_munge RUN: a private munged with its own key and socket under RUN/munge.
cluster_start_munge() {
  local run=$1 dir=$1/munge as_munge=() i
  mkdir -p "$dir"
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 711 "$dir"  # munged requires the socket directory to be searchable by all
  chmod 400 "$dir/munge.key"
  if [ "$(id -u)" = 0 ] && id munge >/dev/null 2>&1; then
    chown -R munge:munge "$dir"
    as_munge=(setpriv --reuid=munge --regid=munge --clear-groups)
  fi
  "${as_munge[@]}" munged --foreground --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" \
    >"$run/munged.out" 2>&1 &
  cluster_record_pid "$run" munged $!
  for ((i = 0; i < 100; i++)); do
    [ -S "$dir/munge.socket" ] && return 0
    kill -0 "$!" 2>/dev/null || break
    sleep 0.1
  done
  cluster_log "$run" "munged did not start; its output:"
  cat "$run/munged.out" "$dir/munged.log" >&2 2>/dev/null
  return 1
}

# cluster_start RUN NODES GPUS_PER_NODE: starts everything and waits until every node is idle
# (at most 60 s). Returns non-zero, with the daemons' logs on stderr, if that fails; the caller
# still runs cluster_stop.
cluster_start() {
  local run=$1 nodes=${2:-1} gpus=${3:-0} base i state t0 ms
  mkdir -p "$run/state"
  : >"$run/pids"
  for ((i = 1; i <= nodes; i++)); do mkdir -p "$run/tmp-n$i" "$run/spool-n$i"; done
  base=$(cluster_pick_base_port "$nodes") || {
    cluster_log "$run" "no free port range among 6817, 16817, 26817, 36817"
    return 1
  }
  cluster_write_config "$run" "$nodes" "$gpus" "$base" || return 1
  export SLURM_CONF=$run/slurm.conf
  cluster_start_munge "$run" || return 1
  slurmctld -D -i -f "$run/slurm.conf" >"$run/slurmctld.out" 2>&1 &
  cluster_record_pid "$run" slurmctld $!
  for ((i = 1; i <= nodes; i++)); do
    slurmd -D -N "n$i" -f "$run/slurm.conf" >"$run/slurmd-n$i.out" 2>&1 &
    cluster_record_pid "$run" "slurmd-n$i" $!
  done
  cluster_log "$run" "started munged, slurmctld (port $base), $nodes slurmd (ports" \
    "$((base + 1))..$((base + nodes))), $gpus fake GPU(s) per node; SLURM_CONF=$SLURM_CONF"
  t0=$(date +%s%N)
  for ((i = 0; i < 600; i++)); do
    state=$(sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
    if [ "$state" = "idle " ]; then
      ms=$((($(date +%s%N) - t0) / 1000000))
      cluster_log "$run" "all $nodes node(s) idle after $((ms / 1000)).$((ms % 1000 / 100)) s"
      return 0
    fi
    sleep 0.1
  done
  cluster_log "$run" "nodes not idle after 60 s (state: ${state:-none}); logs follow"
  sinfo -N -l >&2 2>&1
  tail -n 20 "$run"/slurmctld.log "$run"/slurmd-n*.log "$run"/*.out >&2 2>/dev/null
  return 1
}

# cluster_stop RUN: stops exactly the daemons listed in RUN/pids, in reverse start order (TERM,
# then KILL after 10 s), and removes the fake device nodes.
cluster_stop() {
  local run=$1 lines=() k name pid t
  [ -f "$run/pids" ] || return 0
  mapfile -t lines <"$run/pids"
  for ((k = ${#lines[@]} - 1; k >= 0; k--)); do
    read -r name pid <<<"${lines[k]}"
    kill -0 "$pid" 2>/dev/null || continue
    kill -TERM "$pid" 2>/dev/null
    for ((t = 0; t < 100; t++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      cluster_log "$run" "$name (pid $pid) ignored TERM for 10 s; sending KILL"
      kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
    cluster_log "$run" "stopped $name (pid $pid)"
  done
  rm -f "$run"/fakegpu* "$run/pids"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  case "${1:-}" in
    start)
      [ $# -ge 2 ] || { echo "usage: $0 start RUN [NODES [GPUS_PER_NODE]]" >&2; exit 1; }
      absent=$(cluster_missing_tools)
      [ -z "$absent" ] || { echo "$0: missing programs: $absent" >&2; exit 1; }
      mkdir -p "$2"
      run=$(cd "$2" && pwd)
      cluster_start "$run" "${3:-1}" "${4:-0}" || { cluster_stop "$run"; exit 1; }
      echo "export SLURM_CONF=$run/slurm.conf"
      ;;
    stop)
      [ $# -ge 2 ] || { echo "usage: $0 stop RUN" >&2; exit 1; }
      cluster_stop "$(cd "$2" && pwd)"
      ;;
    *)
      echo "usage: $0 start RUN [NODES [GPUS_PER_NODE]] | stop RUN" >&2
      exit 1
      ;;
  esac
fi
