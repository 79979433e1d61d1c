"""An stdio MCP server driven line by line, with no SDK in between: what a client sends,
unprocessed (malformed lines included), and each answer as it arrives."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

from evoteam import python_module_args


class RawStdio:
    """`evoteam serve <server>` over stdio, started as the plugin's launcher starts it."""

    def __init__(self, server: str, env: dict[str, str], cwd: Path | None = None, stderr=subprocess.DEVNULL,
                 answer_within_s: float = 20.0):
        self.process = subprocess.Popen([sys.executable, *python_module_args("evoteam.cli", "serve", server)],
                                        env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=stderr)
        self.buffer = b""
        self.answer_within_s = answer_within_s

    def send(self, message: dict | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        self.process.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float | None = None) -> dict:
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([fd], [], [], timeout or self.answer_within_s)
            assert ready, "no answer in time"
            chunk = os.read(fd, 1 << 20)
            assert chunk, "the server closed its output"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)
