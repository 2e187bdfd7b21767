"""evloop.bench: the benchmark subpackage, the API for scripting experiments on evloop.

One subpackage with everything that measures; the loop modules (``evloop._arena``,
``evloop._chunk``) carry no benchmark code and never import it.

- :func:`run`, :func:`name`, :func:`families`, :func:`shapes`, :func:`floors`,
  :func:`systems`, :class:`Result` (``evloop.bench.kernels``): bench/'s C benchmark kernels
  with their parameters, the GIL released for the whole run, in the extension module
  ``evloop.bench._kernels`` (both ingress variants in one module);
- ``python -m evloop.bench.tournament`` (``evloop.bench.tournament``): the tournament's
  rounds with these kernels, as round JSON and a table; the report is tournament/'s, in a
  checkout (``tournament/tournament.py --from-json``);
- ``python -m evloop.bench.tournament --asyncio`` (``evloop.bench.aio``): evloop's asyncio
  loop beside uvloop and the stock loop.

::

    from evloop import bench
    r = bench.run("PingPongLatency", shape="cold", variant="chunk", spin_ns=20000)
    print(r.name, r.p50, r.p99, r.counters["wakes_per_op"])
"""

from .kernels import DEFAULT_ITERATIONS, Result, families, floors, name, run, shapes, systems

__all__ = ["Result", "run", "name", "families", "shapes", "floors", "systems",
           "DEFAULT_ITERATIONS"]
