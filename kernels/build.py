"""Compile a chapter's kernel to a cubin: NVRTC for running and inspecting, nvcc as a second opinion.

We call NVRTC ourselves (through CuPy's binding) instead of letting ``cupy.RawModule`` compile the source,
so that the cubin `runner.py inspect` disassembles is byte for byte the one that runs. NVRTC needs no GPU.

A compile takes a second or more, so what it produced is kept on disk under CACHE_DIR (``FA2_LADDER_CACHE``),
named by a hash of everything that decides it: the source text, the architecture, the instances, the compiler's
version, its options and the CUDA headers. Every process shares it: the tests' workers, `runner.py`, a later run.
"""

from __future__ import annotations

import base64
import ctypes
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

import torch

try:
    import fcntl
except ImportError:  # not POSIX: no lock, and two processes may make the same file
    fcntl = None

KERNEL_NAME = "flash_attention"
# The element types the kernels are instantiated for, as torch and as CUDA C++ name them.
CUDA_TYPES = {torch.bfloat16: "__nv_bfloat16", torch.float16: "__half"}
NVRTC_OPTIONS = ("-std=c++17", "-lineinfo")
# The CUDA headers the kernels include (.hpp: what the .h include), part of what decides a compiled kernel.
KERNEL_HEADERS = ("cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp16.h", "cuda_fp16.hpp", "math_constants.h")
CACHE_DIR = Path(os.environ.get("FA2_LADDER_CACHE", Path.home() / ".cache" / "fa2-ladder"))
T = TypeVar("T")


class BuildError(RuntimeError):
    """A kernel failed to compile, or a tool needed to build or inspect it is missing."""


@dataclass(frozen=True)
class Cubin:
    """A compiled module: its machine code and the mangled name of each template instance."""

    image: bytes
    lowered_names: dict[str, str]
    arch: str
    log: str

    def path(self) -> Path:
        """Write the image to the cache folder (named by its hash) and return where it is."""
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        path = CACHE_DIR / f"{hashlib.sha256(self.image).hexdigest()[:24]}.cubin"
        if not path.exists():  # renamed into place: a process loading it at the same time never sees half
            written = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
            written.write_bytes(self.image)
            written.replace(path)
        return path

    def to_json(self) -> dict:
        """The cubin as JSON values: the image in base64."""
        return asdict(self) | {"image": base64.b64encode(self.image).decode()}

    @classmethod
    def from_json(cls, data: dict) -> Cubin:
        """The cubin that ``to_json`` wrote."""
        return cls(**(data | {"image": base64.b64decode(data["image"])}))


def cache_key(*parts: str) -> str:
    """A file name for what ``parts`` determine: equal parts give the same name, any changed part another."""
    digest = hashlib.sha256()
    for part in parts:
        encoded = part.encode()
        digest.update(len(encoded).to_bytes(8, "little") + encoded)  # the length keeps ("ab", "c") from ("a", "bc")
    return digest.hexdigest()[:32]


def disk_cached(folder: str, key: str, make: Callable[[], dict], read: Callable[[dict], T]) -> T:
    """``read(make())``, with what ``make`` returned kept as JSON in CACHE_DIR/folder/key.json for the next call,
    in this process or any other; a file missing, torn or written by another version of this code is made again.
    One process makes it while the others that want it at the same time wait, then read it."""
    path = CACHE_DIR / folder / f"{key}.json"
    try:
        return read(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        try:
            return read(json.loads(path.read_text()))  # made while this process waited
        except (OSError, ValueError, TypeError, KeyError):
            pass
        value = make()
        written = path.with_name(f"{path.stem}.{os.getpid()}.tmp")  # renamed into place: a reader never sees half
        written.write_text(json.dumps(value))
        written.replace(path)
    return read(value)


def name_expression(dtype: torch.dtype, causal: bool) -> str:
    """The C++ name of one kernel instance, e.g. ``flash_attention<__nv_bfloat16, true>``."""
    return f"{KERNEL_NAME}<{CUDA_TYPES[dtype]}, {str(causal).lower()}>"


ALL_INSTANCES = tuple(name_expression(dtype, causal) for dtype in CUDA_TYPES for causal in (False, True))


@functools.cache
def cuda_include_dir() -> Path:
    """The CUDA toolkit's include folder: NVRTC needs it for cuda_bf16.h and cuda_fp16.h."""
    candidates = [Path(os.environ[var]) / "include" for var in ("CUDA_HOME", "CUDA_PATH") if var in os.environ]
    candidates += [Path("/usr/local/cuda/include")]
    if nvcc := shutil.which("nvcc"):
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    candidates += sorted(Path("/usr/local").glob("cuda-*/include"), reverse=True)
    # Without a toolkit, the headers of pip's nvidia-cuda-runtime wheel.
    candidates += [Path(site) / "nvidia" / "cu13" / "include" for site in sys.path if site]
    for candidate in candidates:
        if (candidate / "cuda_bf16.h").exists():
            return candidate
    raise BuildError(
        "cannot find CUDA's include folder (looked for cuda_bf16.h in "
        + ", ".join(str(c) for c in candidates)
        + "); set CUDA_HOME to the CUDA toolkit"
    )


@functools.cache
def headers_digest() -> str:
    """A hash of the CUDA headers the kernels include: another toolkit's may compile differently."""
    headers = [cuda_include_dir() / name for name in KERNEL_HEADERS]
    return cache_key(*(header.read_text() for header in headers if header.exists()))


def nvrtc_options(arch: str) -> list[str]:
    """NVRTC's options for ``arch``: the house ones, the headers' folder, and ptxas's report of each kernel."""
    return [*NVRTC_OPTIONS, f"-arch={arch}", f"-I{cuda_include_dir()}", "--ptxas-options=-v"]


def nvrtc_key(source: Path, arch: str, instances: tuple[str, ...] = ALL_INSTANCES) -> str:
    """What identifies an NVRTC compile: the same source text, instances, NVRTC, options and headers give one cubin."""
    return cache_key(
        source.read_text(), source.name, *instances, nvrtc_version(), *nvrtc_options(arch), headers_digest()
    )


@functools.cache
def compile_nvrtc(source: Path, arch: str, instances: tuple[str, ...] = ALL_INSTANCES) -> Cubin:
    """Compile ``source`` for ``arch`` (e.g. "sm_90") with NVRTC; kept in memory and on disk (see nvrtc_key)."""
    key = nvrtc_key(source, arch, instances)
    return disk_cached("nvrtc", key, lambda: run_nvrtc(source, arch, instances).to_json(), Cubin.from_json)


def run_nvrtc(source: Path, arch: str, instances: tuple[str, ...]) -> Cubin:
    """Compile ``source`` with NVRTC itself, every named instance instantiated."""
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError as error:
        raise BuildError(f"NVRTC is not available through CuPy ({error}); pip install cupy-cuda13x") from error
    options = nvrtc_options(arch)
    try:
        program = nvrtc.createProgram(source.read_text(), source.name, [], [])
        for instance in instances:
            nvrtc.addNameExpression(program, instance)
    except Exception as error:  # the library itself is missing or broken
        raise BuildError(f"{source.parent.name}: NVRTC could not start: {error}") from error
    try:
        nvrtc.compileProgram(program, options)
    except Exception as error:
        log = nvrtc.getProgramLog(program)
        raise BuildError(f"{source.parent.name}: NVRTC failed for {arch}:\n{log or error}") from error
    lowered = {instance: nvrtc.getLoweredName(program, instance) for instance in instances}
    return Cubin(_cubin_image(program), lowered, arch, nvrtc.getProgramLog(program))


@functools.cache
def nvrtc_version() -> str:
    """NVRTC's version, e.g. "13.0": part of what identifies a compiled kernel, as another NVRTC emits other code."""
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError as error:
        raise BuildError(f"NVRTC is not available through CuPy ({error}); pip install cupy-cuda13x") from error
    return ".".join(str(part) for part in nvrtc.getVersion())


def _cubin_image(program: int) -> bytes:
    """The compiled image through NVRTC's C API: CuPy's ``getCUBIN`` drops its last byte."""
    maps = Path("/proc/self/maps").read_text().split("\n")
    loaded = next(line.split()[-1] for line in maps if "libnvrtc.so" in line and "builtins" not in line)
    library = ctypes.CDLL(loaded)
    size = ctypes.c_size_t()
    if library.nvrtcGetCUBINSize(ctypes.c_void_p(program), ctypes.byref(size)) != 0:
        raise BuildError("nvrtcGetCUBINSize failed")
    image = ctypes.create_string_buffer(size.value)
    if library.nvrtcGetCUBIN(ctypes.c_void_p(program), image) != 0:
        raise BuildError("nvrtcGetCUBIN failed")
    return image.raw


@functools.cache
def nvcc_version() -> str:
    """What `nvcc --version` says, which names its release and build; BuildError where there is no nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise BuildError("nvcc is not on PATH; install the CUDA toolkit")
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout


def nvcc_command(arch: str) -> list[str]:
    """nvcc's command line for ``arch``, less the input and output files."""
    # -gencode, not -arch: for sm_90a, nvcc 13.0's -arch also runs a plain sm_90 pass, which rejects wgmma.
    target = f"-gencode=arch=compute_{arch.removeprefix('sm_')},code={arch}"
    return [shutil.which("nvcc") or "nvcc", "-std=c++17", target, "-cubin", "-Xptxas", "-v"]


def compile_nvcc(source: Path, arch: str) -> Cubin:
    """Compile ``source`` for ``arch`` with nvcc, every instance instantiated; kept on disk as NVRTC's cubins are."""
    key = cache_key(source.read_text(), *ALL_INSTANCES, nvcc_version(), *nvcc_command(arch))
    return disk_cached("nvcc", key, lambda: run_nvcc(source, arch).to_json(), Cubin.from_json)


def run_nvcc(source: Path, arch: str) -> Cubin:
    """Compile ``source`` with nvcc itself, through a file that takes every instance's address."""
    # Taking an instance's address instantiates it, whatever its parameters (pointers, or TMA tensor maps).
    addresses = ", ".join(f"reinterpret_cast<const void*>(&{instance})" for instance in ALL_INSTANCES)
    lines = [f'#include "{source.resolve()}"', f"const void* flash_attention_instances[] = {{{addresses}}};"]
    with tempfile.TemporaryDirectory() as folder:
        wrapper, cubin = Path(folder) / "instances.cu", Path(folder) / "kernel.cubin"
        wrapper.write_text("\n".join(lines) + "\n")
        command = [*nvcc_command(arch), "-o", str(cubin), str(wrapper)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"{source.parent.name}: nvcc failed for {arch}:\n{result.stderr}")
        return Cubin(cubin.read_bytes(), {}, arch, result.stderr)


@dataclass(frozen=True)
class Resources:
    """What ptxas reported for one kernel instance."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int


def ptxas_resources(log: str) -> dict[str, Resources]:
    """Parse ``ptxas -v`` output into the resources of each compiled entry (by mangled name)."""
    resources = {}
    for block in re.split(r"(?=ptxas info\s+: Compiling entry function)", log):
        entry = re.search(r"Compiling entry function '(\w+)'", block)
        registers = re.search(r"Used (\d+) registers", block)
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block)
        if entry and registers and frame:
            stack, stores, loads = (int(x) for x in frame.groups())
            resources[entry.group(1)] = Resources(int(registers.group(1)), stores, loads, stack)
    return resources
