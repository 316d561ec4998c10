"""The package works as a regular (non-editable) install: it finds the project's checkpoints
and chapters through FGCLIP_HOME, the folder it runs in, or (outside any clone) the copy the
install carries; and it declares what it imports."""
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(REPO)], check=True, capture_output=True, timeout=300)
    assert (target / "fgclip" / "paths.py").is_file() and not (target / "fgclip" / "__editable__").exists()
    return target


def run(code_or_args, site, cwd, home=None, interpreter=True):
    env = {k: v for k, v in os.environ.items() if k != "FGCLIP_HOME"}
    env["PYTHONPATH"] = str(site)  # ahead of the editable install in .venv
    if home:
        env["FGCLIP_HOME"] = str(home)
    return subprocess.run([sys.executable, *code_or_args] if interpreter else code_or_args, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_regular_install_runs_check_and_loads_both_checkpoints(installed, tmp_path):
    code = ("import fgclip, fgclip.models as m;"
            "[m.create_clip(n, pretrained='toy') for n in ('toy-vit', 'toy-rn')]; print(fgclip.__file__)")
    done = run(["-c", code], installed, cwd=tmp_path, home=REPO)
    assert done.returncode == 0, done.stderr[-1500:]
    assert str(installed) in done.stdout
    check = run(["-m", "fgclip", "run", "ch0", "--check", "-p", "seed", "2"], installed, cwd=REPO / "notebooks")
    assert check.returncode == 0 and "seed: 2" in check.stdout, check.stderr[-1500:]


def test_outside_a_clone_the_install_runs_from_its_own_copy(installed, tmp_path):
    """From an empty folder, no $FGCLIP_HOME: --help (module and console script), and --check
    with a parameter set, both read from what the install carries, not from this checkout."""
    assert not any(tmp_path.iterdir())
    where = run(["-c", "import fgclip, fgclip.paths as p; print(fgclip.__file__); print(p.project_home())"],
                installed, cwd=tmp_path)
    assert where.returncode == 0, where.stderr[-1500:]
    module, home = where.stdout.split()
    assert module.startswith(str(installed)) and home == str(installed / "fgclip" / "_home")
    assert not Path(home).is_relative_to(REPO) and not Path(module).is_relative_to(REPO)
    for command in ([sys.executable, "-m", "fgclip", "--help"], [str(installed / "bin" / "fgclip"), "run", "--help"]):
        helped = run(command, installed, cwd=tmp_path, interpreter=False)
        assert helped.returncode == 0 and "run" in helped.stdout, helped.stderr[-1500:]
    check = run(["-m", "fgclip", "run", "ch0", "--check", "-f", "cpu-small", "-p", "seed", "2"], installed, cwd=tmp_path)
    assert check.returncode == 0 and "seed: 2" in check.stdout and "model: toy-vit" in check.stdout, \
        check.stderr[-1500:]
    assert not any(tmp_path.iterdir())  # --check wrote nothing


def test_a_wrong_home_is_named_and_help_still_works(installed, tmp_path):
    done = run(["-m", "fgclip", "run", "ch0", "--check"], installed, cwd=tmp_path, home=tmp_path)
    assert done.returncode == 2 and "FGCLIP_HOME" in done.stderr and "Traceback" not in done.stderr
    assert run(["-m", "fgclip", "--help"], installed, cwd=tmp_path, home=tmp_path).returncode == 0


def test_the_sdist_carries_what_the_install_copies(tmp_path):
    """setup.py copies the chapters, parameter sets and checkpoints into a regular install;
    MANIFEST.in must put the same files in the sdist (setuptools lists them in SOURCES.txt)."""
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=REPO,
                   check=True, capture_output=True, timeout=120)
    listed = set((tmp_path / "fgclip.egg-info" / "SOURCES.txt").read_text().split())
    for pattern in ("notebooks/ch*_*.ipynb", "notebooks/params/ch*/*.yaml", "checkpoints/*.pt",
                    "checkpoints/*.metrics.json"):
        files = {str(f.relative_to(REPO)) for f in REPO.glob(pattern)}
        assert files and files <= listed, f"{pattern}: not in the sdist: {sorted(files - listed)}"


def test_every_third_party_import_is_declared():
    import ast

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = " ".join(declared["dependencies"] + sum(declared["optional-dependencies"].values(), [])).lower()
    distribution = {"PIL": "pillow", "sklearn": "scikit-learn", "yaml": "pyyaml", "IPython": "ipython",
                    "open_clip": "open_clip_torch", "faiss": "faiss-cpu", "myst_nb": "myst-nb", "jupyter_cache": "jupyter-cache"}
    stdlib = set(sys.stdlib_module_names) | {"fgclip"}
    missing = set()
    for path in (REPO / "src" / "fgclip").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for mod in mods:
                top = mod.split(".")[0]
                if top not in stdlib and distribution.get(top, top).lower() not in names:
                    missing.add(f"{top} ({path.name})")
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"
