"""The real Codex CLI for tests: a pinned `@openai/codex` from npm, installed once into a cache
folder, and a Codex home that talks to the scripted Responses API (tests/support/scripted_responses.py).

`python -m tests.support.codex_cli` installs it ahead of time (.ci/run does); tests call
`codex_bin()`, which installs on first use and skips, with the reason, when npm or the registry
is unavailable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CODEX_VERSION = "0.171.0"
CACHE = Path(os.environ.get("EVOTEAM_TEST_CACHE") or Path.home() / ".cache" / "evoteam-tests") / f"codex-{CODEX_VERSION}"


def install() -> Path | str:
    """The folder holding the `codex` executable, or why it could not be installed."""
    exe = CACHE / "node_modules" / ".bin" / "codex"
    if exe.exists():
        return exe.parent
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed: cannot install @openai/codex"
    CACHE.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund",
                           f"@openai/codex@{CODEX_VERSION}"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not exe.exists():
        return f"could not install @openai/codex@{CODEX_VERSION} from npm: {proc.stderr.strip()[-300:]}"
    return exe.parent


def codex_bin() -> Path:
    import pytest

    found = install()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def provider_config(base_url: str, model: str = "gpt-5.4") -> str:
    """config.toml lines that send every request to the scripted Responses API."""
    return (f'model = "{model}"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
            f'base_url = "{base_url}"\nwire_api = "responses"\nenv_key = "OPENAI_API_KEY"\n')


def codex_env(home: Path, bin_dir: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "OPENAI_API_KEY": "test", "LANG": "C.UTF-8",
            "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
            "EVOTEAM_HOOK_WARM_IDLE": "20", **extra}  # a warm hook process leaves soon after the test


if __name__ == "__main__":
    result = install()
    print(result)
    sys.exit(1 if isinstance(result, str) else 0)
