#!/usr/bin/env python3
"""What an armed rank's responder costs its training loop, idle and under a flood (ncclcheck_lab/responder_cost.py)."""

from _entry import run

if __name__ == "__main__":
    run("responder_cost")
