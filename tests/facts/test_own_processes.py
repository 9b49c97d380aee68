"""Whose GPU memory is the job's own (gpu.processes judges the rest): real sibling processes, real /proc. On a lent
H100, `health --prolog` started from one shell beside a torch process holding 4 GiB passed "no compute process": the
holder was the health process's sibling, and every sibling counted as one of the job's local ranks. A sibling is the
job's own only when it runs the same command line or carries the same job id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

DRIVER = textwrap.dedent("""
    import json, os, subprocess, sys
    SIB = "import os, sys, time; from ncclcheck.facts import gpuhealth\\n" \\
          "if os.environ.get('WHO') == 'report':\\n" \\
          "    print(json.dumps(sorted(gpuhealth._own_family())))\\n" \\
          "else:\\n" \\
          "    time.sleep(30)"
    SIB = "import json\\n" + SIB
    def env(**kw):
        e = {k: v for k, v in os.environ.items() if k not in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_JOBID",
             "NCCLCHECK_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE")}
        e.update(kw)
        return e
    run_id = {"TORCHELASTIC_RUN_ID": "job-7"}
    holders = {
        "same_cmdline": subprocess.Popen([sys.executable, "-c", SIB], env=env(WHO="sleep")),
        "same_job_id": subprocess.Popen([sys.executable, "-c", SIB + "\\n# another program"],
                                        env=env(WHO="x", **run_id)),
        "other_job_id": subprocess.Popen([sys.executable, "-c", SIB + "\\n# a third"],
                                         env=env(WHO="x", TORCHELASTIC_RUN_ID="job-8")),
        "stranger": subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env()),
    }
    try:
        out = subprocess.run([sys.executable, "-c", SIB], env=env(WHO="report", **run_id), capture_output=True,
                             text=True, timeout=60)
        fam = json.loads(out.stdout or "null") if out.returncode == 0 else out.stderr
        print(json.dumps({"family": fam, "pids": {k: p.pid for k, p in holders.items()}}))
    finally:
        for p in holders.values():
            p.kill()
            p.wait()
""")


def test_a_sibling_is_the_jobs_own_only_by_its_command_line_or_its_job_id():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)}
    env.pop("NCCLCHECK_PROCFS_ROOT", None)
    out = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    fam, pids = set(got["family"]), got["pids"]
    assert pids["same_cmdline"] in fam, got
    assert pids["same_job_id"] in fam, got
    assert pids["other_job_id"] not in fam, got
    assert pids["stranger"] not in fam, got
