// gtest main of the tests that run the CPU engine (cpu_runtime, parity, unit_runner, run): refuses
// a bad KVAUDIT_CPU_ISA with the engine's own message and prints the active instruction-set level
// (runners/cpu/cpu_isa.h), so a log says which level a run checked; then runs the tests.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <stdexcept>

#include "runners/cpu/cpu_isa.h"

int main(int argc, char** argv) {
  bool listing = false;  // gtest_discover_tests parses the list: print nothing else then
  for (int i = 1; i < argc; ++i)
    listing = listing || std::strcmp(argv[i], "--gtest_list_tests") == 0;
  try {
    kvaudit::cpu::active_cpu_isa();
    if (!listing)
      std::cout << "CPU engine instruction-set level: " << kvaudit::cpu::describe_active_cpu_isa()
                << " (CPU: " << kvaudit::cpu::cpu_isa_name(kvaudit::cpu::detected_cpu_isa())
                << ")\n";
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
