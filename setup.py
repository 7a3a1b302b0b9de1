"""The optional compiled fast path of the protocol parser; everything else is declared in pyproject.toml.

``optional=True``: where the extension cannot be built (no C compiler, no Python headers, another Python than
CPython) setuptools warns and installs the package without it, and the pure-Python parser runs
(``jetstream_sync/_runtime/_scan.py`` says which one is in use). ``JETSTREAM_SYNC_PURE_PYTHON=1`` at install
time skips the build altogether.
"""

import os
import platform

from setuptools import Extension, setup

build_it = platform.python_implementation() == "CPython" and os.environ.get("JETSTREAM_SYNC_PURE_PYTHON", "") in (
    "",
    "0",
)
extensions = [Extension("jetstream_sync._runtime._cscan", ["jetstream_sync/_runtime/_cscan.c"], optional=True)]
setup(ext_modules=extensions if build_it else [])
