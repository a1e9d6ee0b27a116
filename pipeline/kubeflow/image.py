"""The image every Kubeflow step runs in, as the Dockerfile builds it, and whether an interpreter here is the same.

The Dockerfile is the one home of the image's base (its ARGs PYTHON_VERSION and BEAM_VERSION name Beam's SDK image)
and of its environment variables; requirements.lock is the home of every version of the image's packages, installed
into the image as into `make setup`'s .venv (which adds the development tools of requirements-dev.lock, never one of
these packages). `dtfx rehearse` reads the image once (`image_environment`), runs each step with an interpreter of
this machine with the image's `ENV`s (`pod_environment`), and first asks `environment_problems` whether that
interpreter's Python and its TFX, TensorFlow and Beam are the image's: a step that runs here on other versions proves
nothing about the cluster.

`python -m dtfx.pipeline.kubeflow.image python` prints the image's Python version (`make lint` gives it to vermin).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from dtfx.pipeline.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "requirements.lock"
# The packages whose versions decide how a step behaves; the rehearsal refuses an interpreter where they differ.
DECISIVE_PACKAGES = ("tfx", "tensorflow", "apache-beam")
# Beam's SDK images are the only base whose Python can be told from its name.
BEAM_SDK_IMAGE = re.compile(r"^apache/beam_python(?P<python>3\.\d+)_sdk:(?P<beam>\S+)$")
# Environment variables that say where the image's Python lives: here the chosen interpreter takes that part.
INTERPRETER_VARIABLES = ("PATH", "VIRTUAL_ENV")
_PROBE = (
    "import json, sys\nfrom importlib import metadata\n"
    "def version(name):\n    try:\n        return metadata.version(name)\n    except metadata.PackageNotFoundError:\n"
    "        return None\n"
    "print(json.dumps({'python': '%d.%d' % sys.version_info[:2], 'packages': {n: version(n) for n in sys.argv[1:]}}))"
)


@dataclasses.dataclass(frozen=True)
class ImageEnvironment:
    """What a step meets in the image: the base image, its Python (major.minor), the decisive packages' versions,
    and the Dockerfile's `ENV`s."""

    base: str
    python: str
    packages: dict[str, str]
    env: dict[str, str]


def image_environment(dockerfile: Path = DOCKERFILE, lock: Path = LOCK) -> ImageEnvironment:
    """The image the Dockerfile builds, read from it and from requirements.lock; UserError when either is missing
    or the base is not one whose Python is known."""
    for path in (dockerfile, lock):
        if not path.is_file():
            raise UserError(f"{path} is missing: the pipeline image's environment is read from the Dockerfile and "
                            "requirements.lock of a dtfx checkout")
    instructions = instructions_of(dockerfile.read_text(encoding="utf-8"))
    args: dict[str, str] = {}
    env: dict[str, str] = {}
    base = None
    for keyword, words in instructions:
        if keyword == "ARG":
            args.update(word.split("=", 1) for word in words if "=" in word)
        elif keyword == "FROM" and base is None:
            base = _substitute(words[0], args)
        elif keyword == "ENV":
            env.update(word.split("=", 1) for word in words if "=" in word)
    match = BEAM_SDK_IMAGE.match(base or "")
    if match is None:
        raise UserError(f"{dockerfile}: the image's base {base!r} is not one of Beam's SDK images "
                        "(apache/beam_pythonX.Y_sdk:VERSION), so its Python version cannot be told")
    pins = locked_versions(lock)
    if pins.get("apache-beam") != match["beam"]:
        raise UserError(f"{dockerfile}: the base {base} carries Beam {match['beam']}'s worker boot, but {lock.name} pins "
                        f"apache-beam {pins.get('apache-beam')}: make BEAM_VERSION the locked version")
    return ImageEnvironment(base, match["python"], {name: pins.get(name, "") for name in DECISIVE_PACKAGES}, env)


def locked_versions(lock: Path = LOCK) -> dict[str, str]:
    """Package name (`normalised_name`) -> version, of every `name==version` line in the lock."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[normalised_name(name.strip())] = version.strip()
    return pins


def normalised_name(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503): lower case, runs of `-`, `_` and `.` as one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def interpreter_versions(python: str) -> dict:
    """{"python": "3.11", "packages": {name: version or None}} of the interpreter at `python`, asked in a subprocess."""
    try:
        probe = subprocess.run([python, "-c", _PROBE, *DECISIVE_PACKAGES], capture_output=True, text=True, timeout=120)
    except OSError as error:
        raise UserError(f"--python {python}: cannot run it ({error.strerror})") from None
    if probe.returncode != 0:
        raise UserError(f"--python {python}: it failed to report its versions:\n{probe.stderr.strip()}")
    return json.loads(probe.stdout)


def environment_problems(python: str, image: ImageEnvironment) -> list[str]:
    """Each way the interpreter at `python` differs from `image` (Python minor version, decisive packages)."""
    found = interpreter_versions(python)
    problems = []
    if found["python"] != image.python:
        problems.append(f"Python is {found['python']} there, {image.python} in the image ({image.base})")
    for name, wanted in image.packages.items():
        have = found["packages"].get(name)
        if have != wanted:
            problems.append(f"{name} is {have or 'not installed'} there, {wanted} in the image (requirements.lock)")
    return problems


def pod_environment(image: ImageEnvironment, python: str) -> dict[str, str]:
    """The image's `ENV`s as a process here gets them: the interpreter's directory first on this machine's PATH in place
    of the image's venv, the rest as the Dockerfile sets them."""
    env = {key: value for key, value in image.env.items() if key not in INTERPRETER_VARIABLES}
    env["PATH"] = os.pathsep.join([str(Path(python).parent), os.environ.get("PATH", "")])
    return env


def _logical_lines(text: str) -> list[str]:
    """The instructions of a Dockerfile, one line each: comment lines dropped, continuation lines joined."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [line.strip() for line in re.sub(r"\\\n", " ", "\n".join(lines)).splitlines()]


def instructions_of(text: str) -> list[tuple[str, list[str]]]:
    """(KEYWORD, words) of each instruction of a Dockerfile."""
    instructions = []
    for line in _logical_lines(text):
        words = shlex.split(line, comments=True)
        if words:
            instructions.append((words[0].upper(), words[1:]))
    return instructions


def _substitute(word: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda match: args.get(match[1] or match[2], match[0]), word)


def import_check_commands(dockerfile: Path = DOCKERFILE) -> list[str]:
    """The shell commands of the Dockerfile's `RUN python -c "import ..."` lines: the build's own import check."""
    return [line[len("RUN "):] for line in _logical_lines(dockerfile.read_text(encoding="utf-8"))
            if line.startswith("RUN python -c \"import ")]


if __name__ == "__main__":
    if sys.argv[1:] != ["python"]:
        sys.exit("usage: python -m dtfx.pipeline.kubeflow.image python")
    print(image_environment().python)
