// kvaudit version: what this binary is and what it links: git commit, build flags, HDF5, MPI, CUDA.
#include <hdf5.h>
#include <mpi.h>

#include <iostream>

#include "runners/cuda/device_probe.h"
#include "suite/cli/command.h"
#include "suite/common/build_info.h"
#include "suite/run/cuda_engine.h"

namespace kvaudit::cli {

Command version_command() {
  Command c;
  c.name = "version";
  c.summary = "print version, git commit, build flags and the libraries and devices in use";
  c.usage = "kvaudit version";
  c.body = [](const po::variables_map&) {
    const BuildInfo& b = build_info();
    std::cout << "kvaudit " << b.version << "\n";
    std::cout << "git commit      " << b.git_commit << (b.git_dirty == "true" ? " (dirty)" : "")
              << "\n";
    std::cout << "build           " << b.build_type << ", " << b.compiler
              << (b.with_sanitizers ? ", ASan+UBSan" : "") << "\n";
    std::cout << "flags           " << b.cxx_flags << "\n";
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    std::cout << "HDF5            " << maj << "." << min << "." << rel << "\n";
    char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi_version, &len);
    std::string mpi(mpi_version, static_cast<std::size_t>(len));
    if (auto nl = mpi.find_first_of("\r\n,"); nl != std::string::npos) mpi.resize(nl);
    std::cout << "MPI             " << mpi << "\n";
    std::cout << "CUDA engine     "
              << (run::cuda_engine_built() ? "built (kvaudit run --device cuda|auto)"
                                           : "not built (every unit runs on the CPU)")
              << "\n";
    const cuda::DeviceProbe p = cuda::probe_devices();
    if (!p.built_with_cuda) {
      std::cout << "CUDA            " << p.unavailable_reason << "\n";
    } else {
      std::cout << "CUDA runtime    " << cuda::cuda_version_text(p.runtime_version) << ", driver "
                << cuda::cuda_version_text(p.driver_version) << "\n";
      if (p.devices.empty()) std::cout << "GPU             none: " << p.unavailable_reason << "\n";
      for (const auto& d : p.devices) {
        std::cout << "GPU " << d.index << "           " << d.name << " (sm_" << d.compute_major
                  << d.compute_minor << ", " << (d.total_memory_bytes >> 20) << " MiB, " << d.uuid
                  << ")\n";
      }
    }
    return 0;
  };
  return c;
}

}  // namespace kvaudit::cli
