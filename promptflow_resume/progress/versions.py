"""Which progress files this flow reads and writes, and what it says about the others.

A file names its format in three front matter keys (docs/spec.md 2.5)::

    flow_progress: 8          # the format number: changes only when an older reader would
                              #   misread a file that ignores what is new
    flow_progress_minor: 0    # raised by a release that writes keys the one before did not:
                              #   a reader of an older minor keeps them and says so once
    min_flow: 0.2.0           # the oldest flow that can resume the file

Formats 1 to 7 are read through the upgrades of ``migrations``; format 8 of any minor is read,
its keys this flow does not know kept as they are (``unknown``); a higher format number is
refused, naming the flow the file asks for::

    version_tuple("0.10.1") > version_tuple("0.9.0")   # True
"""

from __future__ import annotations

import re

from ..base.errors import UnsupportedVersionError
from ..base.release import VERSION as __version__

#: The format number this flow writes.
FORMAT_VERSION = 8
#: The minor of ``FORMAT_VERSION`` this flow writes: the newest it knows every key of.
FORMAT_MINOR = 0
#: The oldest flow that reads and resumes ``FORMAT_VERSION`` files: written as ``min_flow``.
MIN_FLOW = "0.2.0"
#: The oldest format this flow reads (upgrading it in memory).
OLDEST_FORMAT = 1

#: ``min_flow`` and flow's own version: three whole numbers.
VERSION_PATTERN = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})")


def version_tuple(text: str) -> tuple[int, ...]:
    """``"0.10.1"`` as ``(0, 10, 1)``, for comparing versions (ValueError for another form)."""
    if VERSION_PATTERN.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not a version like 0.2.0")
    return tuple(int(part) for part in text.split("."))


def flow_is_older_than(wanted: str) -> bool:
    """True when this flow's version is below ``wanted`` (a ``min_flow`` value)."""
    return version_tuple(__version__) < version_tuple(wanted)


def format_text(version: int, minor: int | None) -> str:
    """``8.1`` for format 8 of minor 1; ``7`` for an older format, which has no minor."""
    return str(version) if minor is None else f"{version}.{minor}"


def version_text() -> str:
    """What ``flow --version`` prints: the release, and the progress formats it reads and
    writes."""
    return (
        f"flow {__version__}\n"
        f"progress files: writes format {format_text(FORMAT_VERSION, FORMAT_MINOR)}; reads "
        f"formats {OLDEST_FORMAT} to {FORMAT_VERSION}, and {FORMAT_VERSION}.x of a newer minor "
        "(keeping the keys it does not know)"
    )


def _listed(names: list[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    rest = len(names) - most
    return shown + (f" and {rest} more" if rest > 0 else "")


def format_notice(path: str, written_in: str, unknown: list[str]) -> str | None:
    """The one notice about a file this flow reads but does not know all of (None when it
    knows all of it): a newer minor, or keys and marker fields it does not know."""
    ours = format_text(FORMAT_VERSION, FORMAT_MINOR)
    number, _, minor = written_in.partition(".")
    newer = number == str(FORMAT_VERSION) and minor.isdigit() and int(minor) > FORMAT_MINOR
    if newer:
        kept = f": {_listed(unknown)}" if unknown else ""
        return (
            f"{path}: written in progress format {written_in} by a newer flow; flow "
            f"{__version__} writes {ours} and keeps what it does not know as it is{kept}."
        )
    if unknown:
        many = "s" if len(unknown) != 1 else ""
        return (
            f"{path}: {len(unknown)} field{many} flow {__version__} (progress format {ours}) does "
            f"not know, kept as they are and not used: {_listed(unknown)}; `flow validate "
            "--strict` names each."
        )
    return None


def newer_format_error(
    version: int, min_flow: object, *, path: str, line: int | None
) -> UnsupportedVersionError:
    """The error for a file of a format number above this flow's: it names the flow the file
    asks for (its ``min_flow``) when it names one."""
    wanted = min_flow if isinstance(min_flow, str) and VERSION_PATTERN.fullmatch(min_flow) else None
    needs = f"flow {wanted} or later (its min_flow)" if wanted else "a newer flow"
    return UnsupportedVersionError(
        f"this progress file is in format {version}, which flow {__version__} cannot read (it "
        f"reads formats {OLDEST_FORMAT} to {FORMAT_VERSION}): it needs {needs}.",
        path=path,
        line=line,
        column=1,
        field="$.flow_progress",
        hint=(
            f"Install that flow (pip install 'promptflow-resume>={wanted}'); a pinned "
            f"pre-commit hook or GitHub Action needs rev: v{wanted} / @v{wanted} or later."
            if wanted
            else "Upgrade flow (pip install -U promptflow-resume) to read it."
        ),
    )


def min_flow_error(min_flow: str, *, path: str) -> UnsupportedVersionError:
    """The error for resuming (writing) a file whose ``min_flow`` is newer than this flow."""
    return UnsupportedVersionError(
        f"this progress file can be resumed by flow {min_flow} or later (its min_flow); this "
        f"is flow {__version__}, so it was not changed.",
        path=path,
        field="$.min_flow",
        hint=(
            f"Install that flow (pip install 'promptflow-resume>={min_flow}'); read commands "
            "(status, show, validate, diff) read the file with this one."
        ),
    )
