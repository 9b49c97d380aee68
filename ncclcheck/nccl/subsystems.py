"""Where in NCCL a WARN no row of the failure table knows was printed, and what that place tells: NCCL's header names
the source file ("host:pid:tid [dev] graph/xml.h:85 NCCL WARN ..."), and the file names the subsystem (NVIDIA/nccl's
src/ tree: bootstrap, misc/socket, transport/net_ib, the net plugins, misc/shmutils, transport/p2p, proxy, graph/,
transport/nvls, ras/, misc/cudawrap).

A row matches the message (the text after "NCCL WARN"), never the location: "misc/shmutils.cc:93 NCCL WARN Call to open
failed : No such file or directory" is not "/dev/shm is full" because "shm" is in the file name. Here the location is
read as evidence instead: a place whose every WARN is one fault (graph/xml: the topology XML NCCL was given cannot be
read; transport/nvls: NVLink SHARP's set-up) names it as a cause; a place whose message says which of its faults it is
(shmutils' open of a segment that is not there) names that; any other place gives its subsystem's suspects. Pure data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .failclass import GENERIC, FailureClass, cause, consequence, rx

# NCCL's header before "NCCL WARN": "... [dev] file.cc:line NCCL WARN" (debug.cc's "%s:%d NCCL WARN"), or the
# location alone where a paste dropped the header; older ones wrote "file.cu:line WARN", which failures.as_nccl_warn
# reads as the newer form first
LOCATION = re.compile(r"(?:(?<=\] )|^\s{0,8})([\w./+-]{1,200}\.(?:cc|cu|cpp|c|h|hpp|cuh)):(\d{1,6}) (?=NCCL WARN )")

_SEEN = "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH and read the lines before the WARN"


@dataclass(frozen=True)
class Place:
    files: re.Pattern  # the source files of the subsystem (matched on the location's path)
    cls: object  # what a WARN printed there means when its message names nothing more specific (a FailureClass,
    # or the id of a row of the table)
    by_message: tuple = ()  # ((message regex, class id), ...): the place's own faults its messages tell apart
    owns: bool = False  # every WARN printed there is its class, whatever a row reads in the message (a CUDA call
    # that failed in NVLS's set-up is NVLS's failure)


def _warned(id: str, where: str, what: str, fix: str) -> FailureClass:
    """A WARN of a subsystem whose messages name no one fault: a consequence, with that subsystem's suspects
    (nccl/hypotheses.py BY_EVIDENCE[id])."""
    return consequence(id, rx(r"$^"), f"NCCL warned in its {where} code ({what}), in words ncclcheck does not know",
                       fix, level=GENERIC)  # as generic as any WARN no row knows: a wrap's first part may be one


TOPOLOGY_XML = cause("topology_xml", rx(r"$^"),
                     "NCCL could not read the topology XML it was given (NCCL_TOPO_FILE, or one a network plugin or "
                     "the machine image supplies): the file is malformed, or written for another NCCL or machine",
                     "unset NCCL_TOPO_FILE (or fix the file it names: `NCCL_TOPO_DUMP_FILE=/tmp/topo.xml` writes the "
                     "topology NCCL detects, a valid example); a plugin's or image's topology file must match this "
                     "machine type and NCCL version", source="src/graph/xml.cc, src/graph/xml.h")

PLACES = (
    # xml.h is the XML parser alone; xml.cc also reads sysfs (a GPU's PCI path, a row of its own): by its message
    Place(re.compile(r"(?:^|/)graph/xml\.h$"), TOPOLOGY_XML, owns=True),
    Place(re.compile(r"(?:^|/)transport/nvls\.cc$"), "nvls", owns=True),  # every WARN of NVLS's set-up: the nvls row
    Place(re.compile(r"(?:^|/)misc/shmutils\.cc$|(?:^|/)transport/shm\.cc$"),
          _warned("nccl_warn_shm", "shared-memory", "misc/shmutils.cc, transport/shm.cc: the segments ranks of one "
                  "node share under /dev/shm", "check /dev/shm in the job's environment (`df -h /dev/shm`, the "
                  "container's --shm-size or --ipc=host); NCCL_SHM_DISABLE=1 confirms; " + _SEEN),
          ((re.compile(r"No such file or directory|Permission denied", re.I), "shm_not_shared"),
           (re.compile(r"No space left|Cannot allocate memory|fallocate", re.I), "shm_exhausted"))),
    Place(re.compile(r"(?:^|/)graph/[\w.]{1,40}$"),
          _warned("nccl_warn_topology", "topology", "graph/: the GPUs, NICs and links it detected and the rings and "
                  "trees it searched over them", "compare `nvidia-smi topo -m` with what NCCL detected "
                  "(NCCL_TOPO_DUMP_FILE); NCCL_P2P_DISABLE=1 and an unset NCCL_TOPO_FILE tell P2P and a topology file "
                  "apart; " + _SEEN),
          ((re.compile(r"\bAttribute\b|\bXML\b|topology file", re.I), "topology_xml"),)),
    Place(re.compile(r"(?:^|/)(?:transport/net_ib|misc/ibvwrap|transport/net_ib/\w{1,40})\.cc$|/net_ib/"),
          _warned("nccl_warn_ib", "InfiniBand/RoCE", "transport/net_ib, misc/ibvwrap: the HCAs, their ports and "
                  "queue pairs", "check the HCAs on that host (`ibv_devinfo`, port state ACTIVE, `ncclcheck "
                  "health`); NCCL_IB_DISABLE=1 takes IB out to confirm; " + _SEEN)),
    Place(re.compile(r"(?:^|/)(?:misc/socket|bootstrap|transport/net_socket)\.cc$"),
          _warned("nccl_warn_socket", "socket and bootstrap", "misc/socket.cc, bootstrap.cc: the TCP connections "
                  "between ranks", "`ncclcheck preflight` probes every pair on every interface; pin "
                  "NCCL_SOCKET_IFNAME to the interface every node routes over; " + _SEEN)),
    Place(re.compile(r"(?:^|/)(?:plugin/net\w{0,20}|transport/net|net)\.cc$|(?:^|/)plugin/"),
          _warned("nccl_warn_net", "network plugin", "plugin/net, transport/net.cc: the network plugin and its "
                  "connections", "check which plugin NCCL loaded (NET/Plugin lines; NCCL_NET_PLUGIN) and that it "
                  "matches this NCCL; unset NCCL_NET to let NCCL choose; " + _SEEN)),
    Place(re.compile(r"(?:^|/)transport/p2p\.cc$"),
          _warned("nccl_warn_p2p", "GPU peer-to-peer", "transport/p2p.cc: CUDA IPC between the GPUs of a node",
                  "rerun with NCCL_P2P_DISABLE=1: if it runs, disable ACS on the PCIe switches and put the IOMMU in "
                  "passthrough; " + _SEEN)),
    Place(re.compile(r"(?:^|/)misc/(?:cudawrap|nvmlwrap)\.cc$|(?:^|/)include/alloc\.h$"),
          _warned("nccl_warn_cuda", "CUDA and driver", "misc/cudawrap, misc/nvmlwrap, include/alloc.h: its CUDA and "
                  "NVML calls", "`nvidia-smi` and `dmesg -T | grep -i xid` on that host; check the driver matches the "
                  "CUDA the job was built with; " + _SEEN)),
    Place(re.compile(r"(?:^|/)ras/[\w.]{1,40}$"),
          _warned("nccl_warn_ras", "RAS", "ras/: NCCL's reliability service, which watches the other ranks",
                  "read the ranks RAS names (`ncclras` while the job runs); RAS warns of peers that died or stopped "
                  "answering: their own output says why")),
)
PLACED = tuple(p.cls for p in PLACES if isinstance(p.cls, FailureClass))


def place(line: str, by_id: dict, owned: bool = False) -> Optional[FailureClass]:
    """The class a WARN's location gives it (a cause, or its subsystem's consequence), or None when NCCL's header
    names no file this table knows. owned: only a place that owns every WARN of its file."""
    m = LOCATION.search(line) if " NCCL WARN " in line else None
    if m is None:
        return None
    path = m.group(1)
    msg = line[m.end():]
    for p in PLACES:
        if p.files.search(path):
            if owned and not p.owns:
                return None
            for rx_, cid in p.by_message:
                if rx_.search(msg):
                    return by_id[cid]
            return by_id[p.cls] if isinstance(p.cls, str) else p.cls
    return None


def without_location(line: str) -> str:
    """The line with the source file and line before "NCCL WARN" taken out: a row reads the message, never where it
    was printed."""
    return LOCATION.sub("", line, count=1) if " NCCL WARN " in line else line
