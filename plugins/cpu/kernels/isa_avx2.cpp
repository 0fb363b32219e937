// The avx2 kernel set; CMake gives this file its target flags.
#define FERROX_ISA_AVX2 1
#define FERROX_ISA_ENTRY isa_kernels_avx2
#define FERROX_ISA_LABEL "avx2"
#include "kernels/isa_kernels_impl.inc"
