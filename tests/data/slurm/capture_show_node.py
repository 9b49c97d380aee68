"""Make the fixtures beside this script from a real Slurm (as root): a 2-host lab, slurmctld + 2 slurmd, h2 drained
by an admin, then `scontrol show node h2` (one node) and `scontrol show node` (all) saved as text.

    sudo python3 tests/data/slurm/capture_show_node.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

import netlab_launchers as nlx  # noqa: E402

from tests.lab.harness import Lab  # noqa: E402


def main() -> None:
    lab = Lab(2)
    try:
        env = nlx.slurm_up(lab.state)
        reason = "admin: bad DIMM, ticket 4711"
        got = lab.exec("h1", ["scontrol", "update", "NodeName=h2", "State=DRAIN", f"Reason={reason}"], env=env)
        assert got.returncode == 0, got.stderr
        one = lab.exec("h1", ["scontrol", "show", "node", "h2"], env=env).stdout
        every = lab.exec("h1", ["scontrol", "show", "node"], env=env).stdout
        (HERE / "show_node_drained.txt").write_text(one)
        (HERE / "show_node_all.txt").write_text(every)
        print(one)
    finally:
        lab.down()


if __name__ == "__main__":
    main()
