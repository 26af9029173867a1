// CUDA's built-in vector types (uint3, dim3, float4, ...) and their make_* functions, spelled and
// aligned as in CUDA's vector_types.h, for generated sources compiled on the host.
#pragma once

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// DG_EMU_VEC2/4 define a CUDA vector type with CUDA's alignment and its make_ function.
#define DG_EMU_VEC2(T, name, align)             \
  struct __attribute__((aligned(align))) name { \
    T x, y;                                     \
  };                                            \
  inline name make_##name(T x, T y) { return name{x, y}; }
#define DG_EMU_VEC3(T, name) \
  struct name {              \
    T x, y, z;               \
  };                         \
  inline name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define DG_EMU_VEC4(T, name, align)             \
  struct __attribute__((aligned(align))) name { \
    T x, y, z, w;                               \
  };                                            \
  inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

DG_EMU_VEC2(float, float2, 8)
DG_EMU_VEC3(float, float3)
DG_EMU_VEC4(float, float4, 16)
DG_EMU_VEC2(int, int2, 8)
DG_EMU_VEC3(int, int3)
DG_EMU_VEC4(int, int4, 16)
DG_EMU_VEC2(unsigned int, uint2, 8)
DG_EMU_VEC4(unsigned int, uint4, 16)
DG_EMU_VEC2(double, double2, 16)
DG_EMU_VEC2(long long, longlong2, 16)
DG_EMU_VEC2(unsigned short, ushort2, 4)
DG_EMU_VEC4(unsigned short, ushort4, 8)
DG_EMU_VEC4(unsigned char, uchar4, 4)

inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }

#undef DG_EMU_VEC2
#undef DG_EMU_VEC3
#undef DG_EMU_VEC4
