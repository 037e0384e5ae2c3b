"""Run dfg as a real process with one of its streams on a pseudo-terminal (shared by the CLI
tests of colour, wrapping, binary refusal and progress bars)."""

from __future__ import annotations

import os
import subprocess
import sys


def run_on_pty(args: list, stream: str = "stdout", env: dict | None = None,
               columns: int = 80) -> tuple[int, bytes, bytes]:
    """Run ``dfg ARGS`` with ``stream`` ("stdout" or "stderr") on a pseudo-terminal and the
    other on a pipe; returns (exit code, stdout bytes, stderr bytes). ``NO_COLOR`` is unset
    unless ``env`` sets it."""
    import pty
    import select

    master, slave = pty.openpty()
    full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), **(env or {})}
    if env is None or "NO_COLOR" not in env:
        full_env.pop("NO_COLOR", None)
    on_tty = stream == "stdout"
    p = subprocess.Popen([sys.executable, "-m", "dfg.cli", *map(str, args)],
                         stdout=slave if on_tty else subprocess.PIPE,
                         stderr=subprocess.PIPE if on_tty else slave, env=full_env)
    os.close(slave)
    tty = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:   # the child closed the terminal
            break
        if not chunk:
            break
        tty += chunk
    piped = (p.stderr if on_tty else p.stdout).read()
    p.wait(timeout=60)
    os.close(master)
    return (p.returncode, tty, piped) if on_tty else (p.returncode, piped, tty)
