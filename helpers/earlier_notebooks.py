"""Where notebooks 05, 06 and 07 find the student's saved notebooks 01, 03 and 05: next to the notebook, and in
Google Colab also in the student's Google Drive.

A notebook opened alone in Colab has no earlier notebook beside it. The student's own copies are where Colab
saves them, in "My Drive/Colab Notebooks", under the notebook's name ("01_positional_encoding.ipynb") or
Colab's "Copy of 01_positional_encoding.ipynb" (File > Save a copy in Drive). Drive is looked at only inside
Colab and only when a notebook is missing beside this one; Colab then asks the student to allow it, once per
session. Outside Colab (JupyterLab, a test, a grader) nothing is mounted and nothing waits for an answer.
A notebook found nowhere is named in one printed line that says how to provide it; the caller then uses the
reference for it (helpers.student_code), as before.

    in_colab()                           True inside Google Colab
    find_notebooks(folder, stems)        {stem: path of the saved notebook}, looked for as above
"""

from __future__ import annotations

import sys
from pathlib import Path

from .i18n import tr

DRIVE = Path("/content/drive")  # where Colab mounts the student's Google Drive
COLAB_NOTEBOOKS = Path("MyDrive") / "Colab Notebooks"  # where Colab saves a student's notebooks in it


def in_colab() -> bool:
    """True inside Google Colab (its google.colab module is loaded in every Colab kernel)."""
    return "google.colab" in sys.modules


def drive_notebooks() -> Path | None:
    """The student's "Colab Notebooks" folder in Google Drive, mounting Drive first when it is not (Colab asks
    the student to allow it); None when the student does not allow it, or there is no such folder."""
    if not (DRIVE / "MyDrive").is_dir():
        try:
            from google.colab import drive

            drive.mount(str(DRIVE))
        except Exception:  # noqa: BLE001 - the student said no, or Drive is out of reach: the reference is used
            return None
    folder = DRIVE / COLAB_NOTEBOOKS
    return folder if folder.is_dir() else None


def saved_copy(folder: Path, stem: str) -> Path | None:
    """The newest of folder/<stem>.ipynb and folder/Copy of <stem>*.ipynb (the names Colab gives), or None."""
    found = [path for path in [folder / f"{stem}.ipynb", *folder.glob(f"Copy of {stem}*.ipynb")] if path.is_file()]
    return max(found, key=lambda path: path.stat().st_mtime) if found else None


def find_notebooks(folder: str | Path, stems: list[str]) -> dict[str, Path]:
    """{stem: path} for each notebook stem ("01_positional_encoding"): folder/<stem>.ipynb when it exists; else,
    inside Colab, the student's copy in Google Drive (drive_notebooks, saved_copy). Each one found nowhere keeps
    the path folder/<stem>.ipynb, and one printed line names them all and says how to provide them."""
    paths = {stem: Path(folder) / f"{stem}.ipynb" for stem in stems}
    missing = [stem for stem, path in paths.items() if not path.is_file()]
    drive = drive_notebooks() if missing and in_colab() else None
    for stem in missing if drive else []:
        paths[stem] = saved_copy(drive, stem) or paths[stem]
    missing = [stem for stem in missing if not paths[stem].is_file()]
    if missing:
        print(tr("earlier_notebooks:how_to_provide",
                 "Not found next to this notebook: {files}. The reference stands in for them; to use your own code, "
                 "save them, upload them next to this notebook (in Colab: the Files panel on the left, or allow "
                 "Google Drive when asked), then run this cell again.",
                 files=", ".join(f"{stem}.ipynb" for stem in missing)))
    return paths


__all__ = ["COLAB_NOTEBOOKS", "DRIVE", "drive_notebooks", "find_notebooks", "in_colab", "saved_copy"]
