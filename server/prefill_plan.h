// How a prompt is cut into prefill calls so that each of its positions is
// computed bit for bit as a from-scratch prefill computes it, wherever the
// prompt resumes (docs/server.md, "Determinism").
//
// From scratch, a prompt is computed in calls that end at multiples of the
// chunk. Each row's products then take one of two paths, fixed by its
// call's row count alone (the CPU backend, docs/cpu.md): up to kFewRows rows
// equal the single-row product bit for bit; more take the panel GEMM, whose
// rows also do not depend on the call's other rows, start or length
// (tests/model/state_checkpoint.cpp measures both on qwen35, qwen35moe and
// qwen3next). The recurrent layers run per token on the host. So a position
// is computed exactly iff its call takes the path of its from-scratch call --
// not necessarily the same call: a prompt may resume in the middle of a
// chunk from a checkpoint taken at an earlier prompt's end.
#pragma once

#include <cstddef>

namespace ferrox::server {

struct PrefillShape {
    size_t chunk = 128;                     // from scratch, calls end at its multiples
    size_t most_rows = 0;                   // rows one call may hold (>= chunk)
    static constexpr size_t kFewRows = 16;  // the single-row path's most rows
};

// The end of the call that computes `size`-token prompt from `from` on, its
// positions before `from` computed as from scratch (or, when `from` is not
// a multiple of the chunk, by an earlier prompt that ended at `from`: then
// its chunk's rows took the path of a (from mod chunk)-row call). 0 when no
// call from there computes its rows exactly: a resume there would not be
// exact. At a chunk's start it is the from-scratch call.
size_t prefill_call_end(size_t from, size_t size, const PrefillShape& shape);

// Test only: a fault the scheduler tests must catch, process-wide. On, every
// call ends at the next chunk end whatever path its rows take (the plan
// before checkpoints at prompt ends).
void set_prefill_plan_fault(bool on);

}  // namespace ferrox::server
