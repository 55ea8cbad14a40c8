"""``flow serve``: a local dashboard of the runs in some folders, live, with actions.

Built on Starlette and uvicorn (the ``[serve]`` extra), imported only when the command runs.
The parts: ``runs`` (the served folders and run keys), ``security`` (token, Host check, CSRF,
headers), ``pages`` (HTML), ``live`` (server-sent events), ``actions`` (approve, deny,
answer, resume, merge, discard), ``app`` (the routes), ``server`` (bind and run)::

    from promptflow_resume.serve import serve
    serve([Path(".")], port=0)   # prints http://127.0.0.1:PORT/?token=...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazyexports import lazy_exports

if TYPE_CHECKING:
    from .server import serve

__all__ = ["serve"]

__getattr__ = lazy_exports(__name__, {"serve": "server"})
