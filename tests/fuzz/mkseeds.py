#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Write the seed corpus of fuzz_copa (tests/fuzz/corpus/).

Each seed is a connection in the input format that fuzz_copa.c's top
comment describes: a header of tunables, then events. They start the
fuzzer in the states that take many events to reach: slow start's exit on
a queue, a policer hold, competitive mode, idle restarts, undo and ECN,
the clock's u32 wrap, extreme windows and callbacks before init.

    tests/fuzz/mkseeds.py [DIR]     (default: corpus/ next to this file)
"""
import os
import struct
import sys

EV_INIT, EV_ACK, EV_ACK_EVENT, EV_SSTHRESH, EV_UNDO, EV_LOSS, \
    EV_TX_START, EV_PACE, EV_SOCKET = range(9)
(F_CLOCK, F_CWND, F_CLAMP, F_MSS, F_SRTT, F_RTT, F_RS_DELIVERED, F_ACKED,
 F_LOSSES, F_DELIVERED, F_LOST, F_PRIOR, F_FLAGS) = range(13)


def header(delta=500, competitive=True, loss_reaction=5, policer=False,
           detect=True, limit_loss=1, rate_tol=12, hold_rounds=48):
    flags = competitive | policer << 1 | detect << 2
    return struct.pack('<HBBBBB', delta - 1, flags, loss_reaction,
                       limit_loss - 1, rate_tol - 1, hold_rounds - 1)


# value selectors (pick() in fuzz_copa.c)
def small(k):
    return bytes([k << 3 | 1])


def u32(v):
    return bytes([3]) + struct.pack('<I', v & 0xffffffff)


def inc(k):
    return bytes([(k - 1) << 3 | 4])


def dec(k):
    return bytes([(k - 1) << 3 | 5])


# clock selectors (pick_clock())
def step(us):
    return bytes([0]) + struct.pack('<H', us)


def jump(us):
    return bytes([2]) + struct.pack('<I', us)


def back(us):
    return bytes([3]) + struct.pack('<H', us)


WRAP32 = bytes([4])             # + 2^32 us: the same low 32 bits


def near_wrap(k):               # k us before the low 32 bits wrap
    return bytes([k << 3 | 5])


def ack(**fields):
    """An ACK; fields by name (clock, cwnd, ..., flags) give selectors."""
    mask, sel = 0, b''
    order = ['clock', 'cwnd', 'clamp', 'mss', 'srtt', 'rtt', 'rs_delivered',
             'acked', 'losses', 'delivered', 'lost', 'prior', 'flags']
    for bit, name in enumerate(order):
        if name in fields:
            mask |= 1 << bit
            v = fields[name]
            sel += v if name != 'flags' else bytes([v])
    return bytes([EV_ACK]) + struct.pack('<H', mask) + sel


def socket(cwnd=None, clamp=None, mss=None, srtt=None):
    mask, sel = 0, b''
    for bit, v in enumerate([cwnd, clamp, mss, srtt]):
        if v is not None:
            mask |= 1 << bit
            sel += v
    return bytes([EV_SOCKET, mask]) + sel


def tx_start(idle_ms, rate_delivered, rate_interval):
    return bytes([EV_TX_START, 1]) + struct.pack('<I', idle_ms) + \
        u32(rate_delivered) + u32(rate_interval)


INIT = bytes([EV_INIT])
PACE = bytes([EV_PACE])
SSTHRESH = bytes([EV_SSTHRESH])
UNDO = bytes([EV_UNDO])
LOSS = bytes([EV_LOSS])
ECE = bytes([EV_ACK_EVENT, 1])
NO_ECE = bytes([EV_ACK_EVENT, 0])
CWND_LIMITED = 2
APP_LIMITED = 1


def start(srtt=40000, rtt=40001):
    """init, then a first ACK that sets srtt and the RTT sample."""
    return INIT + ack(clock=step(1000), srtt=u32(srtt), rtt=u32(rtt))


def slow_start_queue():
    """Slow start until the queue grows, its drain, the default mode."""
    s = header() + start()
    s += b''.join(ack() for _ in range(20))
    s += b''.join(ack(rtt=inc(32)) for _ in range(60))
    s += b''.join(ack(rtt=dec(16)) for _ in range(100))
    s += b''.join(ack(rtt=inc(4)) for _ in range(40))
    return s


def before_init():
    """Every callback before init, then init and ACKs."""
    s = header() + ECE + SSTHRESH + UNDO + ack() + LOSS
    s += tx_start(1000, 10, 40000) + PACE + socket(cwnd=small(0)) + ack()
    s += UNDO + ack() + ack() + start()
    return s + b''.join(ack() for _ in range(10))


def policer():
    """Rounds that lose at a flat rate with no queue: a hold, its end."""
    s = header(policer=True, limit_loss=1, rate_tol=12, hold_rounds=4)
    s += start() + b''.join(ack() for _ in range(30))
    for i in range(60):
        s += ack(losses=small(1 if i % 3 == 0 else 0), rtt=u32(40001))
    return s


def competitive():
    """A queue that never empties: competitive mode, then it drains."""
    s = header(competitive=True) + start(srtt=60000, rtt=20001)
    s += b''.join(ack(rtt=inc(30)) for _ in range(100))
    s += ack(losses=small(2)) + ECE + ack() + NO_ECE
    s += b''.join(ack(rtt=dec(31)) for _ in range(60))
    return s


def long_queue():
    """A standing queue for 300 rounds: quiet_rounds saturates."""
    s = header(competitive=True) + start(srtt=60000, rtt=20001)
    s += b''.join(ack() for _ in range(5)) + ack(rtt=u32(60001))
    return s + b''.join(ack() for _ in range(300))


def idle():
    """Idle restarts with and without a rate sample."""
    s = header() + start() + b''.join(ack() for _ in range(20))
    s += tx_start(5000, 20, 400000) + PACE + ack(clock=jump(5000000))
    s += b''.join(ack() for _ in range(10))
    s += tx_start(0xffffffff, 0, 0) + ack() + tx_start(1, 1, 1) + ack()
    return s


def undo_ecn():
    """ECN echoes, recovery, undo, a timeout's restart."""
    s = header(loss_reaction=50) + start()
    s += b''.join(ack(rtt=inc(5)) for _ in range(20))
    for _ in range(4):
        s += ECE + ack() + SSTHRESH + ack(losses=small(3)) + NO_ECE
        s += ack(losses=small(0)) + UNDO + ack()
    s += SSTHRESH + LOSS + socket(cwnd=small(1)) + ack() + ack()
    return s


def clock_wrap():
    """The clock's low 32 bits wrapping, going back, jumping."""
    s = header() + start() + ack(clock=near_wrap(3))
    s += b''.join(ack() for _ in range(10))
    s += ack(clock=back(5000)) + ack(clock=WRAP32) + ack(clock=jump(1 << 31))
    s += ack(clock=step(0)) + ack() + ack(clock=step(60000)) + ack()
    return s


def extremes():
    """Windows, mss and times at the edges of their types."""
    s = header(delta=1) + start()
    s += socket(cwnd=u32(1 << 24), mss=u32(65483), srtt=u32(1 << 28)) + PACE
    s += ack(rtt=u32((1 << 30) + 1)) + ack(cwnd=u32(0x7fffffff)) + PACE
    s += ack(cwnd=u32(0xffffffff), clamp=u32(0)) + ack(cwnd=small(0))
    s += ack(mss=small(0), rtt=u32(0xffffffff), acked=u32(0x7fffffff),
             losses=u32(0xffffffff), rs_delivered=u32(0xffffffff))
    s += ack(delivered=u32(0), lost=u32(0xffffffff), prior=u32(0x80000000),
             flags=APP_LIMITED)
    s += SSTHRESH + UNDO + tx_start(0xffffffff, 0xffffffff, 1) + PACE
    return s


SEEDS = [slow_start_queue, before_init, policer, competitive, long_queue,
         idle, undo_ecn, clock_wrap, extremes]

# Inputs that failed on the header before 7e65c75 (issue 32), kept as
# seeds: the fuzzer found them (minimised with -minimize_crash=1) or they
# were written from its findings. fuzz_copa.c's input format at that time.
REGRESSIONS = {
    # an ACK without a sample handed cwnd 0 back unchanged
    'regress-cwnd-passthrough': bytes.fromhex('7ef2bbbb46bb55000a77'),
    # max(cwnd, 1U) << COPA_SHIFT in 32 bits: cwnd 2^31 shifted out
    'regress-own-queue-shift': bytes.fromhex(
        'ffffffffffffff09fdfaffffff200009'),
    # ... and a zero divisor at cwnd 2^24 (copa_own_queue_us)
    'regress-own-queue-div0': header() + INIT +
    ack(cwnd=u32(1 << 24), rtt=u32(40001)),
    # cwnd 0 into copa_move_cwnd: per_pkt 0
    'regress-move-cwnd-div0': header() + INIT +
    ack(rtt=u32(40001), losses=small(1)) + ack(cwnd=small(0),
                                              losses=small(0)),
    # COPA_DRAIN_DEN * RTTstanding in 32 bits: 0 at 2^30 us
    'regress-round-step-div0': header() + INIT + ack(rtt=u32(40001)) +
    ack(rtt=u32(1 << 30)),
    # ... and (s64)acked * step past S64_MAX once it wrapped
    'regress-round-step-s64': bytes.fromhex(
        '00000000000000000120007f07012000030100004001827f07ff7f07'),
    # pct * cwnd * mss * 10^4 past 2^64: on an ACK, between ACKs
    'regress-pacing-ack': header() + INIT +
    ack(cwnd=u32(0x7fffffff), mss=u32(65483), acked=small(0)),
    'regress-pacing-window': header() +
    socket(cwnd=u32(1 << 31), mss=u32(1 << 31), srtt=small(10)) + INIT,
    # a hold at rate 0 (mss 0): ++limit_rounds wrapped the u8 from 255
    'regress-hold-rate-0': bytes.fromhex(
        'f30126050500fe0001490149494949494900000a49000149014949'),
    # undo before init made the zeroed state live; 1/delta went to 0
    'regress-undo-before-init': header() + UNDO +
    ack(srtt=u32(40000), rtt=u32(40001)) + ack() + ack(),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, 'corpus')
    os.makedirs(out, exist_ok=True)
    seeds = {seed.__name__: seed() for seed in SEEDS}
    seeds.update(REGRESSIONS)
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
