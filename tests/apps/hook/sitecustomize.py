"""tests/apps/run.sh's hook, put on PYTHONPATH so that every Python process of a run (the
suite and the processes it starts) loads it at startup. Controlled by the environment:

  EVLOOP_APPS_LOOP=evloop   asyncio.set_event_loop_policy(evloop.EventLoopPolicy()), as a
                            user installs evloop, right after asyncio is first imported
  EVLOOP_APPS_LOOP=stock    no policy: asyncio's own loop
  EVLOOP_APPS_COUNTS=DIR    count the event loops created, per class (asyncio.BaseEventLoop
                            .__init__, which every selector loop runs, evloop's included),
                            and write them at exit to DIR/loops-PID.json

Nothing is imported before asyncio is (an import hook waits for it), so a process that never
uses asyncio is unchanged. Any other sitecustomize on sys.path still runs, after this one.
"""

import os
import sys


def _install() -> None:
    import atexit
    import importlib.abc
    import importlib.machinery
    import json

    mode = os.environ["EVLOOP_APPS_LOOP"]
    counts_dir = os.environ.get("EVLOOP_APPS_COUNTS", "")
    counts: dict = {}

    def reset_counts() -> None:  # a forked child counts its own loops only
        counts.clear()

    os.register_at_fork(after_in_child=reset_counts)

    def write_counts() -> None:
        if not counts_dir or not counts:
            return
        try:
            path = os.path.join(counts_dir, "loops-%d.json" % os.getpid())
            with open(path, "w") as f:
                json.dump({"pid": os.getpid(), "argv": sys.argv[:4], "loops": counts}, f)
        except OSError:
            pass  # the run's folder is gone (a straggler process): nothing to report to

    def after_asyncio(asyncio) -> None:
        base = asyncio.base_events.BaseEventLoop
        orig_init = base.__init__

        def counting_init(self, *args, **kwargs):
            cls = type(self)
            name = "%s.%s" % (cls.__module__, cls.__qualname__)
            counts[name] = counts.get(name, 0) + 1
            return orig_init(self, *args, **kwargs)

        base.__init__ = counting_init
        atexit.register(write_counts)
        if mode == "evloop":
            import evloop

            asyncio.set_event_loop_policy(evloop.EventLoopPolicy())

    class Loader(importlib.abc.Loader):
        def __init__(self, inner) -> None:
            self._inner = inner

        def create_module(self, spec):
            return self._inner.create_module(spec)

        def exec_module(self, module) -> None:
            self._inner.exec_module(module)
            after_asyncio(module)

        def __getattr__(self, name):  # get_source, get_code, ...: the real loader's
            return getattr(self._inner, name)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "asyncio":
                return None
            sys.meta_path.remove(self)  # once only
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = Loader(spec.loader)
            return spec

    if "asyncio" in sys.modules:  # imported already by something earlier at startup
        after_asyncio(sys.modules["asyncio"])
    else:
        sys.meta_path.insert(0, Finder())


def _chain() -> None:
    """Runs the next sitecustomize on sys.path, if there is one (this one shadows it)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("EVLOOP_APPS_LOOP") in ("evloop", "stock"):
    _install()
_chain()
