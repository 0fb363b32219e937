#define FERROX_ATTENTION_ENTRY attend_group_avx512
#include "attention/attention_impl.inc"
