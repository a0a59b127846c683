"""The warm kernels of `make test` (course_tools/warm_kernels.py): a kernel forked from the warm server is what a
new `python -m ipykernel_launcher` is in everything a notebook can see, shares nothing with the next one, is
interrupted, dies and ends with its manager as any kernel does, and grades the same; where forking would not be
exact, the usual start is kept."""

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from importlib.metadata import entry_points

import nbformat
import pytest
from jupyter_client import KernelManager
from jupyter_client.provisioning import LocalProvisioner
from jupyter_client.provisioning.factory import KernelProvisionerFactory

from conftest import ROOT, run_grader, with_answer
from course_tools import warm_kernels
from course_tools.warm_kernels import ForkedKernel, WarmKernelProvisioner

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="warm kernels are forked: this platform has no fork")

# What a notebook can see of the process it runs in, after the imports of the course's notebooks (notebook 06 builds
# an optimizer, which imports torch._dynamo), and a figure drawn without `%matplotlib inline`. The warning filters
# are compared as a set: the server's imports come before the kernel's own start, so their filters come in another
# order (none of them matches another's warnings).
PROBE = textwrap.dedent("""\
    import json, multiprocessing, os, random, stat, sys, warnings
    import matplotlib, matplotlib.pyplot as plt, numpy, torch, torch._dynamo, torch._inductor.config, tqdm.auto
    from ipykernel.kernelapp import IPKernelApp
    plt.plot([1, 2])
    print(json.dumps({
        "cwd": os.getcwd(), "argv0": os.path.basename(sys.argv[0]), "argv": sys.argv[1:2], "path": sys.path,
        "executable": sys.executable, "session": os.environ.get("JPY_SESSION_NAME"),
        "backend": matplotlib.get_backend(),
        "interactive": plt.isinteractive(), "tqdm": tqdm.auto.tqdm.__module__, "threads": torch.get_num_threads(),
        "own_session": os.getsid(0) == os.getpid(), "main": sys.modules["__main__"].__name__,
        "parent_watched": IPKernelApp.instance().parent_handle == os.getppid(),
        "stdin_is_a_pipe": stat.S_ISFIFO(os.fstat(0).st_mode), "warnings": sorted(set(map(str, warnings.filters))),
        "from_the_folder": [multiprocessing.process.ORIGINAL_DIR, torch._dynamo.config.debug_dir_root,
                            torch._inductor.config.xpu.cutlass_dir],
        "line_buffered": sys.__stdout__.line_buffering, "signals": [str(signal) for signal in
                                                                    map(__import__("signal").getsignal, range(1, 32))],
        "random": [random.random(), float(numpy.random.rand()), torch.initial_seed()], "hash": hash("course"),
    }))
""")


KERNEL = [sys.executable, "-m", "ipykernel_launcher", "-f", "connection.json"]


def start(provisioner_class, cwd, env=None):
    """A kernel manager and client, the kernel started by provisioner_class."""
    km = KernelManager(kernel_name="python3")
    km.provisioner = provisioner_class(kernel_id="probe", kernel_spec=km.kernel_spec, parent=km)
    km.start_kernel(cwd=str(cwd), env=env or dict(os.environ))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def probe(kc):
    """What PROBE prints, and the types of the messages the cell sent (a figure: display_data)."""
    out, kinds = [], []

    def hook(message):
        kinds.append(message["msg_type"])
        out.append(message["content"].get("text", ""))

    kc.execute_interactive(PROBE, timeout=60, output_hook=hook)
    return {**json.loads("".join(out)), "figures": kinds.count("display_data")}


def stop(km, kc):
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def test_the_makefile_names_the_provisioner_that_pyproject_registers():
    makefile = (ROOT / "Makefile").read_text()
    assert f"JUPYTER_DEFAULT_PROVISIONER_NAME := {warm_kernels.NAME}" in makefile
    warm = set(re.search(r"^WARM_KERNELS := (.*)$", makefile, re.M).group(1).split())
    runs = set(re.search(r"^TEST_RUNS := ((?:.*\\\n)*.*)$", makefile, re.M).group(1).replace("\\", " ").split())
    named = {run for run in runs if not run.startswith("$")}  # the runs an edition adds match nbval-*-%
    assert named <= warm, f"test runs that start their kernels the usual way: {sorted(named - warm)}"
    assert not {target for target in warm if target.startswith("lab")}, "make lab must start kernels as usual"
    assert KernelProvisionerFactory()._check_availability(warm_kernels.NAME)
    (entry,) = [e for e in entry_points(group="jupyter_client.kernel_provisioners") if e.name == warm_kernels.NAME]
    assert entry.load() is WarmKernelProvisioner


def test_a_warm_kernel_is_what_a_new_one_is_and_shares_nothing_with_the_next(tmp_path):
    env = dict(os.environ, JPY_SESSION_NAME="probe.ipynb")  # differs from one kernel to the next: not the server's
    seen = {}
    kinds = (("new", LocalProvisioner), ("warm", WarmKernelProvisioner), ("warm2", WarmKernelProvisioner))
    for name, provisioner in kinds:
        km, kc = start(provisioner, tmp_path, env)
        if name.startswith("warm"):
            assert isinstance(km.provisioner.process, ForkedKernel), "the kernel was not forked from the warm server"
        seen[name] = probe(kc)
        kc.execute_interactive("import numpy; numpy.left_by_the_last_kernel = 1", timeout=30)
        stop(km, kc)
    randoms = [seen[name].pop("random") for name in seen]
    hashes = [seen[name].pop("hash") for name in seen]
    assert hashes[1] == hashes[2], "the warm kernels of one process share its server's hash seed (README)"
    assert seen["warm"] == seen["new"]
    assert seen["warm2"] == seen["new"]
    assert seen["new"]["backend"].endswith("inline") and seen["new"]["stdin_is_a_pipe"]
    assert seen["new"]["figures"] == 1 and seen["new"]["interactive"]
    assert seen["new"]["from_the_folder"][0] == str(tmp_path)
    assert seen["new"]["session"] == "probe.ipynb"
    assert len({tuple(r) for r in randoms}) == 3, "two kernels started with the same random state"
    km, kc = start(WarmKernelProvisioner, tmp_path, env)
    out = []
    kc.execute_interactive("import numpy; print(hasattr(numpy, 'left_by_the_last_kernel'))", timeout=30,
                           output_hook=lambda m: out.append(m["content"].get("text", "")))
    stop(km, kc)
    assert "".join(out).strip() == "False"


def test_a_warm_kernel_is_interrupted_and_its_death_is_seen_with_its_exit_status(tmp_path):
    km, kc = start(WarmKernelProvisioner, tmp_path)
    assert isinstance(km.provisioner.process, ForkedKernel)
    msg_id = kc.execute("import time; time.sleep(60)")
    time.sleep(1)
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=20)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["ename"] == "KeyboardInterrupt"
    kc.execute("import os; os._exit(7)")
    deadline = time.monotonic() + 20
    while km.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not km.is_alive()
    assert km.provisioner.process.returncode == 7
    kc.stop_channels()
    km.cleanup_resources()


def test_a_warm_kernel_ends_when_its_manager_is_gone(tmp_path):
    """A manager that ends closes its end of the kernel's socket: the waiter ends, and the kernel, polling its parent
    as every ipykernel does, with it."""
    kernel = warm_kernels.fork_kernel(KERNEL[:4] + [str(tmp_path / "kernel.json")], {"cwd": str(tmp_path)})
    assert isinstance(kernel, ForkedKernel)
    deadline = time.monotonic() + 30
    while not (tmp_path / "kernel.json").exists() and time.monotonic() < deadline:  # it has started
        time.sleep(0.1)
    assert kernel.poll() is None
    kernel._reply.close()  # what the manager's end does when the manager ends
    deadline = time.monotonic() + 15
    while os.path.exists(f"/proc/{kernel.pid}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{kernel.pid}"), "the kernel outlived its manager"


@pytest.mark.parametrize("cmd, kwargs", [
    ([sys.executable, "-m", "other_kernel", "-f", "connection.json"], {}),
    (["/usr/bin/python3-elsewhere", *KERNEL[1:]], {}),
    (KERNEL, {"stdout": subprocess.PIPE}),
    (KERNEL, {"independent": True}),
    (KERNEL, {"cwd": "MATPLOTLIBRC"}),
    (KERNEL, {"cwd": "/no/such/folder"}),
    (KERNEL, {"env": dict(os.environ, PYTHONPATH="relative/folder")}),
], ids=["another kernel", "another python", "output piped back", "independent", "a matplotlibrc in its folder",
        "a folder that does not exist", "a relative PYTHONPATH"])
def test_the_usual_start_is_kept_where_forking_would_not_be_exact(tmp_path, cmd, kwargs):
    assert warm_kernels.exact(KERNEL, {"env": dict(os.environ), "cwd": str(tmp_path)})
    if kwargs.get("cwd") == "MATPLOTLIBRC":
        (tmp_path / "matplotlibrc").write_text("lines.linewidth: 3\n")
        kwargs = {"cwd": str(tmp_path)}
    assert not warm_kernels.exact(cmd, {"env": dict(os.environ), "cwd": str(tmp_path), **kwargs})
    if kwargs.get("cwd") == "/no/such/folder":  # the usual start says so at once
        with pytest.raises(FileNotFoundError):
            subprocess.Popen(KERNEL, cwd=kwargs["cwd"])


def test_the_usual_start_is_kept_for_an_environment_other_than_the_servers():
    server = warm_kernels._server(warm_kernels._ours(dict(os.environ)))
    assert server is not None
    assert warm_kernels._server(warm_kernels._ours(dict(os.environ, JPY_SESSION_NAME="x"))) is server
    assert warm_kernels._server({**server.env, "OMP_NUM_THREADS": "7"}) is None
    assert warm_kernels.fork_kernel(KERNEL, {"env": {**server.env, "OMP_NUM_THREADS": "7"}}) is None


def test_the_grader_grades_the_same_with_warm_kernels_as_with_new_ones(tmp_path, monkeypatch):
    solved = nbformat.read(ROOT / "solutions" / "01_positional_encoding.ipynb", as_version=4)
    cell = next(c for c in solved.cells if c.source.startswith("def create_position_matrix("))
    swapped = cell.source.replace("np.sin(", "SIN(").replace("np.cos(", "np.sin(").replace("SIN(", "np.cos(")
    assert swapped != cell.source
    notebook = with_answer(tmp_path, "01_positional_encoding", "create_position_matrix", swapped)
    factory = KernelProvisionerFactory.instance()
    reports = {}
    for name in (warm_kernels.NAME, "local-provisioner"):
        monkeypatch.setattr(factory, "default_provisioner_name", name)  # what JUPYTER_DEFAULT_PROVISIONER_NAME sets
        status, out, _ = run_grader(notebook, "--json")
        assert status == 1
        reports[name] = json.loads(out)
    assert reports[warm_kernels.NAME] == reports["local-provisioner"]
    verdicts = {e["name"]: (e["status"], e["mistake"]) for e in reports["local-provisioner"]["exercises"]}
    assert verdicts == {"create_position_matrix": ("fail", "sin_cos_swapped"), "rotation_matrix": ("todo", None),
                        "apply_rope": ("todo", None)}
