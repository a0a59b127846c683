"""tfs-versions (course_tools.versions): every pinned package is listed, and a mismatch is flagged; the OS, CUDA
and MPS rows, even without a working torch."""

import io
import os
import platform
import subprocess
import sys
from types import SimpleNamespace

from course_tools.versions import MISMATCH, OK, PACKAGES, accelerators, main, matches, read_pins, system, versions

from conftest import ROOT


def run_versions(env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_tools.versions"], capture_output=True, text=True,
                          encoding="utf-8", timeout=120, cwd=ROOT, env=env)


def test_it_runs_and_lists_every_pinned_package():
    result = run_versions()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    machine, table = lines[1:lines.index("")], lines[lines.index("") + 1:]
    assert [line.split()[0] for line in machine] == ["OS", "CUDA", "MPS"]
    assert platform.platform() in machine[0] and f"(machine {platform.machine()})" in machine[0]
    assert table[0].split() == ["package", "installed", "pinned", "status"]
    listed = {line.split()[0].lower() for line in table[1:-1]}
    pins = read_pins(ROOT / "requirements.txt")
    assert pins, "requirements.txt pins its packages as name==version"
    assert set(pins) <= listed
    assert {"python", "course", *PACKAGES} <= listed


def test_a_mismatch_is_flagged_and_fails_check(tmp_path):
    fake = tmp_path / "requirements.txt"
    fake.write_text("# a comment\nnumpy==0.0.1  # too old\ntorch==2.13.0\nno-such-package-here==1.0\n"
                    "matplotlib>=1\n", encoding="utf-8")
    rows = {r.name: r for r in versions(fake)}
    assert rows["numpy"].status == MISMATCH
    assert rows["torch"].status == OK
    assert rows["no-such-package-here"].status.startswith(MISMATCH) and rows["no-such-package-here"].installed is None
    assert not rows["matplotlib"].mismatch, "only name==version lines are pins"
    out = io.StringIO()
    assert main(["--requirements", str(fake)], stdout=out) == 0, "without --check it always exits 0"
    assert "2 mismatch(es): numpy, no-such-package-here" in out.getvalue()
    assert main(["--check", "--requirements", str(fake)], stdout=io.StringIO()) == 1
    fake.write_text("torch==2.13.0\n", encoding="utf-8")
    assert main(["--check", "--requirements", str(fake)], stdout=io.StringIO()) == 0


def test_pins_match_the_pep_440_way():
    assert matches("2.13.0+cpu", "2.13.0") and matches("2.13.0", "2.13.0")
    assert not matches("2.13.0", "2.13.0+cpu") and not matches("2.13.1", "2.13.0")


def test_cuda_and_mps_as_torch_says(monkeypatch):
    gpu = SimpleNamespace(is_available=lambda: True, device_count=lambda: 2, get_device_name=lambda i: "NVIDIA H100")
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(
        __version__="2.13.0", version=SimpleNamespace(cuda="12.8"), cuda=gpu,
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: False))))
    assert accelerators() == [("CUDA", "available: NVIDIA H100 (2 devices), CUDA 12.8"), ("MPS", "not available")]
    monkeypatch.setattr(gpu, "is_available", lambda: False)
    assert accelerators()[0] == ("CUDA", "not available (torch built for CUDA 12.8, no usable GPU)")
    sys.modules["torch"].version.cuda = None
    assert accelerators()[0] == ("CUDA", "not available (torch 2.13.0 is built without CUDA)")
    del sys.modules["torch"].backends  # an old torch: no torch.backends.mps
    assert accelerators()[1] == ("MPS", "unknown (torch failed: AttributeError: 'types.SimpleNamespace' object has "
                                        "no attribute 'backends')")


def test_without_torch_the_rows_say_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch: ModuleNotFoundError
    assert dict(system()[1:]) == {"CUDA": "unknown (torch is not installed)", "MPS": "unknown (torch is not installed)"}


def test_a_broken_torch_is_shown_not_a_crash(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('raise OSError("libtorch_cuda.so: cannot open shared object")\n',
                                                    encoding="utf-8")
    result = run_versions({**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    assert result.returncode == 0, result.stderr
    broken = "unknown (import torch failed: OSError: libtorch_cuda.so: cannot open shared object)"
    assert f"  CUDA  {broken}" in result.stdout.splitlines() and f"  MPS   {broken}" in result.stdout.splitlines()
