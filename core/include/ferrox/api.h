// Marks the symbols libferrox_core exports; everything else stays hidden.
#ifndef FERROX_API_H
#define FERROX_API_H
#define FERROX_API __attribute__((visibility("default")))
#endif
