// Graceful-stop requests: SIGUSR1 (Slurm's --signal=USR1@secs, forwarded by srun and mpirun) and
// SIGTERM (preemption) set a flag that the rank loop polls between units.
//
// The handler only stores the signal number in a lock-free std::atomic<int> (async-signal-safe:
// no allocation, no locks, no I/O). A second signal of either kind keeps the first number. The
// contract of `kvaudit run` on a stop request (docs/design/hpc.md §Graceful stop): take no further
// unit,
// flush, publish the shard, exit 3 ("incomplete") if cells remain.
#pragma once

namespace kvaudit::run {

// Installs the handlers for SIGUSR1 and SIGTERM (sigaction, SA_RESTART, both blocked while the
// handler runs). Throws InternalError if sigaction fails.
void install_stop_handlers();

// Restores the dispositions saved by install_stop_handlers() (no-op if not installed).
void restore_stop_handlers();

// Whether a stop was requested, and by which signal (0 if none).
bool stop_requested();
int stop_signal_number();

// Clears the flag (tests).
void clear_stop_request();

}  // namespace kvaudit::run
