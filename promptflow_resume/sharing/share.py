"""``flow share``: a copy of a run that is safe to commit to a pull request and resume elsewhere.

The copy is the run as ``load_progress`` sees it (journal replayed), with:

- secrets redacted again, in the transcript, the front matter's free text and every bundled
  sidecar file (belt and braces: flow redacts before writing, but the environment that knows
  which values are secret may differ from the one that wrote the run);
- every path it holds (workflow, recording, parent run) rewritten relative to the copy;
- its sidecar files (large tool outputs, archived entries, a per-run recording) bundled in the
  copy's own sidecar folder, ``<name>.files/`` beside it, with their sha256 recomputed where
  redaction changed a byte;
- a short blockquote at the top of the body saying what the file is and how to resume it;
- the child runs of its workflow steps (sub-workflows, docs/spec.md 4.10) shared the same way
  into the copy's own ``<name>.steps/<step-id>/progress.md``, with both links (the parent's
  ``steps.<id>.child``, the child's ``parent``) naming the copies, so the copy resumes and
  ``flow status`` shows the same tree. Set-aside children (``<step-id>.archive-N``) are history
  the run no longer links to: they stay behind;
- the child runs of its subagent calls (docs/spec.md 4.14), linked from
  ``steps.<id>.agents.<call-id>``, shared the same way into the copy's
  ``<name>.steps/<step-id>/agents/<call-id>/progress.md``, so a call that was cut off resumes
  inside its copied child.

Sidecars are bundled, never inlined into the transcript: an entry's text is what the model
sees on resume, so inlining a full output in place of its preview would change the next
request.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.clock import now_iso
from ..base.durable import replace_file
from ..base.errors import InputError
from ..base.paths import rebase, relative_path
from ..base.redact import Redactor
from ..base.safeopen import linked_file
from ..flowfolder import ignored_by_flow
from ..progress import load_progress
from ..progress.children import folder_name as call_folder
from ..progress.links import child_cycle_error, child_file
from ..progress.location import progress_file
from ..progress.model import LoadReport, Run, Unknown
from ..progress.sidecar import folder_name, is_binary, stem_of, write_sidecar
from ..run.handoffs import rebase_chain
from .common import git_root, inside, is_live, output_file
from .files import (
    archive_files,
    edited_digests,
    read_archive,
    read_sidecar,
    render_copy,
    sidecar_folder,
)


@dataclass
class ShareResult:
    """What ``share`` wrote and what it noticed."""

    source: Path
    output: Path
    run_id: str
    #: The workflow path as written in the copy (relative to the copy's folder).
    workflow_path: str
    #: Files bundled into the copy's sidecar folder (links relative to the copy).
    bundled: list[str] = field(default_factory=list)
    #: Secret values replaced now (0: the run was already clean in this environment).
    redacted: int = 0
    #: Home-folder paths replaced by ``~`` (only with ``scrub_home``).
    home_paths: int = 0
    #: Hand-edited entries carried over as edits (a resume of the copy sees them as such).
    edited_entries: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Child runs shared with it (paths of their copies, relative to the copy's folder),
    #: grandchildren included; their bundled files are in ``bundled`` under the same prefix.
    children: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``flow share --json``)."""
        data = asdict(self)
        data["source"] = str(self.source)
        data["output"] = str(self.output)
        return data


def default_share_path(run: Run, cwd: Path | None = None) -> Path:
    """``<run-id>.md`` in the working directory."""
    return (cwd or Path.cwd()) / f"{run.run_id}.md"


class _Scrubber:
    """Redacts (and optionally replaces the home folder in) every text of a run."""

    def __init__(self, redactor: Redactor, home: str | None) -> None:
        self.redactor = redactor
        self.count = 0
        self.home_count = 0
        self.where: list[str] = []
        self._home = (
            re.compile(re.escape(home.rstrip("/")) + r"(?![A-Za-z0-9_.-])")
            if home and len(home.rstrip("/")) > 1
            else None
        )

    def text(self, value: str, where: str) -> str:
        redacted, n = self.redactor.redact(value)
        if n:
            self.count += n
            if where not in self.where:
                self.where.append(where)
        if self._home is not None:
            redacted, m = self._home.subn("~", redacted)
            self.home_count += m
        return redacted

    def value(self, value: Any, where: str) -> Any:
        if isinstance(value, str):
            redacted = self.text(value, where)
            return value if redacted == value else redacted  # a kept value keeps its quotes
        if isinstance(value, dict):
            # A dict's kind (a one-line record, kept from a later flow) is kept.
            return type(value)({k: self.value(v, where) for k, v in value.items()})
        if isinstance(value, list):
            return type(value)(self.value(v, where) for v in value)
        return value

    def data(self, data: bytes, where: str) -> bytes:
        if is_binary(data):
            return data  # binary outputs carry no text secrets we can find; kept byte-exact
        return self.text(data.decode("utf-8"), where).encode("utf-8")


def _scrub(run: Run, scrub: _Scrubber) -> None:
    """Redact every free-text field of ``run`` in place."""
    for entry in run.transcript:
        entry.content = scrub.text(entry.content, f"entry {entry.id}")
    run.inputs = scrub.value(run.inputs, "inputs")
    run.reason = scrub.text(run.reason, "reason") if run.reason else run.reason
    run.config.params = scrub.value(run.config.params, "config.params")
    if run.config.base_url:
        run.config.base_url = scrub.text(run.config.base_url, "config.base_url")
    if run.workflow.description:
        run.workflow.description = scrub.text(run.workflow.description, "workflow.description")
    run.keywords = [scrub.text(k, "keywords") for k in run.keywords]
    for attempt in run.attempts:
        where = f"attempt {attempt.n}"
        attempt.reason = scrub.text(attempt.reason, where) if attempt.reason else attempt.reason
        attempt.notes = [scrub.text(note, where) for note in attempt.notes]
    if run.last_error is not None:
        run.last_error.message = scrub.text(run.last_error.message, "last_error")
    _scrub_kept(run, scrub)


def _scrub_kept(run: Run, scrub: _Scrubber) -> None:
    """Redact what a later flow wrote that this flow does not know (docs/spec.md 2.5): its
    values are kept in the copy, so they are redacted as free text."""
    if run.kept is not None and run.kept.mappings:
        mappings = tuple(
            (place, Unknown(tuple((k, scrub.value(v, "kept keys")) for k, v in u.values), u.order))
            for place, u in run.kept.mappings
        )
        run.kept = replace(run.kept, mappings=mappings)
    for entry in run.transcript:
        if entry.meta is not None and entry.meta.extra:
            where = f"entry {entry.id}"
            extra = tuple((k, scrub.text(v, where)) for k, v in entry.meta.extra)
            entry.meta = replace(entry.meta, extra=extra)


def _machine_specific(run: Run) -> list[str]:
    """Warnings about text that names this machine: the home folder, the host name."""
    home = str(Path.home()).rstrip("/")
    host = socket.gethostname()
    probes = [(home, "your home folder")] if len(home) > 1 else []
    if len(host) >= 4 and host != "localhost":
        probes.append((host, f"this machine's name ({host})"))
    warnings = []
    for needle, what in probes:
        ids = [e.id for e in run.transcript if needle in e.content]
        if ids:
            shown = ", ".join(map(str, ids[:10])) + (" …" if len(ids) > 10 else "")
            warnings.append(
                f"entries {shown} mention {what}; edit them in the copy if that must not be "
                "shared (or use --scrub-home for the home folder)."
            )
    for name, value in run.inputs.items():
        if isinstance(value, str) and (value.startswith("/") or re.match(r"[A-Za-z]:\\", value)):
            warnings.append(
                f"input {name!r} is an absolute path ({value}); a clone elsewhere may not have it."
            )
    return warnings


def steps_folder(path: Path) -> Path:
    """Where the child runs of the run in ``path`` live: ``<stem>.steps/`` beside it."""
    return path.parent / f"{stem_of(path)}.steps"


def _has_children(run: Run) -> bool:
    return any(state.child or state.agents for state in run.steps.values())


def _check_target(output: Path, source: Path, force: bool, *, children: bool = False) -> None:
    if output.resolve() == source.resolve():
        raise InputError(
            f"the shared copy would overwrite the run itself ({source}).",
            path=source,
            hint="Choose another output path with -o.",
        )
    folder = sidecar_folder(output)
    # The copy's children go in its own <stem>.steps/: an earlier one there is replaced
    # only with --force, like the file and its sidecar folder.
    steps = steps_folder(output) if children else None
    for target in (output, folder, *([steps] if steps is not None else [])):
        if (target.exists() or target.is_symlink()) and not force:
            raise InputError(
                f"{target} already exists.",
                path=target,
                hint="Choose another output path with -o, or pass --force to replace it.",
            )
    if force:
        if is_live(output):
            raise InputError(
                f"{output} is a run in use by a live flow process; it cannot be replaced.",
                path=output,
                hint="Choose another output path with -o.",
            )
        for old in (folder, *([steps] if steps is not None else [])):
            if old.is_symlink() or old.is_file():
                old.unlink()
            elif old.is_dir():
                shutil.rmtree(old)


def _header(result: ShareResult, output: Path, status: str) -> str:
    root = git_root(output.parent)
    shown = output.name if root is None else relative_path(output, root)
    lines = [
        f"**Shared copy of a flow run** ({result.run_id}), written by `flow share` on "
        f"{now_iso()}: the front matter is the checkpoint, the conversation below is the run.",
        "Secrets were redacted again and paths are relative to this file"
        + (f"; large outputs are in {folder_name(output)}/ beside it." if result.bundled else "."),
        (
            f"The run is completed; to try a step again: flow fork {shown} --at STEP"
            if status == "completed"
            else f"To continue the run: flow resume {shown}"
        )
        + (" (from the repository root)." if root is not None else "."),
        "This header is dropped the next time flow saves the file.",
    ]
    return "\n".join(lines)


def share(
    path: str | Path,
    out: str | Path | None = None,
    *,
    force: bool = False,
    scrub_home: bool = False,
    redactor: Redactor | None = None,
) -> ShareResult:
    """Write a pull-request-safe copy of the run at ``path``; see the module docstring."""
    source = progress_file(path)
    run, report = load_progress(source)  # a fresh object: changed in place, never saved back
    output = output_file(out, f"{run.run_id}.md") if out is not None else default_share_path(run)
    if not output.name.endswith(".md"):
        raise InputError(
            f"the shared copy must be a Markdown file ending in .md; got {output.name!r}.",
            path=output,
            hint="Name the output like run.md (its sidecar folder becomes run.files/).",
        )
    _check_target(output, source, force, children=_has_children(run))
    output.parent.mkdir(parents=True, exist_ok=True)
    created = [
        folder for folder in (sidecar_folder(output), steps_folder(output)) if not folder.exists()
    ]
    options = _Options(redactor or Redactor.from_environment(), scrub_home, [])
    try:
        result = _share_file(source, run, report, output, options, parent_copy=None)
    except BaseException:
        with contextlib.suppress(OSError):
            output.unlink()
        for folder in created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if ignored_by_flow(output):
        # Runs under .flow/ are kept out of git by flow's .gitignore: a copy shared there is
        # too, which a person would only find out when the pull request lacks it.
        result.warnings.append(
            f"{output} is under a .flow/ folder whose .gitignore (written by flow) ignores "
            "everything: `git add` skips it. Commit it with `git add -f`, or share it outside "
            ".flow/ (the default is ./<run-id>.md)."
        )
    return result


@dataclass
class _Options:
    """What every file of one ``share`` (the run and its children) is shared with."""

    redactor: Redactor
    scrub_home: bool
    #: The source files of the runs being shared, outermost first (to refuse a cycle).
    above: list[Path]


def _share_file(
    source: Path,
    run: Run,
    report: LoadReport,
    output: Path,
    options: _Options,
    *,
    parent_copy: Path | None,
) -> ShareResult:
    """Write the copy of one run (``parent_copy``: the copy of its parent, for a child)."""
    run.journal_seq = 0
    # A seal proves work done on this machine; elsewhere it cannot be checked, so the copy
    # carries none and whoever resumes it checks its pending calls (docs/spec.md 10.1).
    run.seal = None
    # File snapshots are objects of this repository, under a ref the copy does not carry
    # (docs/spec.md 12): elsewhere they name nothing.
    run.snapshots = None
    src_dir, out_dir = source.parent, output.parent
    result = ShareResult(
        source=source,
        output=output,
        run_id=run.run_id,
        workflow_path=rebase(run.workflow.path, src_dir, out_dir),
        edited_entries=list(report.edited_entries),
    )
    if is_live(source):
        result.warnings.append(
            "the run is in use by a live flow process; the copy holds its last checkpoint."
        )
    workflow_file = src_dir / run.workflow.path
    if not workflow_file.is_file():
        result.warnings.append(
            f"the workflow {run.workflow.path} does not exist; the copy cannot be resumed "
            "until it is restored (or resume it with --workflow)."
        )
    root = git_root(out_dir)
    if root is not None and not inside(workflow_file, root):
        result.warnings.append(
            f"the workflow ({workflow_file}) lies outside the repository of the copy ({root}), "
            "so a clone will not have it; commit the workflow too."
        )
    run.workflow.path = result.workflow_path
    rebase_chain(run, src_dir, out_dir)
    if parent_copy is not None and run.parent is not None:
        # A child's link names its parent's copy, not the run it was copied from.
        run.parent = {**run.parent, "path": relative_path(parent_copy, out_dir)}
    elif run.parent is not None and "path" in run.parent:
        run.parent = {**run.parent, "path": rebase(run.parent["path"], src_dir, out_dir)}

    scrub = _Scrubber(options.redactor, str(Path.home()) if options.scrub_home else None)
    _scrub(run, scrub)
    if not options.scrub_home:
        result.warnings += _machine_specific(run)

    _bundle(run, source, output, scrub, result)
    result.redacted, result.home_paths = scrub.count, scrub.home_count
    if scrub.count:
        run.redactions.count += scrub.count
        run.redactions.where += [w for w in scrub.where if w not in run.redactions.where]
    # Children first: the parent's file never links to a child copy that is not written.
    options.above.append(source)
    try:
        _share_children(run, source, output, options, result)
    finally:
        options.above.pop()
    keep = edited_digests(source, report)
    header = (
        _header(result, output, run.status)
        if parent_copy is None
        else _child_header(result, output, parent_copy, (run.parent or {}).get("kind", ""))
    )
    text = render_copy(run, path=output, keep=keep, header=header)
    replace_file(output, text.encode("utf-8", "surrogatepass"))
    load_progress(output)  # the copy must load as it stands, sidecars included
    return result


def _share_children(
    run: Run, source: Path, output: Path, options: _Options, result: ShareResult
) -> None:
    """Share each step's child run into the copy's ``<stem>.steps/<step-id>/progress.md``,
    and each subagent call's into ``<stem>.steps/<step-id>/agents/<call-id>/progress.md``."""
    for step_id, state in run.steps.items():
        if state.child:
            # The link always names where the copy's child goes, even for a child not
            # written yet (a crash between the call and the child): a resume of the copy
            # starts it there.
            where = f"{steps_folder(output).name}/{step_id}/progress.md"
            _share_child(source, output, options, result, step_id, state.child, where, None)
            state.child = where
        for call_id, link in state.agents.items():
            where = (
                f"{steps_folder(output).name}/{step_id}/agents/{call_folder(call_id)}/progress.md"
            )
            _share_child(source, output, options, result, step_id, link.child, where, call_id)
            link.child = where


def _share_child(
    source: Path,
    output: Path,
    options: _Options,
    result: ShareResult,
    step_id: str,
    link: str,
    where: str,
    call_id: str | None,
) -> None:
    """Share the child run ``link`` names (relative to ``source``) to ``where`` (relative to
    ``output``); a link whose file does not exist yet is only rewritten by the caller."""
    seen = {os.path.realpath(p) for p in options.above}
    if call_id is None:
        child_source = child_file(source, step_id, link)
    else:
        child_source = linked_file(
            source.parent,
            link,
            what="subagent run file",
            source=source,
            field=f"$.steps.{step_id}.agents.{call_id}.child",
        )
    if os.path.realpath(child_source) in seen:
        raise child_cycle_error(source, step_id, link, list(options.above), call_id)
    if not child_source.exists():
        return
    child_output = output.parent / where
    child_output.parent.mkdir(parents=True, exist_ok=True)
    child, child_report = load_progress(child_source)
    shared = _share_file(
        child_source, child, child_report, child_output, options, parent_copy=output
    )
    prefix = where.rsplit("/", 1)[0] + "/"
    result.children.append(where)
    result.children += [prefix + c for c in shared.children]
    result.bundled += [prefix + b for b in shared.bundled]
    result.redacted += shared.redacted
    result.home_paths += shared.home_paths
    what = f"step {step_id!r}" if call_id is None else f"call {call_id} of step {step_id!r}"
    result.warnings += [f"child run of {what}: {w}" for w in shared.warnings]


def _child_header(result: ShareResult, output: Path, parent_copy: Path, kind: str) -> str:
    shown = relative_path(parent_copy, output.parent)
    what = "subagent" if kind == "agent" else "sub-workflow"
    return "\n".join(
        [
            f"**Shared copy of a flow {what} run** ({result.run_id}), written by "
            f"`flow share` on {now_iso()} with the run of its parent ({shown}, relative to "
            "this file).",
            "It is resumed through its parent: `flow resume` that file.",
            "This header is dropped the next time flow saves the file.",
        ]
    )


def _bundle(run: Run, source: Path, output: Path, scrub: _Scrubber, result: ShareResult) -> None:
    """Copy sidecars, archives and a per-run recording into the copy's sidecar folder."""
    old_folder = folder_name(source)
    for entry in run.transcript:
        if entry.sidecar is None:
            continue
        data = scrub.data(read_sidecar(source, entry), f"entry {entry.id}")
        rel, digest = write_sidecar(output, entry.sidecar.rsplit("/", 1)[-1], data)
        entry.sidecar, entry.sidecar_sha256, entry.sidecar_bytes = rel, digest, len(data)
        result.bundled.append(rel)
    renames: dict[str, str] = {}
    for archive in archive_files(source):
        data = scrub.data(read_archive(archive), f"archive {archive.name}")
        rel, _ = write_sidecar(output, archive.name, data)
        renames[f"{old_folder}/{archive.name}"] = rel
        result.bundled.append(rel)
    recording = getattr(run.config, "recording", None)
    if recording:
        recorded = source.parent / recording
        if recorded.is_file() and recorded.parent.resolve() == source.parent.resolve():
            # A recording made with --record for this run lives beside it: it travels along.
            data = scrub.data(recorded.read_bytes(), "recording")
            rel, _ = write_sidecar(output, recorded.name, data)
            run.config.recording = rel
            result.bundled.append(rel)
        else:
            run.config.recording = rebase(recording, source.parent, output.parent)
    if renames:
        for attempt in run.attempts:
            attempt.notes = [_rename(note, renames) for note in attempt.notes]


def _rename(note: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        note = note.replace(old, new)
    return note


def share_run(path: str | Path, out: str | Path | None = None, **options: Any) -> Path:
    """Write a pull-request-safe copy of a run; returns the copy's path (see ``share``)."""
    return share(path, out, **options).output
