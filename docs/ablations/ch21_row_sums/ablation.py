"""Each row's sum of P on kernel 21: by additions after the exponentials, or on the tensor cores with P V."""

TITLE = "the row sums by additions or on the tensor cores, with or without the fence, on kernel 21"
ROWS = ("the row sums by additions", "the row sums on the tensor cores, a wgmma of ones beside P V")
COLUMNS = ("no fence: ptxas places the softmax", "the maxima held above the wait for P V")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k20_decode_kernel",
    (ROWS[0], COLUMNS[1]): "k21_maxima_first",
    (ROWS[1], COLUMNS[0]): "k21_row_sums_unfenced",
    (ROWS[1], COLUMNS[1]): "k21_row_sums",
}
CHANGED_LINES = 80  # the ones in shared memory, their wgmma and its operands, the sums' rescale and pins; no additions
