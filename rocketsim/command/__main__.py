"""``python -m rocketsim.command``: the ``rocketsim`` command."""

from __future__ import annotations

from rocketsim.command import entry

entry()
