"""Check attention inputs and launch a chapter's compiled kernel on torch tensors through CuPy."""

from __future__ import annotations

import ast
import math
import numbers
import operator
import re
from pathlib import Path

import numpy as np
import torch

from kernels.build import ALL_INSTANCES, CUDA_TYPES, BuildError, compile_nvrtc, name_expression
from kernels.tma import TensorMapError, tensor_map

HEAD_DIM = 128
SOFTMAX_SCALE = 1.0 / math.sqrt(HEAD_DIM)  # the scale of the scores q·k when none is given
# Split-KV chapters: the keys of each query tile are split when the query tiles fill less than SPLIT_BELOW of the
# SMs, into the fewest splits whose last wave is at least SPLIT_EFFICIENCY as full as the best split count's.
SPLIT_BELOW = 0.8
SPLIT_EFFICIENCY = 0.85
COMBINE_WARPS = 4  # combine_splits: one warp per row of the output
# A decode kernel's splits: as many as give each SM one block, none with fewer than DECODE_MIN_SPLIT_TILES key
# tiles. One block per SM keeps DRAM busy; each further split costs a block's start and end and its fp32 rows.
DECODE_MIN_SPLIT_TILES = 2
# Tail-split kernels: a full-attention call whose last wave holds few query tiles splits each of them into as many
# pieces as fill the SMs, none with fewer than TAIL_MIN_PIECE_TILES key tiles: a piece costs a tile's start and end,
# its fp32 rows, and their merge.
TAIL_MIN_PIECE_TILES = 4
# The merge after a split launch, per element type: a second entry of a split-KV chapter's .cu.
COMBINE_INSTANCES = {dtype: f"combine_splits<{name}>" for dtype, name in CUDA_TYPES.items()}
DECODE_INSTANCES = {
    (dtype, causal): f"decode_attention<{name}, {str(causal).lower()}>"
    for dtype, name in CUDA_TYPES.items()
    for causal in (False, True)
}
# The element types the kernels take, by the names the command line uses.
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MAX_GRID_YZ = 65535  # heads go on grid.y and the batch on grid.z: CUDA caps both
# A file-scope integer constant of a kernel: "constexpr int NAME = expr;" or "constexpr int A = 1, B = 2;".
CONSTEXPR_INT = re.compile(r"^constexpr int ([^;]+);", re.MULTILINE)
INT_RANGE = range(-(2**31), 2**31)  # a C++ int


def _c_divide(a: int, b: int) -> int:
    """C++ integer division: the quotient truncated toward zero (Python's // floors it)."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _c_remainder(a: int, b: int) -> int:
    """C++ %: the remainder takes the sign of the dividend, so that a == (a / b) * b + a % b."""
    return a - _c_divide(a, b) * b


C_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _c_divide,
    ast.Mod: _c_remainder,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}


def _evaluate(node: ast.expr, known: dict[str, int]) -> int:
    """An integer expression of literals, earlier constants, + - * / % << >> and parentheses, as C++ computes it."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        value = node.value
    elif isinstance(node, ast.Name) and node.id in known:
        value = known[node.id]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand, known) * (-1 if isinstance(node.op, ast.USub) else 1)
    elif isinstance(node, ast.BinOp) and type(node.op) in C_OPERATORS:
        value = C_OPERATORS[type(node.op)](_evaluate(node.left, known), _evaluate(node.right, known))
    else:
        raise ValueError(f"not an integer expression of earlier constants: {ast.unparse(node)!r}")
    if value not in INT_RANGE:
        raise ValueError(f"{ast.unparse(node)!r} is {value}, past what a C++ int holds")
    return value


def kernel_constants(source: Path) -> dict[str, int]:
    """A kernel's file-scope ``constexpr int`` constants, evaluated in file order as the C++ compiler does.

    They are the one home of a chapter's launch shape (BLOCK_Q, N_THREADS, SMEM_BYTES, the TMA box): the
    runtime reads them here instead of a loader restating them. A constant this cannot evaluate is a ValueError
    naming it, not a guess.
    """
    constants: dict[str, int] = {}
    for declaration in CONSTEXPR_INT.findall(source.read_text()):
        for declarator in declaration.split(","):
            # One line of Python, however the C++ wraps it.
            name, equals, expression = (" ".join(part.split()) for part in declarator.partition("="))
            try:
                if not (equals and name.isidentifier()):
                    raise ValueError("expected NAME = expression")
                constants[name] = _evaluate(ast.parse(expression, mode="eval").body, constants)
            except (SyntaxError, ValueError, ZeroDivisionError) as error:
                declared = " ".join(declarator.split())
                raise ValueError(f"{source}: cannot read constexpr int {declared!r}: {error}") from error
    return constants


class KernelError(RuntimeError):
    """A chapter's kernel failed to compile, load or launch; the message names the chapter."""


def check_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False
) -> tuple[torch.Tensor, ...]:
    """Raise a TypeError/ValueError naming the problem, or return q, k, v in a layout the kernels read.

    q is (batch, seq_len_q, n_heads, 128); k and v are (batch, seq_len_k, n_kv_heads, 128), n_kv_heads
    dividing n_heads (grouped-query attention; 1 is multi-query). Causal attention is aligned bottom-right,
    the queries being the last seq_len_q of seq_len_k positions, so it needs seq_len_q <= seq_len_k.
    The kernels read contiguous, 16-byte aligned tensors; any other strides (a transposed view, a slice of a
    fused QKV tensor) are copied into that layout.
    """
    tensors = {"q": q, "k": k, "v": v}
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    for name, tensor in tensors.items():
        if tensor.dtype not in CUDA_TYPES:
            raise TypeError(f"{name} has dtype {tensor.dtype}; the kernels take torch.bfloat16 or torch.float16")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    for name, tensor in tensors.items():
        if tensor.dim() != 4:
            raise ValueError(
                f"{name} must have 4 dimensions (batch, seq_len, n_heads, head_dim), got shape {tuple(tensor.shape)}"
            )
    for name, tensor in tensors.items():
        if tensor.shape[-1] != HEAD_DIM:
            raise ValueError(f"head_dim must be {HEAD_DIM}, got {tensor.shape[-1]} in {name}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    batch, seq_len_q, n_heads, _ = q.shape
    _, seq_len_k, n_kv_heads, _ = k.shape
    if k.shape[0] != batch:
        raise ValueError(f"q and k, v must have the same batch size, got {batch} and {k.shape[0]}")
    if q.numel() == 0 or k.numel() == 0:
        raise ValueError(f"inputs are empty: q has shape {tuple(q.shape)}, k and v {tuple(k.shape)}")
    if n_heads % n_kv_heads != 0:
        raise ValueError(
            f"n_heads of q ({n_heads}) must be a multiple of n_kv_heads of k and v ({n_kv_heads}): "
            "each K/V head serves a whole group of query heads"
        )
    if causal and seq_len_q > seq_len_k:
        raise ValueError(
            f"causal attention needs seq_len_q <= seq_len_k (the queries are the last seq_len_q positions), "
            f"got seq_len_q {seq_len_q} and seq_len_k {seq_len_k}"
        )
    if n_heads > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        raise ValueError(f"batch and n_heads must each be at most {MAX_GRID_YZ}, got {batch} and {n_heads}")
    for name, tensor in tensors.items():
        if tensor.device.type != "cuda":
            raise ValueError(f"{name} is on {tensor.device}; the kernels need tensors on a CUDA device")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}")
    major, minor = torch.cuda.get_device_capability(q.device)
    if major < 8:
        raise ValueError(
            f"{torch.cuda.get_device_name(q.device)} is sm_{major}{minor}; the kernels need sm_80 or newer "
            "(bf16 mma.sync, cp.async and ldmatrix)"
        )
    return tuple(_readable(tensor) for tensor in (q, k, v))


def _readable(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself if it is contiguous and 16-byte aligned, else a copy that is."""
    if tensor.is_contiguous() and tensor.data_ptr() % 16 == 0:
        return tensor
    return tensor.clone(memory_format=torch.contiguous_format)


def check_output(out: torch.Tensor, q: torch.Tensor) -> None:
    """An ``out`` tensor must match q exactly, in a layout the kernel writes."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(
            f"out must match q: shape {tuple(q.shape)}, {q.dtype} on {q.device}; "
            f"got {tuple(out.shape)}, {out.dtype} on {out.device}"
        )
    if not out.is_contiguous() or out.data_ptr() % 16 != 0:
        raise ValueError("out must be contiguous and 16-byte aligned")


def check_scale(scale: float | None) -> float:
    """The softmax scale to apply: ``scale`` as a float (1/√128 for None), or a TypeError/ValueError naming it.

    A Python number that is finite and above zero; a tensor is refused, since the kernels take the scale by
    value at launch (reading a tensor's value would wait for the GPU).
    """
    if scale is None:
        return SOFTMAX_SCALE
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or isinstance(scale, torch.Tensor):
        raise TypeError(f"scale must be a Python float, got {type(scale).__name__}")
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be finite and above zero, got {scale}")
    return scale


def check_seq_lens_k(
    seq_lens_k: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor, *, causal: bool = False
) -> torch.Tensor | None:
    """Raise a TypeError/ValueError naming the problem, or return the per-sequence KV lengths (None: every key).

    ``seq_lens_k`` is an int32 tensor of shape (batch,) on q's device: sequence b attends to the first
    ``seq_lens_k[b]`` keys of the padded cache k, v (batch, seq_len_k, n_kv_heads, 128), as FlashAttention-2's
    ``flash_attn_with_kvcache(cache_seqlens=...)``. Each length is in [0, seq_len_k], causal or not: causal masks
    align bottom-right per sequence (query i sees keys 0 … i + seq_lens_k[b] - seq_len_q), so a length below
    seq_len_q leaves the first queries no key, as FlashAttention-2 allows. A row that sees no key has output 0
    and log-sum-exp -inf, as every row of a sequence of length 0 does.

    Checking the values reads them back from the GPU (one synchronisation). While a CUDA graph is being
    captured that is not allowed, and the lengths it replays with are not yet written: the values are then not
    checked, only the type, dtype, device and shape. A strided view is returned as a contiguous copy.
    """
    if seq_lens_k is None:
        return None
    if not isinstance(seq_lens_k, torch.Tensor):
        raise TypeError(f"seq_lens_k must be a torch.Tensor of int32 lengths, got {type(seq_lens_k).__name__}")
    if seq_lens_k.dtype != torch.int32:
        raise TypeError(f"seq_lens_k has dtype {seq_lens_k.dtype}; the lengths must be torch.int32")
    batch, seq_len_k = q.shape[0], k.shape[1]
    if seq_lens_k.shape != (batch,):
        raise ValueError(
            f"seq_lens_k must have shape (batch,) = ({batch},), one length per sequence; got {tuple(seq_lens_k.shape)}"
        )
    if seq_lens_k.device != q.device:
        raise ValueError(f"seq_lens_k is on {seq_lens_k.device}; it must be on q's device, {q.device}")
    if not (seq_lens_k.is_cuda and torch.cuda.is_current_stream_capturing()):
        shortest, longest = (int(n) for n in torch.stack(torch.aminmax(seq_lens_k)).tolist())
        if shortest < 0:
            raise ValueError(f"seq_lens_k must not be negative, got a length of {shortest}")
        if longest > seq_len_k:
            raise ValueError(f"seq_lens_k must be at most seq_len_k = {seq_len_k} (the keys in k and v), got {longest}")
    return seq_lens_k.contiguous()  # the kernels read lengths[b] at b: a strided view is copied


def split_count(query_tiles: int, key_tiles: int, sms: int) -> int:
    """How many splits a split-KV chapter deals each query tile's key tiles to (see SPLIT_BELOW)."""
    if query_tiles >= SPLIT_BELOW * sms:
        return 1

    def last_wave_fill(splits: int) -> float:
        work = query_tiles * splits
        return work / (math.ceil(work / sms) * sms)

    counts = range(1, max(key_tiles, 1) + 1)
    best = max(last_wave_fill(n) for n in counts)
    return next(n for n in counts if last_wave_fill(n) >= SPLIT_EFFICIENCY * best)


def decode_split_count(units: int, key_tiles: int, sms: int) -> int:
    """How many splits a decode kernel deals each (sequence, K/V head)'s key tiles to: as many as give each of the
    `sms` SMs one block, none shorter than DECODE_MIN_SPLIT_TILES tiles."""
    return max(1, min(sms // units, key_tiles // DECODE_MIN_SPLIT_TILES))


def tail_split(query_tiles: int, key_tiles: int, sms: int) -> tuple[int, int]:
    """The query tiles of a call's last wave on ``sms`` SMs, and the pieces each is split into along its keys:
    (0, 1) when the tiles fill their waves, or a piece would have fewer than TAIL_MIN_PIECE_TILES key tiles."""
    tail = query_tiles % sms
    pieces = min(sms // tail, key_tiles // TAIL_MIN_PIECE_TILES) if tail else 1
    return (tail, pieces) if pieces > 1 else (0, 1)


def gpu_arch(device_index: int) -> str:
    """A GPU's architecture as compilers name it, e.g. "sm_90"."""
    major, minor = torch.cuda.get_device_capability(device_index)
    return f"sm_{major}{minor}"


def load_function(
    source: Path,
    arch: str,
    entry: str,
    device_index: int,
    smem_bytes: int,
    *,
    label: str,
    instances: tuple[str, ...] = ALL_INSTANCES,
):
    """One kernel of ``source`` (``entry``: one of ``instances``), compiled for ``arch`` and loaded on a device.

    The one path from source to a launchable CuPy function, for the chapters and for the kernels of peak/:
    NVRTC's cubin, loaded as a CuPy RawModule, with the block's dynamic shared memory raised to ``smem_bytes``
    (above 48 KB a kernel must opt in). A failure is a KernelError naming ``label`` (the chapter, or the file).
    """
    import cupy

    try:
        cubin = compile_nvrtc(source, arch, instances)
        with cupy.cuda.Device(device_index):
            function = cupy.RawModule(path=str(cubin.path())).get_function(cubin.lowered_names[entry])
            function.max_dynamic_shared_size_bytes = smem_bytes
    except BuildError as error:
        raise KernelError(str(error)) from error
    except Exception as error:
        raise KernelError(f"{label}: could not load {entry}: {error}") from error
    return function


class AttentionKernel:
    """One chapter's ``flash_attention`` kernel: compiled with NVRTC on first use, launched through CuPy.

    The launch shape is read from the ``.cu`` itself (``kernel_constants``): one block of ``N_THREADS`` per
    ``BLOCK_Q`` query rows of one (batch, head), with ``SMEM_BYTES`` of dynamic shared memory. What the
    ``.cu``'s constants do not say, the loader passes:

    ``arch`` names the one architecture a kernel is built for when it uses instructions of that chip alone
    (``"sm_90a"``: Hopper's wgmma); without it the kernel is built for whichever GPU it runs on.

    ``tensor_maps``: the kernel copies with TMA and takes q, k and v as tensor maps, built per call, whose copies move a
    box of one head (see ``kernels.tma``): ``BLOCK_KV`` rows by ``PLANE`` columns, one plane of a tile. ``persistent``:
    one block per SM works through the query tiles; the batch size is the last argument (a kernel that declares
    ``CLUSTER`` runs in clusters of that many blocks, its ``__cluster_dims__``, and its grid is whole clusters).
    ``packed_gqa``: a query tile holds the heads of one K/V group at several positions (``packed_tile``), and the Q
    map's box spans those heads.
    ``o_tensor_map``: o is a tensor map too, after v's, whose box is one consumer warpgroup's ``GROUP_Q`` rows of one
    plane (packed, the heads of a group at ``GROUP_Q`` / heads positions when they divide it; the kernel writes o itself
    otherwise); its pointer still follows the maps. ``kv_cache``: the kernel takes per-sequence KV lengths, writes the
    log-sum-exp on request and splits the keys when the query tiles are too few to fill the GPU (``split_count``),
    merging the splits with its ``combine_splits``; its arguments after o are o_partial, lse, seq_lens_k, and n_splits
    last.
    ``dynamic_schedule``: the blocks take their work from a counter in global memory (``work_counter``), whose
    address comes after n_splits. ``decode_kernel``: the ``.cu`` also holds ``decode_attention``, launched instead
    when a query tile holds at most ``DECODE_ROWS`` rows: a grid of (splits, K/V heads, batch) small blocks taking q, k
    and v as pointers, its splits by ``decode_split_count``. ``plain_prefill``: ``flash_attention`` is compiled for
    one split, full lengths and no log-sum-exp (an ablation variant's): a call is never split but by the decode
    kernel, and KV lengths or the log-sum-exp are refused. ``split_tail``: a full-attention call's last wave of query
    tiles is split along the keys (``tail_split``) and merged in the kernel; after the work counter come tail_tiles,
    tail_splits and the pieces' scratch, tail_o and tail_lse, and the counter has a word per tail tile after its own.

    Under torch.compile a launch is a graph break: Dynamo runs it as it is, between the graphs it compiles
    (``torch.ops.fa_ladder.attention`` is the form that compiles into one graph).
    """

    def __init__(
        self,
        source: Path,
        *,
        arch: str | None = None,
        tensor_maps: bool = False,
        persistent: bool = False,
        packed_gqa: bool = False,
        o_tensor_map: bool = False,
        kv_cache: bool = False,
        dynamic_schedule: bool = False,
        decode_kernel: bool = False,
        plain_prefill: bool = False,
        split_tail: bool = False,
    ) -> None:
        self.source = source
        self.chapter = source.parent.name
        constants = kernel_constants(source)
        decode_constants = ("DECODE_ROWS", "DECODE_KV", "DECODE_THREADS", "DECODE_SMEM_BYTES", "DECODE_BLOCKS_PER_SM")
        needed = (
            "BLOCK_Q",
            "N_THREADS",
            "SMEM_BYTES",
            *(("BLOCK_KV", "PLANE") if tensor_maps else ()),
            *(("GROUP_Q",) if o_tensor_map else ()),
            *(decode_constants if decode_kernel else ()),
        )
        if missing := [name for name in needed if name not in constants]:
            raise ValueError(f"{source}: no constexpr int {', '.join(missing)}, where the launch reads its shape")
        self.block_q = constants["BLOCK_Q"]
        self.cluster = constants.get("CLUSTER", 1)  # blocks per cluster (__cluster_dims__): the grid is whole clusters
        self.n_threads = constants["N_THREADS"]
        self.smem_bytes = constants["SMEM_BYTES"]
        self.arch = arch
        self.tensor_map_box = (constants["BLOCK_KV"], constants["PLANE"]) if tensor_maps else None
        self.persistent = persistent
        self.packed_gqa = packed_gqa
        self.o_box_rows = constants["GROUP_Q"] if o_tensor_map else None
        self.kv_cache = kv_cache
        self.dynamic_schedule = dynamic_schedule
        self.decode = {name: constants[name] for name in decode_constants} if decode_kernel else None
        self.plain_prefill = plain_prefill
        self.split_tail = split_tail
        self.instances = (
            ALL_INSTANCES
            + (tuple(COMBINE_INSTANCES.values()) if kv_cache else ())
            + (tuple(DECODE_INSTANCES.values()) if decode_kernel else ())
        )
        self._loaded: dict[tuple, object] = {}

    def runs_on(self, gpu: str) -> bool:
        """Whether the kernel runs on a GPU of architecture ``gpu`` (e.g. "sm_90"; sm_90a code runs on sm_90)."""
        return self.arch is None or self.arch.removesuffix("a") == gpu

    def build_arch(self, gpu: str) -> str:
        """The architecture to compile for on a GPU of architecture ``gpu`` (e.g. "sm_90"), or a ValueError."""
        if not self.runs_on(gpu):
            hardware = self.arch.removesuffix("a")
            raise ValueError(f"{self.chapter} is built for {self.arch} and runs on {hardware} GPUs only; this is {gpu}")
        return self.arch or gpu

    def build_archs(self) -> tuple[str, ...]:
        """The architectures the kernel must compile for: the GPUs the ladder is measured on."""
        return (self.arch,) if self.arch else ("sm_80", "sm_90")

    @torch.compiler.disable  # NumPy scalars and CuPy launches are nothing Dynamo can trace
    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        causal: bool = False,
        out: torch.Tensor | None = None,
        scale: float | None = None,
        seq_lens_k: torch.Tensor | None = None,
        return_lse: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """softmax(scale · q kᵀ) v, causal (bottom-right) or not; written into ``out`` when given.

        ``scale`` defaults to 1/√128. Split-KV chapters (``kv_cache``) also take ``seq_lens_k`` (sequence b sees its
        first seq_lens_k[b] keys) and, with ``return_lse``, return (out, lse): lse is float32 (batch, heads, seq_len_q),
        the natural log of each row's softmax denominator.
        """
        q, k, v = check_inputs(q, k, v, causal=causal)
        scale = check_scale(scale)
        if seq_lens_k is not None or return_lse:
            wanted = "per-sequence KV lengths" if seq_lens_k is not None else "the log-sum-exp"
            if not self.kv_cache:
                raise ValueError(f"{self.chapter}: {wanted} need a split-KV chapter (kv_cache), not this one")
            if self.plain_prefill:
                raise ValueError(f"{self.chapter}: compiled for plain prefill calls alone, without {wanted}")
        seq_lens_k = check_seq_lens_k(seq_lens_k, q, k, causal=causal)
        if out is None:
            out = torch.empty_like(q)
        else:
            check_output(out, q)
        batch, seq_len_q, n_heads, head_dim = q.shape
        _, seq_len_k, n_kv_heads, _ = k.shape
        decoding = self.decodes(q.shape, n_kv_heads)
        kernel = self._kernel(q.device.index, q.dtype, bool(causal), decoding)
        tile_heads, _ = self.packed_tile(n_heads, n_kv_heads)
        grid = self.query_tiles(q.shape, n_kv_heads)
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
        n_splits = self.splits(q.shape, k.shape, sms)
        tail_tiles, tail_splits = self.tail(q.shape, k.shape, sms, causal)
        n_threads, smem_bytes = self.n_threads, self.smem_bytes
        if decoding:
            grid = (n_splits, n_kv_heads, batch)
            n_threads, smem_bytes = self.decode["DECODE_THREADS"], self.decode["DECODE_SMEM_BYTES"]
        elif self.persistent:
            items = (math.prod(grid) - tail_tiles) * n_splits + tail_tiles * tail_splits
            grid = (max(min(items, sms) // self.cluster, 1) * self.cluster, 1, 1)
        if self.tensor_map_box is None or decoding:
            inputs = [np.uint64(tensor.data_ptr()) for tensor in (q, k, v)]
        else:
            from cupy.cuda.function import CPointer

            o_map = out if self.o_box_rows else None
            maps = self._tensor_maps(q, k, v, tile_heads, o_map)  # referenced until the launch has copied their bytes
            inputs = [CPointer(encoded.getPtr()) for encoded in maps]  # CuPy passes the bytes pointed to, by value
        lse = q.new_empty((batch, n_heads, seq_len_q), dtype=torch.float32) if return_lse else None
        if n_splits > 1:  # each split's rows and log-sum-exp; -inf marks a split with no key tile for a row
            o_partial = q.new_empty((n_splits, *q.shape), dtype=torch.float32)
            lse_shape = (n_splits, batch, n_heads, seq_len_q)
            if decoding:  # the decode kernel writes every split's rows, the empty ones' -inf included
                lse_partial = q.new_empty(lse_shape, dtype=torch.float32)
            else:
                lse_partial = q.new_full(lse_shape, -math.inf, dtype=torch.float32)
        else:
            o_partial, lse_partial = None, lse
        tail_o = tail_lse = None
        if tail_tiles:  # each piece's fp32 rows and their log-sum-exp, written before the tile's last piece reads them
            tail_o = q.new_empty((tail_tiles * tail_splits, self.block_q, head_dim), dtype=torch.float32)
            tail_lse = q.new_empty((tail_tiles * tail_splits, self.block_q), dtype=torch.float32)
        args = (
            *inputs,
            *(_address(tensor) for tensor in (out, *((o_partial, lse_partial, seq_lens_k) if self.kv_cache else ()))),
            *(np.int32(n) for n in (seq_len_q, seq_len_k, n_heads, n_kv_heads)),
            np.float32(scale),
            *((np.int32(batch),) if self.persistent and not decoding else ()),
            *((np.int32(n_splits),) if self.kv_cache else ()),
            *(
                (_address(work_counter(q.device, torch.cuda.current_stream(q.device))),)
                if self.dynamic_schedule and not decoding
                else ()
            ),
            *(
                (np.int32(tail_tiles), np.int32(tail_splits), _address(tail_o), _address(tail_lse))
                if self.split_tail and not decoding
                else ()
            ),
        )
        import cupy

        # torch's current stream (the CUDA stream protocol), so the launch is ordered with torch's own work.
        stream = cupy.cuda.Stream.from_external(torch.cuda.current_stream(q.device))
        try:
            with cupy.cuda.Device(q.device.index):
                kernel(grid, (n_threads,), args, shared_mem=smem_bytes, stream=stream)
                if n_splits > 1:
                    rows = batch * seq_len_q * n_heads
                    merge = (o_partial, lse_partial, out, lse)
                    self._combine(q.device.index, q.dtype)(
                        (math.ceil(rows / COMBINE_WARPS),),
                        (COMBINE_WARPS * 32,),
                        (*(_address(t) for t in merge), *(np.int32(n) for n in (rows, seq_len_q, n_heads, n_splits))),
                        stream=stream,
                    )
        except Exception as error:
            raise KernelError(f"{self.chapter}: launch of grid {grid} failed: {error}") from error
        return (out, lse) if return_lse else out

    def splits(self, q_shape: tuple[int, ...], k_shape: tuple[int, ...], sms: int) -> int:
        """How many splits a call with these q and k shapes deals each query tile's keys to (1 unless kv_cache)."""
        seq_len_k, n_kv_heads = k_shape[1], k_shape[2]
        if not self.kv_cache:
            return 1
        if self.decodes(q_shape, n_kv_heads):
            return decode_split_count(q_shape[0] * n_kv_heads, math.ceil(seq_len_k / self.decode["DECODE_KV"]), sms)
        if self.plain_prefill:
            return 1
        return split_count(math.prod(self.query_tiles(q_shape, n_kv_heads)), math.ceil(seq_len_k / self.block_q), sms)

    def tail(self, q_shape: tuple[int, ...], k_shape: tuple[int, ...], sms: int, causal: bool) -> tuple[int, int]:
        """The query tiles of a call's last wave that a tail-split kernel splits, and into how many pieces each
        (``tail_split``): full attention that fills its waves with whole tiles (no split-KV, no decode kernel)."""
        seq_len_k, n_kv_heads = k_shape[1], k_shape[2]
        if not self.split_tail or causal or self.decodes(q_shape, n_kv_heads) or self.splits(q_shape, k_shape, sms) > 1:
            return 0, 1
        return tail_split(math.prod(self.query_tiles(q_shape, n_kv_heads)), math.ceil(seq_len_k / self.block_q), sms)

    def decodes(self, q_shape: tuple[int, ...], n_kv_heads: int) -> bool:
        """Whether a call with these q shape and K/V heads runs the decode kernel: a chapter that has one, and a query
        tile of one K/V group's positions that fits in DECODE_ROWS rows."""
        _, seq_len_q, n_heads, _ = q_shape
        return self.decode is not None and seq_len_q * (n_heads // n_kv_heads) <= self.decode["DECODE_ROWS"]

    def query_tiles(self, q_shape: tuple[int, ...], n_kv_heads: int) -> tuple[int, int, int]:
        """The query tiles of a call, (along the positions, across the heads, sequences): per (batch, head) without
        packing; per (batch, K/V head, chunk of a group) with it. A grid that is not persistent launches them so."""
        batch, seq_len_q, n_heads, _ = q_shape
        tile_heads, tile_positions = self.packed_tile(n_heads, n_kv_heads)
        head_tiles = n_kv_heads * math.ceil(n_heads // n_kv_heads / tile_heads)
        return math.ceil(seq_len_q / tile_positions), head_tiles, batch

    def packed_tile(self, n_heads: int, n_kv_heads: int) -> tuple[int, int]:
        """The (heads, positions) of one query tile: (1, BLOCK_Q) unpacked; packed, the heads of one K/V group.

        A group larger than a tile is split into tiles of BLOCK_Q heads at one position each; a tile whose heads do
        not divide BLOCK_Q leaves its last rows empty. The packed kernel derives the same from its arguments.
        """
        tile_heads = min(n_heads // n_kv_heads, self.block_q) if self.packed_gqa else 1
        return tile_heads, self.block_q // tile_heads

    def _tensor_maps(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tile_heads: int = 1, out: torch.Tensor | None = None
    ) -> list:
        """The TMA tensor maps of q, k and v (and of out, when given), or a KernelError naming the chapter and what is
        missing."""
        rows, cols = self.tensor_map_box
        try:
            q_map = tensor_map(q, rows // tile_heads, cols, box_heads=tile_heads)
            maps = [q_map, *(tensor_map(tensor, rows, cols) for tensor in (k, v))]
            if out is not None:  # one warpgroup's rows; a map the kernel leaves unused when they are not one box
                box_heads = tile_heads if self.o_box_rows % tile_heads == 0 else 1
                maps.append(tensor_map(out, self.o_box_rows // box_heads, cols, box_heads=box_heads))
            return maps
        except TensorMapError as error:
            raise KernelError(f"{self.chapter}: {error}") from error

    def _kernel(self, device_index: int, dtype: torch.dtype, causal: bool, decoding: bool = False):
        """The loaded kernel for one device, element type and causal flag, the decode kernel when ``decoding``
        (compiled and loaded once)."""
        key = (device_index, dtype, causal, decoding)
        if key not in self._loaded:
            self._loaded[key] = self._load(*key)
        return self._loaded[key]

    def _load(self, device_index: int, dtype: torch.dtype, causal: bool, decoding: bool):
        arch = self.build_arch(gpu_arch(device_index))  # a ValueError on a GPU the kernel is not written for
        entry = DECODE_INSTANCES[dtype, causal] if decoding else name_expression(dtype, causal)
        smem_bytes = self.decode["DECODE_SMEM_BYTES"] if decoding else self.smem_bytes
        return load_function(
            self.source, arch, entry, device_index, smem_bytes, label=self.chapter, instances=self.instances
        )

    def _combine(self, device_index: int, dtype: torch.dtype):
        """A split-KV chapter's combine_splits for one device and element type (loaded once)."""
        key = (device_index, dtype, "combine")
        if key not in self._loaded:
            arch = self.build_arch(gpu_arch(device_index))
            entry = COMBINE_INSTANCES[dtype]
            self._loaded[key] = load_function(
                self.source, arch, entry, device_index, 0, label=self.chapter, instances=self.instances
            )
        return self._loaded[key]


# Dynamic-schedule chapters: one int32 counter of work taken per (device, stream), zero between launches (each
# launch's last ask for work resets it), followed by one per SM that tail-split kernels count a tile's pieces on
# (its last piece resets it). Launches on one stream run one after the other, so they share it; a
# launch on another stream has its own. A launch captured into a CUDA graph gets a counter of its own, zeroed
# in the graph, since memory allocated while capturing belongs to the graph. The shared counters live outside
# torch's allocator: one first made while torch allocates into a graph's private pool (torch.compile's
# "reduce-overhead" warms up that way) would be a live tensor in that pool that the graph does not own.
_work_counters: dict[tuple[int, int], torch.Tensor] = {}


def work_counter(device: torch.device, stream: torch.cuda.Stream) -> torch.Tensor:
    """The work counter a dynamic-schedule launch on ``stream`` reads and resets, and the tail tiles' after it."""
    words = 1 + torch.cuda.get_device_properties(device).multi_processor_count  # a last wave has fewer tiles
    if torch.cuda.is_current_stream_capturing():
        return torch.zeros(words, dtype=torch.int32, device=device)
    key = (device.index, stream.cuda_stream)
    if key not in _work_counters:
        import cupy

        with cupy.cuda.Device(device.index):
            memory = cupy.empty(words, dtype=cupy.int32)  # from CuPy's pool, not torch's
        _work_counters[key] = torch.as_tensor(memory, device=device).zero_()  # zeroed on the launch's stream
    return _work_counters[key]


def _address(tensor: torch.Tensor | None) -> np.uint64:
    """A tensor's device address as a kernel argument; 0 (a null pointer) for None."""
    return np.uint64(0 if tensor is None else tensor.data_ptr())
