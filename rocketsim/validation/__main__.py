"""``python -m rocketsim.validation``: ``rocketsim validate`` (:mod:`rocketsim.command.validate`)."""

from __future__ import annotations

import sys

from rocketsim.command.validate import main

if __name__ == "__main__":
    sys.exit(main())
