"""The package works as a regular (non-editable) install: it finds the project's checkpoints
and chapters through FGCLIP_HOME or the folder it runs in, and declares what it imports."""
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


def run(code_or_args, site, cwd, home=None):
    env = {k: v for k, v in os.environ.items() if k != "FGCLIP_HOME"}
    env["PYTHONPATH"] = str(site)  # ahead of the editable install in .venv
    if home:
        env["FGCLIP_HOME"] = str(home)
    return subprocess.run([sys.executable, *code_or_args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_regular_install_runs_check_and_loads_both_checkpoints(installed, tmp_path):
    code = ("import fgclip, fgclip.models as m;"
            "[m.create_clip(n, pretrained='toy') for n in ('toy-vit', 'toy-rn')]; print(fgclip.__file__)")
    done = run(["-c", code], installed, cwd=tmp_path, home=REPO)
    assert done.returncode == 0, done.stderr[-1500:]
    assert str(installed) in done.stdout
    check = run(["-m", "fgclip", "run", "ch0", "--check", "-p", "seed", "2"], installed, cwd=REPO / "notebooks")
    assert check.returncode == 0 and "seed: 2" in check.stdout, check.stderr[-1500:]


def test_without_a_home_the_error_says_how_to_set_it(installed, tmp_path):
    done = run(["-m", "fgclip", "run", "ch0", "--check"], installed, cwd=tmp_path)
    assert done.returncode != 0 and "FGCLIP_HOME" in done.stderr


def test_every_third_party_import_is_declared():
    import ast

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = " ".join(declared["dependencies"] + sum(declared["optional-dependencies"].values(), [])).lower()
    distribution = {"PIL": "pillow", "sklearn": "scikit-learn", "yaml": "pyyaml", "IPython": "ipython",
                    "open_clip": "open_clip_torch", "faiss": "faiss-cpu", "myst_nb": "myst-nb"}
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
