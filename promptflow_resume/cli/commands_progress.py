"""Commands registered on the flow app (filled in by their module's owner)."""

from __future__ import annotations
