"""The one build step pyproject.toml cannot state: a regular (non-editable) install carries
what the runner needs outside a clone, in ``fgclip/_home`` (``fgclip.paths`` looks there
last): the chapter notebooks, their parameter sets and the committed toy checkpoints. An
editable install reads them from the checkout, so it copies nothing. MANIFEST.in puts the
same files in the sdist, so a wheel built from the sdist carries them too."""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
HOME_FILES = ("notebooks/ch*_*.ipynb", "notebooks/params/ch*/*.yaml", "checkpoints/*.pt",
              "checkpoints/*.metrics.json")


class BuildPyWithHome(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for pattern in HOME_FILES:
            files = sorted(HERE.glob(pattern))
            if not files:
                raise SystemExit(f"setup.py: nothing matches {pattern} under {HERE}; "
                                 "build from a clone or from the sdist")
            for src in files:
                dest = Path(self.build_lib) / "fgclip" / "_home" / src.relative_to(HERE)
                self.mkpath(str(dest.parent))
                self.copy_file(str(src), str(dest))


setup(cmdclass={"build_py": BuildPyWithHome})
