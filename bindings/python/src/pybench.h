// evloop.bench (pybench.cpp: the glue to bench/'s kernels), registered into each extension module.
#ifndef EVLOOP_PYBENCH_H
#define EVLOOP_PYBENCH_H

#include <pybind11/pybind11.h>

void evloop_pybench_register(pybind11::module_ &m);

#endif
