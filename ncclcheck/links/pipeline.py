"""`ncclcheck links` as one pipeline, in the order it runs: the saved baseline, the world, the pair rounds on every
rank, the slow link/node analysis, NCCL's capture, the comparison with the baseline, then the Report, built once."""

from __future__ import annotations

from ..config import Config, LinksConfig
from ..errors import WorldError
from ..model import Report
from ..steps import world as w


def run(config: Config, observer=None, placement=None) -> Report:
    """Node-to-node bandwidth in disjoint-pair rounds; names the slow node or link."""
    from .job import links_job, payload_from_config
    from .outcome import from_outcome

    clock = w.Clock()
    base = None
    if config.baseline and config.baseline.path:
        from .baseline import load_links_baseline

        base = load_links_baseline(config.baseline.path)
    budget = w.budget(config)
    placement = w.placement(config, placement)
    try:
        world, placement = w.job_world(config, placement, budget, observer)
    except WorldError as exc:
        return w.world_failure_report(config, "links", clock, str(exc), placement)
    payload = payload_from_config(config.links or LinksConfig())
    # Between two emitted pair rows: one round (pair setup, warm-up, timed transfers both ways, the report).
    out = w.run_world_job(world, placement, links_job, payload, budget, observer, step_ops=5)
    section, checks, partial = from_outcome(out, payload, ranks_per_node=w.local_ranks(world, placement))
    extra: dict = {}
    if config.nccl_diag and config.nccl_diag.capture:
        from ..steps.nccl_capture import nccl_capture

        more, extra = nccl_capture(config, world, placement, out.backend, budget)
        checks.extend(more)
    if base is not None:
        from .baseline import compare_links

        checks.append(compare_links(section, w.this_node(placement), base, config.baseline.tolerance,
                                    config.baseline.path))
    hosts = section.get("hosts") if isinstance(section, dict) and section.get("unit", "node") == "node" else None
    report = w.job_report("links", config, clock, world, placement, out, hosts, checks=checks, links=section,
                          partial=partial, extra=extra)
    w.save_baseline(config.baseline.save if config.baseline else None, report)
    return report
