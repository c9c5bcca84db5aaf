// SIGUSR1/SIGTERM/SIGINT/SIGPIPE → a stop flag (see stop_signal.h).
#include "suite/run/stop_signal.h"

#include <signal.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/errors.h"

namespace kvaudit::run {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "the stop flag must be lock-free to be set from a signal handler");

struct saved_action {
  struct sigaction action {};
  bool saved = false;
};
constexpr std::array kStopSignals{SIGUSR1, SIGTERM, SIGINT, SIGPIPE};
std::array<saved_action, kStopSignals.size()> g_saved;

extern "C" void on_stop_signal(int signal_number) {
  int expected = 0;
  g_stop_signal.compare_exchange_strong(expected, signal_number);
}

void install(int signal_number, saved_action& saved) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int blocked : kStopSignals) sigaddset(&action.sa_mask, blocked);
  action.sa_flags = SA_RESTART;
  if (sigaction(signal_number, &action, &saved.action) != 0) {
    throw InternalError(std::string("cannot install the handler for ") + strsignal(signal_number) +
                        ": " + std::strerror(errno));
  }
  saved.saved = true;
}

void restore(int signal_number, saved_action& saved) {
  if (!saved.saved) return;
  sigaction(signal_number, &saved.action, nullptr);
  saved.saved = false;
}

}  // namespace

void install_stop_handlers() {
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) install(kStopSignals[i], g_saved[i]);
}

void restore_stop_handlers() {
  for (std::size_t i = 0; i < kStopSignals.size(); ++i) restore(kStopSignals[i], g_saved[i]);
}

bool stop_requested() { return g_stop_signal.load() != 0; }
int stop_signal_number() { return g_stop_signal.load(); }
void clear_stop_request() { g_stop_signal.store(0); }

}  // namespace kvaudit::run
