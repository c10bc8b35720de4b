"""``python -m rocketsim.validation``: ``rocketsim validate`` (its command line
:mod:`rocketsim.command.validate_options`, the validation :mod:`rocketsim.command.validate`)."""

from __future__ import annotations

import sys

from rocketsim.command.validate_options import main

if __name__ == "__main__":
    sys.exit(main())
