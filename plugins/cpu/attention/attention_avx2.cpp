#define FERROX_ATTENTION_ENTRY attention_kernels_avx2
#include "attention/attention_impl.inc"
