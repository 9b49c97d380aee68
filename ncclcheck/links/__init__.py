"""Node-to-node bandwidth in disjoint-pair rounds: schedule (which pairs when), job (measure), analyze (name the slow
node or link); pipeline (the command's steps in order). The command: docs/contracts.md, `links`."""
