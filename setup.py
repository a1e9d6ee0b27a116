"""Installs the top-level folders `pipeline/` and `components/` as `dtfx.pipeline` and `dtfx.components`.

Everything else about the distribution is in pyproject.toml; only this mapping needs code,
because setuptools' package discovery cannot add a prefix to the packages it finds.
`dtfx` itself is a namespace package: no folder of that name exists in the repository.
"""

from setuptools import find_packages, setup

FOLDERS = ("pipeline", "components")

setup(
    package_dir={f"dtfx.{folder}": folder for folder in FOLDERS},
    packages=[f"dtfx.{package}" for package in find_packages(include=[f"{f}{s}" for f in FOLDERS for s in ("", ".*")])],
)
