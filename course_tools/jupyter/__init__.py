"""The course's JupyterLab settings, and the command that installs the students' ones into an environment.

    python -m course_tools.jupyter            install them into this Python's environment (make setup runs it)
    python -m course_tools.jupyter --check    exit 1, naming what differs, when they are not installed

The students' settings (this folder: nbgrader's interface off, no news pop-up) are merged into the files under
the environment's prefix (FILES). The instructors' ones (``instructor/``) are never installed: ``make
lab-instructor`` puts that folder first on JUPYTER_CONFIG_PATH.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


HERE = Path(__file__).resolve().parent
INSTRUCTOR = HERE / "instructor"
# Each file of the students' settings, and where it goes under an environment's prefix.
FILES = {"jupyter_server_config.json": "etc/jupyter/jupyter_server_config.json",
         "labconfig/page_config.json": "etc/jupyter/labconfig/page_config.json",
         "overrides.json": "share/jupyter/lab/settings/overrides.json"}


def _merged(old: dict, new: dict) -> dict:
    """old with every key of new set to new's value (nested dictionaries merged key by key)."""
    merged = dict(old)
    for key, value in new.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _merged(merged[key], value) if both else value
    return merged


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _installed(prefix: Path) -> list[tuple[Path, dict, dict]]:
    """(installed file, what it holds, what it should hold) for each file of the students' settings."""
    found = [(Path(prefix) / target, HERE / source) for source, target in FILES.items()]
    return [(path, _read(path), _merged(_read(path), _read(source))) for path, source in found]


def differences(prefix: Path) -> list[str]:
    """The installed files under prefix that lack a students' setting (none when all are in place)."""
    return [str(path) for path, current, wanted in _installed(prefix) if wanted != current]


def install(prefix: Path) -> list[str]:
    """Merge the students' settings into the environment at prefix; the files written (none when in place)."""
    written = []
    for path, current, wanted in _installed(prefix):
        if wanted != current or not path.exists():
            from helpers.notebook_io import write_atomically  # only here: importing helpers imports torch (seconds)

            write_atomically(path, json.dumps(wanted, indent=2) + "\n")
            written.append(str(path))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.jupyter", description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, default=Path(sys.prefix),
                        help="the environment (default: this Python's, %(default)s)")
    parser.add_argument("--check", action="store_true", help="only say whether they are installed")
    args = parser.parse_args(argv)
    if args.check:
        missing = differences(args.prefix)
        for path in missing:
            print(f"not installed: the course's settings in {path}", file=sys.stderr)
        return 1 if missing else 0
    for path in install(args.prefix):
        print(f"installed the students' JupyterLab settings: {path}")
    return 0

