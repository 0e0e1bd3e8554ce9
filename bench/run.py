"""``python -m lazyfuse bench``: every benchmark script in one command (``--quick``: short runs)."""
from __future__ import annotations

import sys

from bench import autotune, capture, core, programs, training


def main(argv=None) -> int:
    argv = list(argv or [])
    status = 0
    for script in (core, programs, capture, autotune, training):
        status |= script.main(argv)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
