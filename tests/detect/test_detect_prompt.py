"""The resume prompt: one match ``[Y/n]``, several a numbered list; terminals and pipes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pexpect
import pytest

from promptflow_resume.detect import Candidate, Detection, choose
from promptflow_resume.detect.prompt import (
    MAX_ASKS,
    format_age,
    format_cost,
    progress_bar,
    question,
)
from tests.support.detect import NOW, iso
from tests.support.flowproc import flow_env


def candidate(
    run_id: str, *, done: int = 1, total: int = 4, exact: bool = False, written_here: bool = True
) -> Candidate:
    return Candidate(
        path=Path(f"/runs/{run_id}/progress.md"),
        run_id=run_id,
        status="interrupted",
        reason="Ctrl-C",
        steps_done=done,
        steps_total=total,
        cost_usd=0.1234,
        updated=iso(NOW - timedelta(hours=3)),
        description="Build a REST API with JWT login",
        score=0.8,
        matched=("api", "auth"),
        exact=exact,
        written_here=written_here,
    )


ONE = Detection(candidates=(candidate("run-a"),))
THREE = Detection(candidates=(candidate("run-a"), candidate("run-b"), candidate("run-c")))


class Console:
    """Scripted answers in, printed lines out."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []
        self.lines: list[str] = []

    def read(self, prompt: str) -> str:
        self.asked.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)

    def write(self, text: str) -> None:
        self.lines.append(text)


def ask(detection: Detection, *answers: str, **options: bool) -> tuple[str | None, Console]:
    console = Console(*answers)
    chosen = choose(
        detection,
        interactive=options.get("interactive", True),
        assume_yes=options.get("assume_yes", False),
        read=console.read,
        write=console.write,
        now=NOW,
    )
    return (chosen.run_id if chosen else None), console


@pytest.mark.parametrize(
    ("answers", "chosen"),
    [
        (["Y"], "run-a"),
        (["y"], "run-a"),
        (["yes"], "run-a"),
        ([""], "run-a"),  # Enter takes the default, the capital Y
        (["n"], None),
        (["No"], None),
        (["maybe", "y"], "run-a"),
        (["2", "n"], None),  # a number means nothing with one match
        (["?", "??", "???"], None),  # bounded: gives up and starts fresh
        ([], None),  # end of input
    ],
)
def test_one_match(answers: list[str], chosen: str | None) -> None:
    result, console = ask(ONE, *answers)
    assert result == chosen
    assert console.asked[0] == "Resume it? [Y/n] "
    assert len(console.asked) <= MAX_ASKS


@pytest.mark.parametrize(
    ("answers", "chosen"),
    [
        (["1"], "run-a"),
        (["2"], "run-b"),
        (["3"], "run-c"),
        ([" 2 "], "run-b"),
        ([""], "run-a"),  # Enter takes the best match
        (["y"], "run-a"),
        (["n"], None),
        (["4", "0", "2"], "run-b"),
        (["x", "x", "x", "1"], None),  # three unusable answers: start fresh
    ],
)
def test_several_matches(answers: list[str], chosen: str | None) -> None:
    result, console = ask(THREE, *answers)
    assert result == chosen
    assert console.asked[0] == "Resume which? [1/2/3/n — start fresh] "


def test_one_match_shows_id_status_steps_cost_age_and_description() -> None:
    _, console = ask(ONE, "n")
    text = "\n".join(console.lines)
    assert "run-a" in text
    assert "interrupted (Ctrl-C): 1/4 steps done" in text
    assert "$0.12 used" in text and "updated 3 h ago" in text
    assert "Build a REST API with JWT login" in text
    assert "matched: api, auth" in text


def test_several_matches_are_a_numbered_list_with_bars() -> None:
    _, console = ask(THREE, "n")
    numbered = [line for line in console.lines if line.lstrip()[:2] in ("1.", "2.", "3.")]
    assert len(numbered) == 3
    assert "run-b" in numbered[1] and "1/4" in numbered[1] and "$0.12" in numbered[1]
    assert progress_bar(1, 4) in numbered[1] and "3 h ago" in numbered[1]
    assert "Please answer" not in "\n".join(console.lines)


def test_garbage_is_asked_again_with_the_valid_answers() -> None:
    _, console = ask(THREE, "what", "2")
    assert "Please answer a number from 1 to 3, or n." in console.lines
    assert len(console.asked) == 2


def test_not_interactive_prints_matches_and_starts_fresh_without_reading() -> None:
    result, console = ask(THREE, interactive=False)
    assert result is None and console.asked == []
    assert any("no terminal" in line for line in console.lines)
    assert any("flow resume" in line for line in console.lines)


def test_assume_yes_takes_the_best_match() -> None:
    result, console = ask(THREE, assume_yes=True)
    assert result == "run-a" and console.asked == []
    assert len(console.lines) == 1 and "--yes" in console.lines[0]


def test_exact_match_resumes_with_one_line() -> None:
    exact = candidate("twin", exact=True)
    result, console = ask(Detection(candidates=(exact,), exact=exact), interactive=False)
    assert result == "twin" and console.asked == []
    assert len(console.lines) == 1
    assert "twin" in console.lines[0] and "--new" in console.lines[0]


def test_an_identical_run_written_elsewhere_is_offered_not_resumed() -> None:
    twin = candidate("twin", exact=True, written_here=False)
    detection = Detection(candidates=(twin,), exact=twin)
    result, console = ask(detection, interactive=False)
    assert result is None and console.asked == []
    assert "flow resume /runs/twin/progress.md" in "\n".join(console.lines)
    result, console = ask(detection, "y")
    assert result == "twin" and len(console.asked) == 1  # a person said yes


def test_assume_yes_never_takes_a_run_written_elsewhere() -> None:
    foreign = Detection(candidates=(candidate("run-a", written_here=False),))
    result, console = ask(foreign, assume_yes=True)
    assert result is None and console.asked == []
    assert "was not written by flow on this machine" in console.lines[0]


def test_no_match_prints_nothing() -> None:
    result, console = ask(Detection())
    assert result is None and console.lines == [] and console.asked == []


@pytest.mark.parametrize(
    ("done", "total", "unicode", "bar"),
    [
        (0, 4, True, "[░░░░░░░░░░]"),
        (1, 4, True, "[██░░░░░░░░]"),
        (2, 4, False, "[#####-----]"),
        (4, 4, False, "[##########]"),
        (9, 4, False, "[##########]"),
        (0, 0, False, "[----------]"),
    ],
)
def test_progress_bar(done: int, total: int, unicode: bool, bar: str) -> None:
    assert progress_bar(done, total, unicode=unicode) == bar


@pytest.mark.parametrize(
    ("age", "text"),
    [
        (timedelta(seconds=-5), "just now"),
        (timedelta(seconds=30), "just now"),
        (timedelta(minutes=12), "12 min ago"),
        (timedelta(hours=3, minutes=59), "3 h ago"),
        (timedelta(days=1, hours=2), "1 day ago"),
        (timedelta(days=9), "9 days ago"),
    ],
)
def test_format_age(age: timedelta, text: str) -> None:
    assert format_age(iso(NOW - age), NOW) == text


@pytest.mark.parametrize(
    ("usd", "text"), [(0.0, "$0.00"), (0.001, "<$0.01"), (0.1234, "$0.12"), (1234.5, "$1,234.50")]
)
def test_format_cost(usd: float, text: str) -> None:
    assert format_cost(usd) == text


def test_question_lists_every_number() -> None:
    assert question(2) == "Resume which? [1/2/n — start fresh] "


# --- through a real pseudo-terminal, and through a pipe ------------------------------------

DRIVER = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timezone
    from pathlib import Path
    from promptflow_resume.detect import Candidate, Detection, choose

    def make(run_id):
        return Candidate(
            path=Path("/runs") / run_id / "progress.md", run_id=run_id, status="failed",
            reason=None, steps_done=2, steps_total=5, cost_usd=0.5,
            updated="2026-11-21T10:00:00Z", description="Build a REST API", score=0.9,
            matched=("api",), exact=False,
        )

    count = int(sys.argv[1])
    found = Detection(candidates=tuple(make(f"run-{n}") for n in range(1, count + 1)))
    chosen = choose(
        found, interactive=sys.stdin.isatty(), assume_yes=False,
        now=datetime(2026, 11, 21, 12, tzinfo=timezone.utc),
    )
    print("CHOSEN", chosen.run_id if chosen else "none", flush=True)
    """
)


@pytest.fixture
def driver(tmp_path: Path) -> Path:
    path = tmp_path / "driver.py"
    path.write_text(DRIVER, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("count", "answers", "chosen"),
    [
        (1, ["Y"], "run-1"),
        (1, ["n"], "none"),
        (1, [""], "run-1"),
        (1, ["garbage", "y"], "run-1"),
        (3, ["2"], "run-2"),
        (3, [""], "run-1"),
        (3, ["n"], "none"),
        (3, ["garbage", "garbage", "garbage"], "none"),
    ],
)
def test_prompt_on_a_real_terminal(
    driver: Path, count: int, answers: list[str], chosen: str
) -> None:
    child = pexpect.spawn(
        sys.executable, [str(driver), str(count)], env=flow_env(), encoding="utf-8", timeout=30
    )
    try:
        prompt = r"Resume it\? \[Y/n\] " if count == 1 else r"Resume which\? \[1/2/3/n"
        for answer in answers:
            child.expect(prompt)
            child.sendline(answer)
        child.expect(r"CHOSEN (\S+)")
        assert child.match.group(1) == chosen
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_prompt_on_a_terminal_shows_the_list(driver: Path) -> None:
    child = pexpect.spawn(
        sys.executable, [str(driver), "3"], env=flow_env(), encoding="utf-8", timeout=30
    )
    try:
        child.expect(r"Resume which")
        shown = child.before
        child.sendline("n")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert "3 similar unfinished runs exist:" in shown
    for n in (1, 2, 3):
        assert f"{n}. run-{n}" in shown
    assert "2/5" in shown and "$0.50" in shown and "2 h ago" in shown


def test_without_a_terminal_it_never_waits(driver: Path) -> None:
    # stdin is a pipe that stays open and empty: reading it would block until the timeout.
    proc = subprocess.Popen(
        [sys.executable, str(driver), "2"],
        env=flow_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.wait(timeout=30)
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream:
                stream.close()
    assert proc.returncode == 0, err
    assert "2 similar unfinished runs exist:" in out
    assert "Resume which?" not in out
    assert "CHOSEN none" in out
