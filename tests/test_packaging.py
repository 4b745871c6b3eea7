"""The wheel holds every package: pyproject.toml lists them one by one (the repository root is the
`samsa` package), so a new directory left out of the list would be missing from a built install such
as the Docker image, while an editable install would not notice."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = {"tests", "compat-tests", "bench", "tools", "scripts", "build", ".venv", "node_modules"}


def test_every_package_directory_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"samsa"}
    for init in ROOT.rglob("__init__.py"):
        relative = init.parent.relative_to(ROOT)
        if relative.parts and relative.parts[0] not in NOT_SHIPPED and not relative.parts[0].startswith("."):
            found.add(".".join(("samsa", *relative.parts)))
    assert found == listed
