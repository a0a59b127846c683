"""tfs-versions (course_tools.versions): every pinned package is listed, and a mismatch is flagged."""

import io
import subprocess
import sys

from course_tools.versions import MISMATCH, OK, PACKAGES, main, matches, read_pins, versions

from conftest import ROOT


def test_it_runs_and_lists_every_pinned_package():
    result = subprocess.run([sys.executable, "-m", "course_tools.versions"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0].lower() for line in result.stdout.splitlines()[2:-1]}
    pins = read_pins(ROOT / "requirements.txt")
    assert pins, "requirements.txt pins its packages as name==version"
    assert set(pins) <= listed
    assert {"python", "course", *PACKAGES} <= listed


def test_a_mismatch_is_flagged_and_fails_check(tmp_path):
    fake = tmp_path / "requirements.txt"
    fake.write_text("# a comment\nnumpy==0.0.1  # too old\ntorch==2.13.0\nno-such-package-here==1.0\nmatplotlib>=1\n")
    rows = {r.name: r for r in versions(fake)}
    assert rows["numpy"].status == MISMATCH
    assert rows["torch"].status == OK
    assert rows["no-such-package-here"].status.startswith(MISMATCH) and rows["no-such-package-here"].installed is None
    assert not rows["matplotlib"].mismatch, "only name==version lines are pins"
    out = io.StringIO()
    assert main(["--requirements", str(fake)], stdout=out) == 0, "without --check it always exits 0"
    assert "2 mismatch(es): numpy, no-such-package-here" in out.getvalue()
    assert main(["--check", "--requirements", str(fake)], stdout=io.StringIO()) == 1
    fake.write_text("torch==2.13.0\n")
    assert main(["--check", "--requirements", str(fake)], stdout=io.StringIO()) == 0


def test_pins_match_the_pep_440_way():
    assert matches("2.13.0+cpu", "2.13.0") and matches("2.13.0", "2.13.0")
    assert not matches("2.13.0", "2.13.0+cpu") and not matches("2.13.1", "2.13.0")
