// The avx512vnni kernel set; CMake gives this file its target flags.
#define FERROX_ISA_AVX512VNNI 1
#define FERROX_ISA_ENTRY isa_kernels_avx512vnni
#define FERROX_ISA_LABEL "avx512vnni"
#include "kernels/isa_kernels_impl.inc"
