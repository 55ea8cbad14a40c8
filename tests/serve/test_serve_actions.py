"""``flow serve``'s actions over real HTTP, each checked in the files as the command would leave
them: review, merge and discard of a worktree run (docs/spec.md 9, 14.3), a denial with its
reason; and the list's grouping of a batch's rows, the run page's window of entries, and the
error for a missing ``[serve]`` extra."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urlencode

from promptflow_resume.progress import load_progress, render
from promptflow_resume.progress.examples import synthetic_run
from promptflow_resume.serve.security import Guard
from tests.run.test_worktree import BRANCH, PROGRESS, RUN, _repo, git
from tests.support import FIXTURES, xss
from tests.support.flowproc import flow, flow_env
from tests.support.serve import Server


def _post(server: Server, action: str, key: str, **fields: str) -> str:
    """Send an action's form; returns the note the run's page then shows."""
    csrf = Guard(server.token, "127.0.0.1", server.port).csrf
    status, headers, _ = server.request(
        "POST", f"/act/{action}/{key}", body=urlencode({"csrf": csrf, **fields})
    )
    assert status == 303, status
    page = server.get(headers["location"])[2]
    found = re.search(r'<p class="note[^"]*" id="note">([^<]*)</p>', page)
    assert found is not None, page[:2000]
    return found.group(1)


def test_review_merge_and_discard_a_worktree_run(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    done = flow(*RUN, cwd=repo)
    assert done.returncode == 0, done.stderr
    key = f"0/{PROGRESS}"
    with Server(repo) as server:
        listing = server.get("/")[2]
        assert '<span class="needs">worktree</span>' in listing
        page = server.get(f"/run/{key}")[2]
        assert 'id="merge"' in page and 'id="discard"' in page
        review = server.get(f"/review/{key}")[2]
        assert "hello.txt" in review and '<span class="add">+Have a nice day.</span>' in review
        note = _post(server, "discard", key)  # not confirmed: refused, nothing done
        assert "tick the box" in note
        assert BRANCH in git(repo, "branch", "--format=%(refname:short)")
        note = _post(server, "merge", key)
        assert note.startswith(f"{BRANCH} merged into main (")
        assert (repo / "docs" / "note.md").is_file()
        note = _post(server, "discard", key, confirm="1")
        assert note.startswith("discarded: worktree")
    run, _ = load_progress(repo / PROGRESS)
    assert run.worktree is not None and run.worktree.state == "discarded"
    assert BRANCH not in git(repo, "branch", "--format=%(refname:short)")


def test_deny_writes_the_reason_and_refuses_without_one(tmp_path: Path) -> None:
    path = xss.plant(tmp_path)[1]  # the run whose call waits for approval
    key = "0/.flow/runs/xss-b/progress.md"
    with Server(tmp_path) as server:
        call = load_progress(path)[0].approvals[0].call_id
        assert "a denial needs a reason" in _post(server, "deny", key, call=call, reason=" ")
        assert load_progress(path)[0].approvals[0].decision == "pending"
        note = _post(server, "deny", key, call=call, reason="not <this> one")
        assert note == f"denied: {call}. Resume the run."
    approval = load_progress(path)[0].approvals[0]
    assert (approval.decision, approval.reason) == ("denied", "not <this> one")


def test_a_batch_groups_its_rows_and_a_long_run_shows_its_last_entries(tmp_path: Path) -> None:
    batch = tmp_path / "nightly"
    for row in range(2):
        path = batch / "rows" / f"{row:04d}" / "progress.md"
        path.parent.mkdir(parents=True)
        run = xss.plain_run()
        run.run_id = f"20261121-232529-row-{row}"
        path.write_text(render(run), encoding="utf-8")
    (batch / "batch.md").write_text("not read by the list\n", encoding="utf-8")
    long = tmp_path / "long" / "progress.md"
    long.parent.mkdir()
    long.write_text(render(synthetic_run(450)), encoding="utf-8")
    with Server(batch, long.parent) as server:
        listing = server.get("/")[2]
        assert "batch nightly: 0 of 2 rows completed" in listing
        assert listing.count('<tr class="child" data-status') == 2
        page = server.get("/run/1/progress.md")[2]
        assert page.count('<section class="entry') == 300
        assert "150 earlier entries not shown" in page and 'id="entry-151"' in page
        every = server.get("/run/1/progress.md?start=0")[2]
        assert every.count('<section class="entry') == 450


def test_a_missing_extra_is_one_paragraph_and_exit_21(tmp_path: Path) -> None:
    # A starlette that cannot be imported, first on the path.
    fake = tmp_path / "fake"
    (fake / "starlette").mkdir(parents=True)
    (fake / "starlette" / "__init__.py").write_text(
        "raise ImportError('no starlette here', name='starlette')\n", encoding="utf-8"
    )
    env = flow_env()
    env["PYTHONPATH"] = f"{fake}:{env['PYTHONPATH']}"
    result = flow("serve", str(tmp_path), "--port", "0", cwd=tmp_path, env=env)
    assert result.returncode == 21, result.stderr
    assert result.stderr.startswith(
        "error: flow serve needs the [serve] extra (starlette is not installed)."
    )
    assert "pip install 'promptflow-resume[serve]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_run_links_its_child_runs_and_a_child_its_parent(tmp_path: Path) -> None:
    for name in ("nested.prompt.md", "nested-child.prompt.md", "nested.script.yaml"):
        shutil.copy(FIXTURES / "hostile" / name, tmp_path / name)
    done = flow("run", "nested.prompt.md", "--recording", "nested.script.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    parent = next((tmp_path / ".flow" / "runs").glob("*/progress.md"))
    key = f"0/{parent.relative_to(tmp_path).as_posix()}"
    child_key = key.replace("progress.md", "progress.steps/child/progress.md")
    with Server(tmp_path) as server:
        page = server.get(f"/run/{key}")[2]
        children = page[page.index('<ul id="children">') :]
        assert f'<a href="/run/{child_key}">' in children and "step child" in children
        child = server.get(f"/run/{child_key}")[2]
        assert f'child of <a href="/run/{key}">the parent run</a>' in child
        listing = server.get("/")[2]
        assert listing.count("data-key=") == 1  # the child is under its parent, not a row
