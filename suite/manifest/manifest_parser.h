// Reading a TOML manifest (toml++) into a validated Manifest. Every error is reported as
// `file:line:column: field: what is wrong`; all errors of a file are reported together.
#pragma once

#include <filesystem>
#include <string_view>

#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

// Parses and validates the manifest text; `file` names it in messages and anchors relative paths.
// Throws ManifestError (an InputError) listing every problem. Does not touch the file system.
Manifest parse_manifest(std::string_view text, const std::filesystem::path& file);

// Reads the file, then parse_manifest. A missing or unreadable file is an InputError.
Manifest load_manifest(const std::filesystem::path& file);

}  // namespace kvaudit::manifest
