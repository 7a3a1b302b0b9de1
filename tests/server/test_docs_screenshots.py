"""docs/screenshots.py photographs the built documentation site with headless Chromium: run as a reader runs it,
it leaves one PNG per page, of the size asked for and with something drawn in it. (No nats-server here: it sits
with the other tests that run a script of the repository end to end, and takes about a minute.)"""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import REPO_ROOT

SCRIPT = REPO_ROOT / "docs" / "screenshots.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


screenshots = _script()

needs_chromium = pytest.mark.skipif(
    screenshots.find_chromium() is None, reason="no Chromium on PATH (Debian: apt-get install -y chromium)"
)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk comes first, right after the signature)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


needs_docs_extra = pytest.mark.skipif(
    importlib.util.find_spec("mkdocstrings") is None or importlib.util.find_spec("material") is None,
    reason="the docs extra is not installed (pip install -e '.[docs]')",
)


@pytest.mark.slow
@needs_chromium
@needs_docs_extra
@pytest.mark.timeout(600)
def test_the_script_photographs_every_page(tmp_path):
    out = tmp_path / "shots"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--size", "1280x2000"],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = [out / f"{name}.png" for name in screenshots.PAGES]
    assert result.stdout.splitlines() == [str(png) for png in expected]
    for png in expected:
        assert png_size(png) == (1280, 2000)
        # a blank 1280x2000 page compresses to about 12 KB; a page of text, navigation and code to hundreds
        assert png.stat().st_size > 50_000, f"{png.name} is nearly empty ({png.stat().st_size} bytes)"


def test_a_missing_chromium_is_said_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--chromium", "no-such-chromium-binary"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr == "no Chromium found: apt-get install -y chromium, or give --chromium PATH\n"
    assert list(tmp_path.iterdir()) == []
