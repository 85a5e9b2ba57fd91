# SPDX-License-Identifier: GPL-2.0
"""run(): one experiment from start to end. It builds the Topology,
starts the traffic, keeps the run's clock (flows start, events fire, the
Recorder samples) and always tears everything down."""

import math
import shutil
import tempfile
import time

from .. import metrics
from .config import flow_duration, is_number, require
from .results import result
from .sampling import Recorder, cpu_times
from .topology import Topology, cleanup_stale
from .traffic import FLOW_GRACE_S, Traffic


def run(link, flows, duration_s, events=None, sample_ms=100,
        measure_from_s=0):
    """Run ``flows`` over ``link`` for ``duration_s`` seconds (see the
    docstring of copa_tools.eval.lab).

    Returns a Result. Always removes the namespaces and processes it made.
    """
    require(is_number(duration_s) and duration_s > 0, "duration_s",
            f"must be > 0, got {duration_s!r}")
    require(isinstance(sample_ms, int) and 10 <= sample_ms <= 10000,
            "sample_ms", f"must be an integer in 10..10000, got "
            f"{sample_ms!r}")
    require(is_number(measure_from_s) and 0 <= measure_from_s <
            duration_s, "measure_from_s", f"must be >= 0 and below "
            f"duration_s = {duration_s}, got {measure_from_s!r}")
    require(len(flows) >= 1, "flows", "at least one flow")
    durations = [flow_duration(f, duration_s) for f in flows]
    events = sorted(events or [], key=lambda e: e[0])
    cleanup_stale()
    workdir = tempfile.mkdtemp(prefix="copalab-")
    try:
        with Topology(link, flows) as topo:
            traffic = Traffic(topo, workdir)
            recorder = Recorder(topo)
            try:
                traffic.start_servers()
                cpu, lag = _drive(topo, traffic, recorder, durations,
                                  duration_s, events, sample_ms / 1000.0)
                layout = topo.layout()
            finally:
                traffic.stop(FLOW_GRACE_S)
                recorder.close()
            iperf = [traffic.summary(i) for i in range(len(flows))]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result(link, flows, durations, duration_s, sample_ms, recorder,
                  iperf, (cpu, lag), layout, events, measure_from_s)


def _drive(topo, traffic, recorder, durations, duration_s, events, step):
    """The run's clock: start flows, fire events, sample until the run's
    end and until every iperf3 client has finished (each flow's window
    starts when its connection does, a little after its start time).

    Returns (cpu_busy, p95 lateness of the sampling ticks in ms): a busy
    or starved machine shows up in both, and its figures are suspect.
    """
    flows = topo.flows
    pending = sorted(range(len(flows)), key=lambda i: flows[i].start_s)
    events = list(events)
    cpu0 = cpu_times()
    t0 = time.monotonic()
    tick = 0
    lags = []
    while True:
        t = time.monotonic() - t0
        while pending and flows[pending[0]].start_s <= t:
            i = pending.pop(0)
            traffic.start_client(i, int(math.ceil(durations[i])))
        while events and events[0][0] <= t:
            events.pop(0)[1](topo)
        running = traffic.running()
        recorder.sample(t, running)
        if t >= duration_s and (not running or
                                t >= duration_s + FLOW_GRACE_S):
            break
        tick += 1
        time.sleep(max(0.0, t0 + tick * step - time.monotonic()))
        lags.append((time.monotonic() - t0 - tick * step) * 1000)
    cpu1 = cpu_times()
    total = cpu1[0] - cpu0[0]
    busy = 1 - (cpu1[1] - cpu0[1]) / total if total else None
    return busy, metrics.percentile(lags, 95)
