"""The README's quick start runs as written against a live node, so that
it cannot drift from the SDK."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
DEFAULT_ADDR = "127.0.0.1:50051"


def quick_start() -> str:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the quick start should hold exactly one python block"
    return blocks[0]


def test_quick_start_runs(broker, tmp_path: Path) -> None:
    code = quick_start()
    assert DEFAULT_ADDR in code
    script = tmp_path / "quick_start.py"
    script.write_text(code.replace(DEFAULT_ADDR, broker.grpc_addr))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len([l for l in lines if l.startswith("stored at ")]) == 10
    got = [l for l in lines if l.startswith("got ")]
    assert len(got) == 10
    assert {re.search(r"b'(order \d+)'", l).group(1) for l in got} == {f"order {i}" for i in range(10)}
