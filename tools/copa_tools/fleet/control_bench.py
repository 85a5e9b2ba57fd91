# SPDX-License-Identifier: GPL-2.0
"""Time copa-fleet control's round on a synthetic day of records (issue
35's scale figure; a benchmark, not a test):

    python3 -m copa_tools.fleet.control_bench [--prefixes 10000]
        [--rows-per-hour 500000] [--dir DIR] [--hours 3] [--rounds 3]

It writes, once, a day of records in the collector's layout under
DIR/records: one file per hour, the file's mtime at the hour's end, as
the collector's hourly rotation leaves them; each prefix a path of its
own (a fifth bloated, a tenth policed, a tenth lossy, the rest clean),
connections of 50 KB to 5 MB sampled every 10 s. Then it runs rounds as
the daemon does (chDB over the files of the lookback, the rules and
validation for every prefix; the backend a dict) and prints the time of
each part. ``--hours 24`` reads the whole day.
"""

import argparse
import os
import random
import resource
import time

from . import control, queries, store

HOUR = 3600
# (share of prefixes, base RTT ms, queueing delay ms, Mbit/s, retrans)
PATHS = ((0.2, 40, 80, 2, 0.002), (0.1, 20, 1, 8, 0.08),
         (0.1, 40, 1, 5, 0.01), (0.6, 10, 3, 90, 0.001))
LINE = ('{{"time":{t},"host":"h","kind":"sample","cookie":{c},'
        '"local_addr":"10.0.0.1","local_port":443,"peer_addr":"{a}",'
        '"peer_port":40000,"peer_prefix":"{p}","cc":"cubic","ab_arm":"",'
        '"delivery_rate_bps":{r},"app_limited":{al},"min_rtt_us":{m},'
        '"srtt_us":{s},"bytes_acked":{b},"bytes_retrans":{br},'
        '"age_ms":{age}}}\n')


def prefixes(n):
    out, rng = [], random.Random(7)
    for i in range(n):
        u = rng.random()
        for share, *path in PATHS:
            if u < share:
                break
            u -= share
        out.append((f"10.{i >> 8 & 255}.{i & 255}.0/24"
                    if i < 65536 else f"11.{i >> 8 & 255}.{i & 255}.0/24",
                    path))
    return out


def write_day(directory, nprefixes, rows_per_hour, end):
    """A day of records ending at ``end``, one file per hour."""
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(1)
    paths = prefixes(nprefixes)
    cookie = 0
    per_prefix = max(rows_per_hour // nprefixes, 1)
    for h in range(24):
        start = end - (24 - h) * HOUR
        name = os.path.join(directory, f"h-{start}-1{store.JSONL}")
        with open(name, "w") as f:
            for prefix, (base, q, mbps, retr) in paths:
                addr = prefix.split("/")[0][:-1] + "9"
                left = per_prefix
                while left > 0:
                    cookie += 1
                    size = rng.choice((50_000, 512_000, 1_000_000,
                                       5_000_000))
                    samples = min(left, max(size * 8 // int(mbps * 1e6) //
                                            10, 1))
                    t0 = start + rng.randrange(HOUR - 10 * samples)
                    lines = []
                    for k in range(samples):
                        acked = size * (k + 1) // samples
                        lines.append(LINE.format(
                            t=t0 + 10 * k, c=cookie, a=addr, p=prefix,
                            r=int(mbps * 1e6 * rng.uniform(0.9, 1.1)),
                            al=int(k % 4 == 3), m=base * 1000,
                            s=int((base + q * rng.uniform(0.8, 1.2))
                                  * 1000),
                            b=acked, br=int(acked * retr), age=10_000 * k))
                    f.write("".join(lines))
                    left -= samples
        os.utime(name, (start + HOUR, start + HOUR))


class Dict(control.Backend):
    NAMES = control.BpfMap.NAMES
    name = "dict"

    def __init__(self):
        super().__init__(tuple(self.NAMES.values()))
        self.map = {}

    def capacity(self):
        return 4096

    def entries(self):
        return dict(self.map)

    def apply(self, prefix, policy):
        self.map[prefix] = policy


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefixes", type=int, default=10_000)
    p.add_argument("--rows-per-hour", type=int, default=500_000)
    p.add_argument("--dir", default="/tmp/copa-fleet-control-bench")
    p.add_argument("--hours", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    records = os.path.join(args.dir, "records")
    stamp = os.path.join(args.dir, "end")
    if not os.path.exists(stamp):
        end = int(time.time()) // HOUR * HOUR
        started = time.monotonic()
        write_day(records, args.prefixes, args.rows_per_hour, end)
        with open(stamp, "w") as f:
            f.write(f"{end}\n")
        print(f"wrote a day in {time.monotonic() - started:.0f} s")
    with open(stamp) as f:
        end = int(f.read())
    files = sorted(os.listdir(records))
    size = sum(os.path.getsize(os.path.join(records, f)) for f in files)
    lines = sum(1 for f in files for _ in open(os.path.join(records, f)))
    print(f"{args.dir}: {lines} records, {len(files)} files, "
          f"{size / 1e9:.2f} GB, {args.prefixes} prefixes")
    cfg = control.Config(hours=args.hours, max_age_s=2 * HOUR,
                         confirm_rounds=1)
    ns = argparse.Namespace(clickhouse=None, state_dir=args.dir)
    os.makedirs(os.path.join(args.dir, "scratch"), exist_ok=True)
    source = control.engine_source(ns, os.path.join(args.dir, "scratch"))
    for k in range(args.rounds):
        backend = Dict()
        ctl = control.Controller(os.path.join(args.dir, "state"), backend,
                                 cfg, source, "cubic", dry_run=True)
        os.makedirs(ctl.dir, exist_ok=True)
        now = end + k
        t0 = time.monotonic()
        cpu0 = time.process_time()
        engine, src = source(now - cfg.hours * HOUR)
        data, newest = control.measure(engine, src, now, cfg)
        t1 = time.monotonic()
        decisions, accepted, refused, skip = ctl.round(now)
        t2 = time.monotonic()
        print(f"round {k + 1}: measure {t1 - t0:.1f} s (chDB, "
              f"{len(data)} prefixes); a whole round {t2 - t1:.1f} s, "
              f"{len(decisions)} decisions, {len(accepted)} accepted, "
              f"{len(refused)} refused or deferred; process CPU "
              f"{time.process_time() - cpu0:.1f} s; skip {skip}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"max RSS {rss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
