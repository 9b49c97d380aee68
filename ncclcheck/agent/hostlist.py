"""The Slurm compressed host list grammar (`gpu[01-04,07]`, `a[1-2],b3`, `n[001-003]-ib`, `r[1-2]-n[01-02]`),
expanded in order as Slurm does: the master of an srun job is the first host of SLURM_JOB_NODELIST."""

from __future__ import annotations

from ..hostranges import expand


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm host list ('gpu[01-04,07],cpu1') into host names, in order. Raises ValueError when malformed.
    python-hostlist does the grammar (ncclcheck.hostranges), so the report collects with the same rules."""
    return expand(text)
