"""Make the fixtures beside this script from a real Slurm (as root): a 2-host lab, slurmctld + 2 slurmd, h2 drained
by an admin, then `scontrol show node h2` (one node) and `scontrol show node` (all) saved as text.

    sudo python3 -m tests.data.slurm.capture_show_node      # from the checkout's root
"""

from __future__ import annotations

from pathlib import Path

from ncclcheck_lab.netlab import launchers as nlx
from ncclcheck_lab.netlab.harness import Lab

HERE = Path(__file__).resolve().parent


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
