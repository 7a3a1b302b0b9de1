"""Screenshots of the documentation site as a reader's browser shows it, to look at after a change to the docs.

    python docs/screenshots.py                 # into a new temporary directory (printed)
    python docs/screenshots.py /tmp/shots      # into /tmp/shots
    python docs/screenshots.py --chromium /usr/bin/chromium --size 1280x2000

It builds the site with ``mkdocs build --strict`` into a temporary directory (the repository's ``site/`` is left
alone), serves it on 127.0.0.1 from a thread of this process, and has headless Chromium (Debian's ``chromium``
package: ``apt-get install -y chromium``) save a PNG of each page in :data:`PAGES`. A failed build, a missing
Chromium or a screenshot Chromium did not write ends the script with a message and exit status 1.

Not part of the site (``exclude_docs`` in mkdocs.yml); tests/server/test_docs_screenshots.py runs it.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

#: the repository's root, where mkdocs.yml is
ROOT = Path(__file__).resolve().parent.parent

#: what to photograph: the PNG's name (without .png) and the page's path in the built site
PAGES = {
    "home": "",
    "getting-started": "getting-started/",
    "consuming": "guides/consuming/",
    "reference-client": "reference/client/",
}

#: seconds one build or one screenshot may take before the script gives up
BUILD_TIMEOUT = 300.0
SHOT_TIMEOUT = 60.0


class ScreenshotError(RuntimeError):
    """A step failed; the message says which and what it printed."""


def find_chromium(given: str | None = None) -> str | None:
    """The Chromium to run: ``given``, else the first of Debian's and others' names found on PATH."""
    if given:
        return shutil.which(given)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def build_site(into: Path) -> None:
    """``mkdocs build --strict`` of the repository's site into ``into``; a warning fails it."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"), "-d"]
    result = subprocess.run(
        [*command, str(into)],
        check=False,  # its output goes into the error raised below
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    if result.returncode != 0:
        raise ScreenshotError(f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site without a log line per request."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the name http.server gives it
        return  # the site is served for this script alone: a request log would only bury its output


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 (a free port) from a daemon thread; yields the base URL, stops on exit."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-screenshots-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def screenshot(chromium: str, url: str, png: Path, size: tuple[int, int], profile: Path) -> None:
    """One PNG of ``url`` at ``size`` (width, height) by headless Chromium, with a profile of its own."""
    command = [
        chromium,
        "--headless",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}",
        "--virtual-time-budget=5000",  # lets the theme's scripts lay out the page (navigation, code copy buttons)
        f"--screenshot={png}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox (a container's shell)
    result = subprocess.run([*command, url], check=False, capture_output=True, text=True, timeout=SHOT_TIMEOUT)
    if result.returncode != 0 or not png.is_file():
        raise ScreenshotError(f"chromium did not save {png.name} of {url} (exit {result.returncode}):\n{result.stderr}")


def take(out: Path, chromium: str, size: tuple[int, int]) -> list[Path]:
    """Build, serve and photograph every page of :data:`PAGES` into ``out``; the PNGs' paths."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jetstream-sync-site-") as scratch:
        site = Path(scratch) / "site"
        build_site(site)
        taken = []
        with serve(site) as base:
            for name, path in PAGES.items():
                png = out / f"{name}.png"
                screenshot(chromium, base + path, png, size, Path(scratch) / "chromium-profile")
                taken.append(png)
        return taken


def _size(text: str) -> tuple[int, int]:
    width, sep, height = text.partition("x")
    if not sep or not width.isdigit() or not height.isdigit() or int(width) < 1 or int(height) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT, e.g. 1280x2000")
    return int(width), int(height)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``out`` directory (default a new temporary one), ``--chromium``, ``--size``."""
    parser = argparse.ArgumentParser(description="Screenshots of the documentation site by headless Chromium.")
    parser.add_argument("out", nargs="?", type=Path, help="directory for the PNGs (default: a new temporary one)")
    parser.add_argument("--chromium", help="the Chromium binary (default: chromium on PATH)")
    parser.add_argument("--size", type=_size, default=(1280, 2000), help="window size, WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("no Chromium found: apt-get install -y chromium, or give --chromium PATH", file=sys.stderr)
        return 1
    out = args.out if args.out is not None else Path(tempfile.mkdtemp(prefix="jetstream-sync-screenshots-"))
    try:
        taken = take(out, chromium, args.size)
    except (ScreenshotError, subprocess.TimeoutExpired) as exc:
        print(exc, file=sys.stderr)
        return 1
    for png in taken:
        print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
