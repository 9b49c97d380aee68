#!/usr/bin/env python3
"""Every example in README.md run literally, as a new user pastes it (the code: ncclcheck_lab/readme_examples.py)."""

from _entry import run

if __name__ == "__main__":
    run("readme_examples")
