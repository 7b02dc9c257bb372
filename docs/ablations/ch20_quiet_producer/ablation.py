"""Kernel 20's mbarrier waits with a sleep between tries: the producer's, the consumers', both."""

TITLE = "mbarrier waits that sleep between their tries, in the producer and in the consumers, on kernel 20"
ROWS = ("the producer retries at once", "the producer sleeps between tries")
COLUMNS = ("the consumers retry at once", "the consumers sleep between tries")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k20_decode_kernel",
    (ROWS[0], COLUMNS[1]): "k20_consumers_sleep",
    (ROWS[1], COLUMNS[0]): "k20_producer_sleeps",
    (ROWS[1], COLUMNS[1]): "k20_all_sleep",
}
CHANGED_LINES = 32  # the sleeping wait beside the plain one, and the waits that call it
