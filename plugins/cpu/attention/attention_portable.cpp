#define FERROX_ATTENTION_ENTRY attend_group_portable
#include "attention/attention_impl.inc"
