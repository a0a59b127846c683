"""The course's JupyterLab settings, and the command that installs the students' ones into an environment.

    python -m course_tools.jupyter            install them into this Python's environment (make setup runs it;
                                              conda users run it once after `conda env create`)
    python -m course_tools.jupyter --check    exit 1, naming what differs, when they are not installed

The students' settings (this folder) go into the environment, where every `jupyter lab` it starts reads them:

    jupyter_server_config.json   nbgrader's server extensions off      -> <prefix>/etc/jupyter/
    labconfig/page_config.json   nbgrader's lab extension off          -> <prefix>/etc/jupyter/labconfig/
    overrides.json               no news pop-up, no update check       -> <prefix>/share/jupyter/lab/settings/

Each is merged into the file already there (other settings are kept). The instructors' settings
(``instructor/``, the same layout) are never installed: ``make lab-instructor COURSE=...`` puts that folder
first on JUPYTER_CONFIG_PATH, which outranks the environment's settings for that one JupyterLab only.
"""

from __future__ import annotations

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
        merged[key] = _merged(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key),
                                                                                             dict) else value
    return merged


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def differences(prefix: Path) -> list[str]:
    """The installed files under prefix that lack a students' setting (none when all are in place)."""
    return [str(Path(prefix) / target) for source, target in FILES.items()
            if _merged(_read(Path(prefix) / target), _read(HERE / source)) != _read(Path(prefix) / target)]


def install(prefix: Path) -> list[str]:
    """Merge the students' settings into the environment at prefix; the files written (none when in place)."""
    written = []
    for source, target in FILES.items():
        path = Path(prefix) / target
        current = _read(path)
        wanted = _merged(current, _read(HERE / source))
        if wanted != current or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
            temporary.replace(path)
            written.append(str(path))
    return written


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course_tools.jupyter",
                                     description="Install the students' JupyterLab settings into an environment.")
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


__all__ = ["FILES", "INSTRUCTOR", "differences", "install", "main"]
