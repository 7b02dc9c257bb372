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

from kernels.build import ALL_INSTANCES, BuildError, Cubin, compile_nvrtc

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


def cuobjdump(cubin: Cubin, option: str) -> str:
    """What ``cuobjdump <option>`` prints for the cubin (e.g. "-sass", "-res-usage")."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin.image)
        result = subprocess.run([str(find_tool("cuobjdump")), option, str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"cuobjdump {option} failed: {result.stderr.strip()}")
    return result.stdout


def disassemble(cubin: Cubin) -> dict[str, str]:
    """SASS text of every kernel in the cubin, by mangled name."""
    functions = re.split(r"^\s*Function : (\S+)\s*$", cuobjdump(cubin, "-sass"), flags=re.MULTILINE)
    return dict(zip(functions[1::2], functions[2::2], strict=True))


def instance_sass(kernel, instance: str = ALL_INSTANCES[0], gpu: str = "sm_90") -> str:
    """SASS of one instance of an AttentionKernel (by default bf16, not causal), built for a GPU of that
    architecture: the Hopper chapters for sm_90a."""
    cubin = compile_nvrtc(kernel.source, kernel.build_arch(gpu))
    return disassemble(cubin)[cubin.lowered_names[instance]]


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage`` output as {mangled name: {"REG": 218, "SHARED": 1024, "STACK": 0, ...}}."""
    usage = {}
    for name, fields in re.findall(r"^\s*Function (\S+):\s*\n([^\n]*)", text, flags=re.MULTILINE):
        usage[name] = {key: int(value) for key, value in re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", fields)}
    return usage


def resource_usage(cubin: Cubin) -> dict[str, dict[str, int]]:
    """Registers, static shared memory, stack and local memory of every kernel in the cubin, by mangled name."""
    return parse_resource_usage(cuobjdump(cubin, "-res-usage"))


def opcodes(sass: str) -> Counter[str]:
    """How many times each full opcode (with its modifiers, e.g. LDSM.16.MT88.4) appears."""
    return Counter(INSTRUCTION.findall(sass))
