// MultiProducer (10 producer threads) and MultiProducerContention (100), started inside
// the timed region, 100,000 tasks in all. One op = one task. Kernel:
// kernels/multi_producer.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const char *family : {"MultiProducer", "MultiProducerContention"})
        for (const bench::Target &t : bench::targets(BENCH_CAP_MPSC))
            bench::add_kernel(family, t);
}

} // namespace

BENCH_FAMILY("MultiProducer", register_family);
