"""Ping-pong on kernel 19, taken apart: the turns on the tensor cores, and S issued before the wait for V."""

TITLE = "the warpgroups' turns on the tensor cores against S issued before the wait for V, on kernel 19"
ROWS = ("the warpgroups issue when ready", "the warpgroups take turns")
COLUMNS = ("wait for K and V, then S and P V", "S once K has landed, P V once V has")
CELLS = {
    ("the warpgroups issue when ready", "wait for K and V, then S and P V"): "k19_dynamic_schedule",
    ("the warpgroups issue when ready", "S once K has landed, P V once V has"): "k19_s_first",
    ("the warpgroups take turns", "wait for K and V, then S and P V"): "k19_turns",
    ("the warpgroups take turns", "S once K has landed, P V once V has"): "k19_ping_pong",
}
CHANGED_LINES = (
    32  # the turns: two named barriers, taking and passing the turn around each issue, the first turn and the last
)
