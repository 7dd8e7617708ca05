// MIRRORED_SIMD_CLONES: compiles a hot CPU loop twice, for AVX2 and for
// baseline x86-64 (SSE2, what the project is built for), and picks the
// copy once at load time by what the CPU offers (GCC's target_clones, an
// ifunc). The binary still runs on any x86-64; on an AVX2 machine the
// loop's vectors are 8 floats instead of 4.
//
// Only "avx2": it does not switch on FMA, so a * b + c stays two roundings
// and both copies give bit-identical results (sqrt and division are exact
// in SSE and AVX alike). OpenMP's outlined bodies are not cloned: a
// `#pragma omp parallel` region calls a cloned function, never holds the
// loop itself.
//
//   MIRRORED_SIMD_CLONES void AddRange(const float* a, float* b, size_t n);
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MIRRORED_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MIRRORED_SIMD_CLONES
#endif
