"""The optional compiled fast path of the protocol parser; everything else is declared in pyproject.toml.

``optional=True``: where the extension cannot be built (no C compiler, no Python headers, another Python than
CPython) setuptools warns and installs the package without it, and the pure-Python parser runs
(``jetstream_sync/_runtime/_scan.py`` says which one is in use). ``JETSTREAM_SYNC_PURE_PYTHON=1`` at install
time skips the build altogether.
"""

import os
import platform

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExtReplacingFiles(build_ext):
    """An in-place build (``pip install -e .``) copies the built library over the one in the source tree: written
    into the same file, it changes the code under any process that has it loaded (a running test suite, a
    worker), which then crashes. Removing the old file first gives the new library a new inode; processes
    that loaded the old one keep it until they exit."""

    def copy_file(self, infile: str, outfile: str, *args: object, **kwargs: object) -> object:
        if os.path.isfile(outfile) and not os.path.samefile(infile, outfile):
            os.unlink(outfile)
        return super().copy_file(infile, outfile, *args, **kwargs)


build_it = platform.python_implementation() == "CPython" and os.environ.get("JETSTREAM_SYNC_PURE_PYTHON", "") in (
    "",
    "0",
)
extensions = [
    Extension(
        "jetstream_sync._runtime._cscan",
        ["jetstream_sync/_runtime/_cscan.c", "jetstream_sync/_runtime/_csink.c"],
        depends=["jetstream_sync/_runtime/_cscan.h"],
        optional=True,
    )
]
setup(ext_modules=extensions if build_it else [], cmdclass={"build_ext": BuildExtReplacingFiles})
