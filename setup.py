"""The one build step pyproject.toml cannot declare: ship the repository's top-level folders
(task kits, skills, hooks, agents, plugin manifests) inside the package as `evoteam/_shipped/`,
without moving them in the repository. `evoteam.resources` finds them in either place."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = ("task_kits", "skills", "hooks", "agents", ".claude-plugin", ".codex-plugin", ".mcp.json")
SKIP = {"__pycache__", ".pytest_cache"}


class BuildWithShippedFiles(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's folders directly
            return
        target = Path(self.build_lib) / "evoteam" / "_shipped"
        for name in SHIPPED:
            source = ROOT / name
            if source.is_file():
                self.copy_file(str(source), str(target / name))
            for path in sorted(source.rglob("*")) if source.is_dir() else []:
                rel = path.relative_to(ROOT)
                if path.is_file() and not SKIP.intersection(rel.parts) and path.suffix != ".pyc":
                    self.mkpath(str((target / rel).parent))
                    self.copy_file(str(path), str(target / rel))  # keeps the launcher's mode bits


setup(cmdclass={"build_py": BuildWithShippedFiles})
