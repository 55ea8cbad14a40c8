"""Every public name a package lists resolves: the lazy export tables name real modules.

The tables map a name to the module that defines it, as text; a module that moves (the ground
modules went to ``base/``) would leave a name that fails only when someone uses it.
"""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "promptflow_resume",
    "promptflow_resume.progress",
    "promptflow_resume.workflow",
    "promptflow_resume.batch",
    "promptflow_resume.show",
]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_listed_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = []
    for name in module.__all__:
        try:
            getattr(module, name)
        except (AttributeError, ImportError) as err:
            missing.append(f"{name}: {err}")
    assert not missing, f"{package} lists names it cannot give: {missing}"


def test_an_unknown_name_is_an_attribute_error() -> None:
    import promptflow_resume

    with pytest.raises(AttributeError, match="no_such_name"):
        promptflow_resume.no_such_name  # noqa: B018
