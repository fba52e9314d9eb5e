"""Regenerates docs/live-view.png, the screenshot of the live view in docs/long-running.md.

Profiles a small program (a hot loop, a growing list of buffers, a worker thread) with a real
`peakline run --snapshot-every`, takes its last snapshot, draws the live view's overview screen
from it with the view's own renderer (peakline.live.screen) into Rich's SVG export, and has
Debian's chromium turn the SVG into a PNG.

Usage: python scripts/live_screenshot.py [OUT.png]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROGRAM = textwrap.dedent("""\
    import threading, time
    def tokenize(n):
        out = 0
        for i in range(n):
            out += (i * 2654435761) % 97
        return out
    def background():
        end = time.time() + 6
        while time.time() < end:
            sum(x * x for x in range(20_000))
    worker = threading.Thread(target=background, name="prefetch")
    worker.start()
    cache = []
    end = time.time() + 6
    while time.time() < end:
        tokenize(50_000)
        cache.append(bytearray(3 << 20))
    worker.join()
""")


def main() -> int:
    from rich.console import Console

    from peakline.live.screen import View, render
    from peakline.model.profile_file import read_profile

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/live-view.png").resolve()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        script = tmp_path / "train.py"
        script.write_text(PROGRAM)
        out = tmp_path / "p.json"
        proc = subprocess.Popen([sys.executable, "-m", "peakline", "run", "--no-report",
                                 "--snapshot-every", "1", "--outfile", str(out), "train.py"],
                                cwd=tmp_path)
        time.sleep(4.5)
        profile = read_profile(out)
        proc.wait()
        width, height = 110, 34
        console = Console(record=True, width=width, height=height, force_terminal=True,
                          color_system="standard", file=open("/dev/null", "w"))
        console.print(render(profile, View.OVERVIEW, label="pid 4242 · train.py",
                             status="refreshing every 1 s", width=width, height=height))
        svg = tmp_path / "view.svg"
        console.save_svg(str(svg), title="peakline run --live train.py")
        html = tmp_path / "view.html"
        html.write_text("<html><body style='margin:0;background:#fff'>"
                        f"<img src='{svg.name}' style='width:1000px'></body></html>")
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--screenshot={target}", "--window-size=1000,440",
                        html.as_uri()], check=True, capture_output=True, timeout=120)
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
