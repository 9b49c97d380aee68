"""Node-to-node bandwidth in disjoint-pair rounds: schedule (which pairs when), job (measure), analyze (name the slow
node or link). See DESIGN.md, `ncclcheck links`."""
