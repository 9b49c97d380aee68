"""`python -m ncclcheck` is the same as the `ncclcheck` console script; so is `python path/to/ncclcheck/__main__.py`
(launchers such as `fabric run` take a script path, not -m)."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:
    # Run as a file: its own directory (full of modules named config, model, api...) must not shadow anything;
    # the directory holding the package takes its place, so `import ncclcheck` finds this copy.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from ncclcheck.cli import main  # noqa: E402 - after the sys.path fix above

if __name__ == "__main__":
    sys.exit(main())
