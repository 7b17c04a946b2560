"""The command line answers at once: --help and --cfg job load no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NOISYDML = str(Path(sys.executable).with_name("noisydml"))


def test_the_command_line_module_imports_neither_torch_nor_lightning():
    probe = "import sys, noisydml.cli; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "'torch'" not in loaded and "'pytorch_lightning'" not in loaded


def test_cfg_job_prints_the_composed_config(tmp_path):
    command = [NOISYDML, "--cfg", "job", "noise.rate=0.4"]
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "rate: 0.4" in out.stdout
