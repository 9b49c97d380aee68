"""The environment variables a recommendation may set, and the one way a variable is written: shared by the rules
that recommend (nccl/rules.py) and the renderers that write shell (render/envfile.py, console), so that neither
imports the other."""

from __future__ import annotations

import re

# Which environment variables a recommendation may carry: the variable families of the communication stack (NCCL,
# Gloo, torch, ncclcheck itself, UCX, libfabric) and, by exact name, anything else ncclcheck recommends (none today:
# every rule in recommend/ sets an NCCL_ or GLOO_ variable). A recommendation is sourced into shells; a name outside
# this list (BASH_ENV, LD_PRELOAD, PATH, PROMPT_COMMAND...) runs code in every shell or program started after it.
ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "NCCLCHECK_", "UCX_", "FI_")
ENV_EXACT: tuple = ()
# Inside those families, the names that load a shared library or a module from a path: setting one is running
# code, so no recommendation may carry it whatever its prefix.
ENV_LOADS_CODE = ("NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN",
                  "FI_PROVIDER_PATH", "UCX_MODULE_DIR", "TORCH_EXTENSIONS_DIR")
ENV_NAME_RX = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# The variables a launcher gives every process of one job, alike: its id (the store's key prefix, %j in output
# paths) and the mark that tells one job's processes on a node from another's (whose GPU memory is the job's own).
JOB_ID_VARS = ("NCCLCHECK_RUN_ID", "SLURM_JOB_ID", "SLURM_JOBID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid",
               "PMIX_NAMESPACE")


def env_name_allowed(name: object) -> bool:
    """May a recommendation set this variable? The one test every renderer that writes shell (env file, labels
    script) applies, and that the store side applies when it reads recommendations from the network."""
    return (isinstance(name, str) and len(name) <= 128 and bool(ENV_NAME_RX.match(name))
            and (name.startswith(ENV_PREFIXES) or name in ENV_EXACT) and name not in ENV_LOADS_CODE)


def assignment(name: str, value: object) -> str:
    """`NAME=value` as a shell reads it and a person copies it: the one way every report, fix and export line writes
    a variable. A value in NCCL's exact form gets quotes (NCCL_SOCKET_IFNAME='=eth0'): written bare it read as the
    typo `NCCL_SOCKET_IFNAME==eth0`, which people 'fixed' to the prefix form or pasted into files that are not a
    shell. Values are quoted the shell's way (shlex), so nothing in one runs."""
    import shlex

    text = str(value)
    quoted = shlex.quote(text)
    if quoted == text and text[:1] in ("=", "^"):
        quoted = f"'{text}'"
    return f"{name}={quoted}"
