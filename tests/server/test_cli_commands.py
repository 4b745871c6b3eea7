"""`samsa`'s command line (the package's __main__.py): the broker's own commands do not import the
tool commands (cli/), nor a tool the broker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from samsa.__main__ import parse_args

TOOL_MODULES = "[m for m in sys.modules if m.startswith('samsa.cli.')]"


def modules_imported_by(argv: list[str]) -> list[str]:
    """The cli/ modules a fresh interpreter has imported after parsing `argv`."""
    code = (f"import json, sys; from samsa.__main__ import parse_args; parse_args({argv!r}); "
            f"print(json.dumps(sorted({TOOL_MODULES})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("argv", [["serve"], ["format", "-t", "x"]])
def test_a_broker_command_imports_no_tool_command(argv):
    assert modules_imported_by(argv) == []


def test_a_tool_command_is_parsed_with_its_own_arguments():
    assert modules_imported_by(["topics", "list"])
    assert parse_args(["topics", "list"]).command == "topics"


def test_help_lists_the_tool_commands_too(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    assert "dump-log" in capsys.readouterr().out


def test_python_dash_m_samsa_is_the_samsa_command():
    """`python -m samsa` runs the package's __main__.py, which pyproject installs as `samsa`."""
    out = subprocess.run([sys.executable, "-m", "samsa", "--help"], capture_output=True, text=True, check=True).stdout
    assert all(name in out for name in ("serve", "format", "pipeline", "topics", "dump-log")), out
