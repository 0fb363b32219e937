#define FERROX_ATTENTION_ENTRY attention_kernels_portable
#include "attention/attention_impl.inc"
