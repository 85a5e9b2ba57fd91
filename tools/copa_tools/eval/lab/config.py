# SPDX-License-Identifier: GPL-2.0
"""What an experiment is: the Link and its Flows, checked as they are
made (a bad value raises LinkError naming the field), and the arithmetic
of frames, BDPs and FIFO sizes. No system calls here."""

import math
from dataclasses import asdict, dataclass

FRAME_BYTES = 1514          # MTU 1500 + Ethernet header, as tbf counts it
SELECTS = ("setsockopt", "sysctl", "route")


class LabError(RuntimeError):
    """The lab could not build or run an experiment."""


class LinkError(ValueError):
    """A Link or Flow parameter is invalid; ``field`` names it."""

    def __init__(self, field_name, message):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def require(cond, field_name, message):
    if not cond:
        raise LinkError(field_name, message)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


@dataclass
class Link:
    """An emulated path; see the docstring of copa_tools.eval.lab."""
    rate_mbit: float
    rtt_ms: float
    buffer_bdp: float = 1.0
    buffer_pkts: int = None
    loss_pct: float = 0.0
    policer_mbit: float = None
    policer_burst: int = 20000
    offloads: bool = False
    up_rate_mbit: float = None

    def __post_init__(self):
        require(is_number(self.rate_mbit) and self.rate_mbit > 0,
                "rate_mbit", f"must be a number > 0, got {self.rate_mbit!r}")
        require(is_number(self.rtt_ms) and self.rtt_ms >= 0,
                "rtt_ms", f"must be a number >= 0, got {self.rtt_ms!r}")
        require(is_number(self.buffer_bdp) and self.buffer_bdp > 0,
                "buffer_bdp", f"must be > 0, got {self.buffer_bdp!r}")
        require(self.buffer_pkts is None or (
            isinstance(self.buffer_pkts, int) and self.buffer_pkts >= 1),
            "buffer_pkts", f"must be an integer >= 1, got "
            f"{self.buffer_pkts!r}")
        require(is_number(self.loss_pct) and 0 <= self.loss_pct < 100,
                "loss_pct", f"must be within [0, 100), got {self.loss_pct!r}")
        require(self.policer_mbit is None or (
            is_number(self.policer_mbit) and self.policer_mbit > 0),
            "policer_mbit", f"must be > 0, got {self.policer_mbit!r}")
        require(isinstance(self.policer_burst, int)
                and self.policer_burst >= FRAME_BYTES, "policer_burst",
                f"must be an integer >= {FRAME_BYTES} bytes, got "
                f"{self.policer_burst!r}")
        require(isinstance(self.offloads, bool), "offloads",
                f"must be true or false, got {self.offloads!r}")
        require(self.up_rate_mbit is None or (
            is_number(self.up_rate_mbit) and self.up_rate_mbit > 0),
            "up_rate_mbit", f"must be > 0, got {self.up_rate_mbit!r}")

    @property
    def capacity_mbit(self):
        """The configured capacity: the bottleneck rate or, if lower, the
        policer's rate. Utilisation figures are relative to it."""
        return min(self.rate_mbit, self.policer_mbit or self.rate_mbit)

    @property
    def bdp_bytes(self):
        """Bandwidth-delay product of the data direction, in bytes."""
        return bdp_bytes(self.rate_mbit, self.rtt_ms)

    @property
    def buffer_bytes(self):
        """Size of the bottleneck byte FIFO."""
        if self.buffer_pkts is not None:
            return self.buffer_pkts * FRAME_BYTES
        return fifo_bytes(self.buffer_bdp, self.rate_mbit, self.rtt_ms)

    def to_dict(self):
        d = asdict(self)
        d.update(capacity_mbit=self.capacity_mbit, bdp_bytes=self.bdp_bytes,
                 buffer_bytes=self.buffer_bytes)
        return d


def bdp_bytes(rate_mbit, rtt_ms):
    """Bandwidth-delay product in bytes."""
    return rate_mbit * 1e6 / 8 * rtt_ms / 1e3


def fifo_bytes(bdp_multiple, rate_mbit, rtt_ms):
    """A FIFO of ``bdp_multiple`` BDPs, at least two full frames."""
    return max(int(round(bdp_multiple * bdp_bytes(rate_mbit, rtt_ms))),
               2 * FRAME_BYTES)


@dataclass
class Flow:
    """One TCP flow; see the docstring of copa_tools.eval.lab."""
    cc: str
    start_s: float = 0
    duration_s: float = None
    extra_rtt_ms: float = 0
    sysctls: dict = None
    select: str = "setsockopt"

    def __post_init__(self):
        require(isinstance(self.cc, str) and self.cc.replace("_", "")
                .isalnum(), "cc", f"not an algorithm name: {self.cc!r}")
        require(is_number(self.start_s) and self.start_s >= 0, "start_s",
                f"must be >= 0, got {self.start_s!r}")
        require(self.duration_s is None or (
            is_number(self.duration_s) and self.duration_s > 0),
            "duration_s", f"must be > 0, got {self.duration_s!r}")
        require(is_number(self.extra_rtt_ms) and self.extra_rtt_ms >= 0,
                "extra_rtt_ms", f"must be >= 0, got {self.extra_rtt_ms!r}")
        require(self.select in SELECTS, "select",
                f"must be one of {', '.join(SELECTS)}, got {self.select!r}")
        self.sysctls = dict(self.sysctls or {})
        for name in self.sysctls:
            require(isinstance(name, str) and name.startswith("net."),
                    "sysctls", f"only net.* sysctls are per namespace: "
                    f"{name!r}")


def flow_duration(flow, duration_s):
    """The flow's own duration: its duration_s or the rest of the run."""
    seconds = flow.duration_s if flow.duration_s is not None \
        else duration_s - flow.start_s
    if seconds <= 0:
        raise LinkError("start_s", f"flow starts at {flow.start_s} s, after "
                        f"the run's end ({duration_s} s)")
    return seconds
