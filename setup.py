"""Builds the C codec samsa.wire._speedups (wire/_speedups.c) and the batch CRC samsa.wire._crc32c
(wire/_crc32c.c); everything else is in pyproject.toml.

`pip install .` and `pip install -e .` compile it; `python setup.py build_ext --inplace` builds it in
the source tree (for a checkout on PYTHONPATH). Without it, or with SAMSA_PURE=1, the pure-Python
codec runs (wire/codec.py).
"""

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    """The repository root is the package `samsa`: this script is not one of its modules."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if (m[0], m[1]) != ("samsa", "setup")]


setup(ext_modules=[Extension("samsa.wire._speedups", ["wire/_speedups.c"]),
                   Extension("samsa.wire._crc32c", ["wire/_crc32c.c"])],
      cmdclass={"build_py": BuildPy})
