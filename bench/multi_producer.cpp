// MultiProducer (10 producer threads) and MultiProducerContention (100), started inside
// the timed region, 100,000 tasks in all. One op = one task. Kernel:
// kernels/multi_producer.cpp.
#include "harness.h"

BENCH_FAMILY("MultiProducer", [] {
    bench::add_for_targets("MultiProducer", BENCH_CAP_MPSC);
    bench::add_for_targets("MultiProducerContention", BENCH_CAP_MPSC);
});
