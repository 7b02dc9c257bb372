"""Disassemble a cubin with cuobjdump and count its SASS instructions, per kernel instance."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from kernels.build import BuildError, Cubin

# "/*0a40*/  @!P0 LDSM.16.MT88.4 R8, [R3+0x800] ;" -> "LDSM.16.MT88.4"
INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


@functools.cache
def find_tool(name: str) -> Path:
    """A CUDA binary tool from PATH, the CUDA toolkit, or the pip wheel (e.g. nvidia-cuda-cuobjdump)."""
    if found := shutil.which(name):
        return Path(found)
    candidates = [Path("/usr/local/cuda/bin") / name]
    for site in map(Path, sys.path):
        candidates += sorted(site.glob(f"nvidia/cu*/bin/{name}")) + sorted(site.glob(f"nvidia/cuda_*/bin/{name}"))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise BuildError(f"{name} not found: install the CUDA toolkit or `pip install nvidia-cuda-{name}`")


def disassemble(cubin: Cubin) -> dict[str, str]:
    """SASS text of every kernel in the cubin, by mangled name."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin.image)
        result = subprocess.run([str(find_tool("cuobjdump")), "-sass", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"cuobjdump failed: {result.stderr.strip()}")
    functions = re.split(r"^\s*Function : (\S+)\s*$", result.stdout, flags=re.MULTILINE)
    return dict(zip(functions[1::2], functions[2::2]))


def opcodes(sass: str) -> Counter[str]:
    """How many times each full opcode (with its modifiers, e.g. LDSM.16.MT88.4) appears."""
    return Counter(INSTRUCTION.findall(sass))
