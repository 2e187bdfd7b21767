// SubmitInternalChain: a chain of 32 internal submits, each made by the previous hop on
// the loop thread. One op = one hop; p50 / p99 are of whole chains. Kernel:
// kernels/submit_internal_chain.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add_kernel("SubmitInternalChain", t);
}

} // namespace

BENCH_FAMILY("SubmitInternalChain", register_family);
