#define FERROX_ATTENTION_ENTRY attention_kernels_avx512
#include "attention/attention_impl.inc"
