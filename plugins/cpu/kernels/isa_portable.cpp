// The portable kernel set; CMake gives this file its target flags.

#define FERROX_ISA_ENTRY isa_kernels_portable
#define FERROX_ISA_LABEL "portable"
#include "kernels/isa_kernels_impl.inc"
