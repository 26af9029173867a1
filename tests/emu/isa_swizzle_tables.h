// The PTX ISA's K-major swizzle atoms (section 9.7.15.5.1, "Shared Memory Matrix Layout", its
// figures of K-major 32-, 64- and 128-byte swizzling), transcribed for the wgmma and TMA tests.
#pragma once

namespace dg::emu::testing {

// The K-major swizzle atoms as the ISA's figures draw them: row r (of 8) of the atom stores its
// logical 16-byte chunk c at physical chunk kSwizzleS[r][c].
inline constexpr int kSwizzle128[8][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6},
                                          {2, 3, 0, 1, 6, 7, 4, 5}, {3, 2, 1, 0, 7, 6, 5, 4},
                                          {4, 5, 6, 7, 0, 1, 2, 3}, {5, 4, 7, 6, 1, 0, 3, 2},
                                          {6, 7, 4, 5, 2, 3, 0, 1}, {7, 6, 5, 4, 3, 2, 1, 0}};
inline constexpr int kSwizzle64[8][4] = {{0, 1, 2, 3}, {0, 1, 2, 3}, {1, 0, 3, 2}, {1, 0, 3, 2},
                                         {2, 3, 0, 1}, {2, 3, 0, 1}, {3, 2, 1, 0}, {3, 2, 1, 0}};
inline constexpr int kSwizzle32[8][2] = {{0, 1}, {0, 1}, {0, 1}, {0, 1},
                                         {1, 0}, {1, 0}, {1, 0}, {1, 0}};

}  // namespace dg::emu::testing
