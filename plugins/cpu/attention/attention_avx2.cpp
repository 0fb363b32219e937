#define FERROX_ATTENTION_ENTRY attend_group_avx2
#include "attention/attention_impl.inc"
