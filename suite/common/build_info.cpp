#include "suite/common/build_info.h"

#include "kvaudit_build_info.inc"

namespace kvaudit {

const BuildInfo& build_info() {
  static const BuildInfo info{KVAUDIT_VERSION_STRING,
                              KVAUDIT_GIT_COMMIT,
                              KVAUDIT_GIT_DIRTY,
                              KVAUDIT_BUILD_TYPE,
                              KVAUDIT_COMPILER,
                              KVAUDIT_CXX_FLAGS,
                              KVAUDIT_BUILT_WITH_CUDA != 0,
                              KVAUDIT_BUILT_WITH_SANITIZERS != 0};
  return info;
}

}  // namespace kvaudit
