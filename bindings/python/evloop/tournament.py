"""The old name of ``python -m evloop.bench.tournament``, kept only so that commands written
before the experiment kit became the subpackage evloop.bench still run; it holds no code."""

import sys

from evloop.bench.tournament import main

if __name__ == "__main__":
    sys.exit(main())
