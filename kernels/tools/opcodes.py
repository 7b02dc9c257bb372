"""SASS opcodes summed into named groups: one naming for instructions in the code (`runner.py inspect`) and
instructions executed (`runner.py profile`)."""

from __future__ import annotations

from collections.abc import Mapping

# Integer arithmetic: what address and index computations compile to.
INTEGER_ALU = ("IMAD", "IADD3", "VIADD", "LEA", "LOP3", "SHF")


def mnemonic(opcode: str) -> str:
    """The name an opcode counts under: its first part, plus the one modifier that changes what it does.

    LDSM.16.MT88.4 -> "LDSM.MT88" (the transposing load), MUFU.EX2 -> "MUFU.EX2" (which function),
    HMMA.16816.F32.BF16 -> "HMMA", LDGSTS.E.BYPASS.128 -> "LDGSTS".
    """
    name, *modifiers = opcode.split(".")
    if name == "LDSM" and "MT88" in modifiers:
        return "LDSM.MT88"
    if name == "MUFU" and modifiers:
        return f"MUFU.{modifiers[0]}"
    return name


def group_counts(counts: Mapping[str, float], groups: Mapping[str, tuple[str, ...]]) -> dict[str, float]:
    """Counts per full opcode summed into ``groups`` (group name -> the mnemonics it takes); others left out."""
    group_of = {name: group for group, names in groups.items() for name in names}
    sums = dict.fromkeys(groups, 0)
    for opcode, n in counts.items():
        if (group := group_of.get(mnemonic(opcode))) is not None:
            sums[group] += n
    return sums
