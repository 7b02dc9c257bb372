"""Tensor maps for Hopper's Tensor Memory Accelerator (TMA): a tensor described once, on the host, for the copy engine.

A chapter that copies with TMA takes q, k and v not as pointers but as tensor maps: 128-byte descriptors that
the CUDA driver's ``cuTensorMapEncodeTiled`` writes and the kernel receives by value (a ``__grid_constant__``
parameter). A map holds the tensor's address, its four dimensions and their strides, the box that one copy
moves, the swizzle the copy writes into shared memory, and what fills elements past the tensor's end.
"""

from __future__ import annotations

import functools

import torch

SWIZZLE_BYTES = 128  # the copy writes wgmma's 128-byte swizzle: a box row is at most 128 bytes
# The element types the kernels take, as the driver names them.
ELEMENT_TYPES = {torch.bfloat16: "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", torch.float16: "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"}


class TensorMapError(RuntimeError):
    """A tensor map could not be made: cuda-bindings or the CUDA driver is missing, or the driver refused it."""


def cuda_driver():
    """The CUDA driver API through NVIDIA's cuda-bindings (imported on first use: only TMA chapters need it)."""
    try:
        from cuda.bindings import driver
    except ImportError as error:
        raise TensorMapError(
            f"TMA copies need the CUDA driver's Python bindings ({error}); pip install 'cuda-bindings>=13,<14'"
        ) from error
    return driver


def tensor_map(tensor: torch.Tensor, box_rows: int, box_cols: int, *, box_heads: int = 1, swizzle: bool = True):
    """The map of a contiguous (batch, seq_len, heads, head_dim) tensor for copies of (box_rows, box_cols) of heads.

    The driver counts dimensions innermost first: (head_dim, heads, seq_len, batch), and a copy's box is
    (box_cols, box_heads, box_rows, 1) at coordinates (col, head, row, batch): in shared memory, the box_heads
    heads of one row lie one after the other, then those of the next row. Rows past seq_len arrive as zeros,
    so the last tile of a sequence needs no bounds check, and one batch's rows never spill into the next.
    TMA needs the address 16-byte aligned and every stride a multiple of 16 bytes; a contiguous tensor of
    128-element rows at a 16-byte aligned address (what ``check_inputs`` hands the kernels) has both. With
    ``swizzle=False`` the copy writes the box as it is, rows one after the other, and a box row may be a whole row.
    """
    if tensor.dtype not in ELEMENT_TYPES:
        raise TypeError(f"a tensor map takes torch.bfloat16 or torch.float16, got {tensor.dtype}")
    if tensor.dim() != 4 or not tensor.is_contiguous() or tensor.data_ptr() % 16 != 0:
        raise ValueError(
            f"a tensor map needs a contiguous, 16-byte aligned (batch, seq_len, heads, head_dim) tensor; got shape "
            f"{tuple(tensor.shape)}, strides {tensor.stride()}, address {tensor.data_ptr():#x}"
        )
    if swizzle and box_cols * tensor.element_size() > SWIZZLE_BYTES:
        raise ValueError(f"a box row is at most {SWIZZLE_BYTES} bytes in the 128-byte swizzle, got {box_cols} columns")
    return _encoded(tensor.data_ptr(), tuple(tensor.shape), tensor.dtype, box_rows, box_cols, box_heads, swizzle)


# A map depends on the address, the shape and the box alone, not on the values, and encoding one through
# cuda-bindings is Python work on the host at every call, which shows beside a decode step's short kernel: the
# maps of tensors seen before are kept (a model passes the same KV cache at every step).
@functools.lru_cache(maxsize=256)
def _encoded(
    address: int,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    box_rows: int,
    box_cols: int,
    box_heads: int,
    swizzle: bool = True,
):
    driver = cuda_driver()
    batch, seq_len, heads, head_dim = shape
    element = dtype.itemsize
    dims = (head_dim, heads, seq_len, batch)
    strides = (head_dim * element, heads * head_dim * element, seq_len * heads * head_dim * element)  # bytes, dims 1-3
    box = (box_cols, box_heads, box_rows, 1)
    try:
        status, encoded = driver.cuTensorMapEncodeTiled(
            getattr(driver.CUtensorMapDataType, ELEMENT_TYPES[dtype]),
            len(dims),
            address,
            [driver.cuuint64_t(n) for n in dims],
            [driver.cuuint64_t(n) for n in strides],
            [driver.cuuint32_t(n) for n in box],
            [driver.cuuint32_t(1)] * len(dims),  # every element of the box, none skipped
            driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
            if swizzle
            else driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
            driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,  # zeros, not NaN, past the end
        )
    except RuntimeError as error:  # cuda-bindings raises one when it cannot load the driver library (libcuda)
        raise TensorMapError(f"the CUDA driver could not encode a tensor map: {error}") from error
    if status != driver.CUresult.CUDA_SUCCESS:
        raise TensorMapError(
            f"cuTensorMapEncodeTiled refused dims {dims}, strides {strides} bytes, box {box}: {status.name}"
        )
    return encoded
