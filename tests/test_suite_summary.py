"""The repository conftest's summary: under ``--durations`` the time by test module follows the slowest tests."""

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from vlarl_trainer.testing import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_durations_end_with_the_time_by_module_slowest_first(tmp_path):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_slow.py").write_text(
        "import time\nimport pytest\n\n@pytest.fixture\ndef slow_setup():\n    time.sleep(0.4)\n\n"
        "def test_a(slow_setup):\n    time.sleep(0.2)\n\ndef test_b():\n    pass\n")
    (tmp_path / "test_quick.py").write_text("import time\n\ndef test_c():\n    time.sleep(0.1)\n")
    shown = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=2"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]

    lines = shown.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "time by test module: 2 of 2" in line)
    assert header > next(i for i, line in enumerate(lines) if "slowest 2 durations" in line)
    slow, quick = lines[header + 1].split(), lines[header + 2].split()
    assert slow[-1] == "test_slow.py" and quick[-1] == "test_quick.py"
    assert float(slow[0].rstrip("s")) >= 0.6 > float(quick[0].rstrip("s")) >= 0.1  # setup counts with the call


def test_without_durations_the_summary_adds_nothing():
    hooks = load_script(ROOT / "conftest.py", name="repository_conftest")
    report = SimpleNamespace(when="call", duration=1.0, nodeid="test_x.py::test_y")
    reporter = SimpleNamespace(stats={"passed": [report]}, write_sep=None, write_line=None)  # a write would fail
    hooks.pytest_terminal_summary(reporter, SimpleNamespace(option=SimpleNamespace(durations=None)))
