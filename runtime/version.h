// dyngen's version: frontends/python/dyngen/VERSION, the one place it is written (Note [One
// version] in the top CMakeLists.txt).
#pragma once

namespace dg {

// The version that enters every cache key (Note [Kernel cache key]) and that dg_version() gives.
const char* dyngen_version();

}  // namespace dg
