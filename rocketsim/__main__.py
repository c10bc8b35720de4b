"""``python -m rocketsim``: the ``rocketsim`` command (:mod:`rocketsim.command`)."""

from __future__ import annotations

from rocketsim.command import entry

entry()
