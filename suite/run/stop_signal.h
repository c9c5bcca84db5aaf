// Graceful-stop requests: SIGUSR1 (Slurm's --signal=USR1@secs, forwarded by srun and mpirun),
// SIGTERM (preemption), SIGINT (Ctrl-C) and SIGPIPE (`kvaudit run … | head` after head exited) set
// a flag that the rank loop polls between units. (With SIGPIPE handled, a write to the closed pipe
// fails with EPIPE instead of killing the process; the run publishes and exits 3 like any stop.)
//
// The handler only stores the signal number in a lock-free std::atomic<int> (async-signal-safe:
// no allocation, no locks, no I/O). A second signal of either kind keeps the first number. The
// contract of `kvaudit run` on a stop request (docs/design/hpc.md §Graceful stop): take no further
// unit,
// flush, publish the shard, exit 3 ("incomplete") if cells remain.
#pragma once

namespace kvaudit::run {

// Installs the handlers for SIGUSR1, SIGTERM, SIGINT and SIGPIPE (sigaction, SA_RESTART, all four
// blocked while the handler runs). Throws InternalError if sigaction fails.
void install_stop_handlers();

// Restores the dispositions saved by install_stop_handlers() (no-op if not installed).
void restore_stop_handlers();

// Whether a stop was requested, and by which signal (0 if none).
bool stop_requested();
int stop_signal_number();

// Clears the flag (tests).
void clear_stop_request();

}  // namespace kvaudit::run
