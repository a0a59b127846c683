"""What the course's commands print, readable whatever the locale: a Windows code page, LANG=C, a Latin-1 locale.

Each console command (tfs-grade, tfs-versions, tfs-translate, python -m course_tools.verdicts / .pretrain) calls
``utf8_output()`` first. Without it, Python encodes what it prints in the locale's encoding, and a Vietnamese
message ("ư") under a Latin-1 or cp1252 locale ends the command with UnicodeEncodeError, half-way through
``tfs-grade --json > out.json``.
"""

from __future__ import annotations

import sys

# A character the stream cannot encode is written as \u01b0 (readable, and never an error).
NEVER_FAILS = "backslashreplace"


def utf8_output() -> None:
    """Make sys.stdout and sys.stderr print any text, whatever the locale.

    A stream redirected to a file or a pipe (``tfs-grade --json > out.json``, a test reading the output) writes
    UTF-8: what is written is a file, and the course reads and writes every file as UTF-8, so out.json is valid
    UTF-8 JSON on every system.

    A console (a terminal: isatty) keeps its own encoding, since it decodes what it receives with it: UTF-8
    bytes on a Latin-1 terminal would turn every accented letter into two wrong ones, even those it can show
    (Spanish "ó"). Only a character it cannot show is written as an escape (\\u01b0) instead of ending the
    command. A Windows console is UTF-8 already in Python 3.6+ (PEP 528), and shows everything.

    Streams that are not text files of their own (None under pythonw, a StringIO a test put there) are left as
    they are."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            console = stream.isatty()
        except (OSError, ValueError):  # closed, or not a file after all
            continue
        if console:
            reconfigure(errors=NEVER_FAILS)
        else:
            reconfigure(encoding="utf-8", errors=NEVER_FAILS)
