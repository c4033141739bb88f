"""Headless Chromium for the report tests: a screenshot of a page, and its pixels."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and raw scanlines (filter bytes included) of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def screenshot(page: Path, workdir: Path, width: int, height: int) -> tuple[int, int, bytes]:
    """Render ``page`` in headless Chromium (a fresh profile, removed even on failure, no
    network) and return the screenshot's width, height and pixels."""
    shot, profile = workdir / "shot.png", workdir / "profile"
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--screenshot={shot}",
        f"--window-size={width},{height}",
        page.as_uri(),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert shot.exists(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return png_pixels(shot)
