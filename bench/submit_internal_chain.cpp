// SubmitInternalChain: a chain of 32 internal submits, each made by the previous hop on
// the loop thread. One op = one hop; p50 / p99 are of whole chains. Kernel:
// kernels/submit_internal_chain.cpp.
#include "harness.h"

BENCH_FAMILY("SubmitInternalChain", [] { bench::add_for_targets("SubmitInternalChain", 0); });
