"""Run chapters once causal and once not at a ragged shape, for compute-sanitizer's memcheck, racecheck, synccheck.

    compute-sanitizer --tool racecheck --error-exitcode 1 python scripts/sanitize.py 5 7

333 rows is no multiple of any tile, so the last query and key tiles are cut short, and the causal mask cuts
through the diagonal tiles: where out-of-bounds accesses and missing barriers would show. The decode shape
packs a group's heads into a tile and splits the keys across blocks. The tail shape, full attention of 153 query
tiles, leaves 21 in the last wave on 132 SMs, which a tail-split kernel (k29_tail_split) deals in pieces and merges.
The paired shape is attention over more than PAIRED_KEYS keys, its last query and key tiles cut short, with
enough query tiles that the keys are not split: k29_kv_multicast's blocks share K and V in pairs there in full
attention, and chapter 32's causal too, where the earlier tile of every pair passes over the later one's last key tile.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernels.tools import run_once  # noqa: E402
from kernels.tools.cli import Parser  # noqa: E402

RAGGED = ["--batch", "2", "--seq-len", "333", "--heads", "2"]
# Decoding: one query per sequence, 4 query heads per K/V head (packed from chapter 17), few tiles (split from 18).
DECODE = ["--batch", "3", "--seq-len", "1", "--heads", "32", "--kv-heads", "8", "--kv-len", "700"]
TAIL = ["--batch", "1", "--seq-len", "1100", "--heads", "17"]
PAIRED = ["--batch", "1", "--seq-len", "6900", "--heads", "2", "--kv-len", "8200"]


def main(argv: list[str]) -> int:
    """Each chosen chapter (default: all that run on this GPU), causal and then not, then decoding, then full
    attention with a split tail, then over many keys, full and then causal, once each."""
    parser = Parser(prog="sanitize.py", description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="by number or slug, variants by name (default: every chapter)")
    names = parser.parse_args(argv).chapters or [target.token for target in run_once.targets([]) if target.chapter]
    shapes = ([*RAGGED, "--causal"], RAGGED, DECODE, TAIL, PAIRED, [*PAIRED, "--causal"])
    return next((status for shape in shapes if (status := run_once.main([*names, *shape], parser.prog))), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
