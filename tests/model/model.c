// SPDX-License-Identifier: GPL-2.0
/*
 * User-space model test of Copa: the real algorithm (tcp_copa_algo.h, the
 * same file the kernel modules and the BPF build compile) driven by a
 * packet-level model of one bottleneck, the way tcp_copa.c drives it.
 *
 *   model [check] [CASE...]   run the test cases (default all), KTAP-ish
 *   model table               the "Choosing delta" table of copa.rst
 *   model losses [NAME]       the loss links (issue 10), every variant
 *
 * MODEL_TRACE=1 prints the state at each round start and each hold on
 * stderr, MODEL_NOCOMP=1 turns competitive mode off, MODEL_ACK2=1 makes
 * the loss links' receiver ACK every second packet with 0.5 ms jitter,
 * MODEL_START=S measures the loss links' first S seconds instead of 5 to
 * 30 s, MODEL_SEEDS and MODEL_SEED0 choose how many seeds and from which,
 * MODEL_REORDER=P reorders 4 packets with probability P per packet
 * (cfg.reorder), MODEL_STALL=P holds up an ACK, and those behind it, by
 * up to 10 ms with probability P (cfg.stall).
 *
 * The model
 * ---------
 * One sender with unlimited data, one FIFO bottleneck of a given rate and
 * size (packets, not counting the one being transmitted), a propagation
 * RTT (half on each side of the bottleneck), optional random loss, a
 * token-bucket policer in front of the FIFO, a forced loss burst and a
 * step change of the link rate at a given time. The receiver ACKs every
 * packet or every second packet (with a 40 ms delayed-ACK timer, and at
 * once after a hole, as Linux does); ACKs may get uniform jitter on the
 * way back (kept in order).
 *
 * Everything is FIFO with a fixed delay, so the model needs no event
 * heap: a packet's departure from the bottleneck and its arrival at the
 * receiver are known when it is sent, and ACKs return in order. The only
 * events are "the pacer allows a send", "the next ACK arrives", "the
 * delayed-ACK timer fires" and "a tail loss is detected". Time is in
 * picoseconds (u64), so link rates up to terabits keep sub-nanosecond
 * resolution; the clock handed to the algorithm is microseconds plus a
 * configurable base (the wrap test starts it just below 2^32 us).
 *
 * The sender does what the kernel does around cong_control():
 * - one struct copa_ack per ACK (copa_ack_begin()): tp->delivered,
 *   tp->lost, the rate sample's prior_delivered (tp->delivered when the
 *   newest acknowledged packet was sent), delivered, acked_sacked and
 *   losses, the RTT of the newest acknowledged packet in us (so with
 *   sub-millisecond detail), srtt as tcp_rtt_estimator()'s EWMA (7/8),
 *   tcp_is_cwnd_limited() with tcp_cwnd_validate()'s bookkeeping;
 * - losses are marked as RACK does without reordering: a dropped packet
 *   is lost once a later packet is acknowledged, or, at the tail, when a
 *   probe timer (2 srtt + 10 ms) fires; the next ACK reports them;
 *   reordering (cfg.reorder) marks delivered packets lost too, and the
 *   recovery episode they alone began is undone (undo_cwnd()) as it ends;
 * - the first loss of a recovery episode calls copa_save_prior() (the
 *   kernel's ssthresh()); the episode ends when everything sent before it
 *   is acknowledged or lost. There is no RTO: the model never stalls long
 *   enough for one;
 * - cwnd and pacing come from the algorithm's output; the first 10 packets
 *   go out unpaced (tcp_update_skb_after_send()), then each packet waits
 *   mss / pacing_rate after the previous one; at most cwnd packets are in
 *   flight. The initial window is 10 and srtt starts at the handshake's
 *   RTT (copa_init() runs after it).
 *
 * Overflow checking
 * -----------------
 * The build traps on signed overflow, shifts out of range, bad
 * conversions and every other undefined behaviour UBSan knows (gcc,
 * -fsanitize=undefined -fno-sanitize-recover=all). Unsigned arithmetic
 * wraps by definition and the algorithm relies on it for u32 time and
 * sequence comparisons, so no sanitizer can flag it; unsigned overflow is
 * instead checked on the outputs, after every ACK (check_ack()): cwnd in
 * [2, min(clamp, COPA_MAX_CWND)], the pacing rate within [1x, 2x] of
 * cwnd * mss / RTTstanding (or the held rate with copa_hold_cwnd()),
 * 1/delta within [1, 1000], velocity within [1, 2^14], |cwnd_acc| below one
 * packet's worth, the RTT filters within the range of the samples fed,
 * the target no larger than the unbounded marker. A wrapped product would
 * break one of these at once. div_u64()/div64_u64() abort on a zero
 * divisor (kernel_shim.h).
 *
 * Each case runs in its own process (as many at once as there are CPUs,
 * or MODEL_JOBS), so a sanitizer abort fails that case only.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernel_shim.h"
#include "../../tcp_copa_algo.h"

#define PS_PER_US	1000000ULL
#define PS_PER_MS	1000000000ULL
#define PS_PER_S	1000000000000ULL
#define DELACK_PS	(40 * PS_PER_MS)
#define INIT_CWND	10
#define NEVER		U64_MAX
#define REORDERED	3	/* sim.dropped[]: delivered, marked lost */

void shim_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "model: assertion failed at %s:%d: %s\n", file, line,
		what);
	abort();
}

/* A failed invariant inside a case: say what, abort the case's process. */
static void __attribute__((noreturn, format(printf, 1, 2)))
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "model: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

/* ---------------------------------------------------------------------
 * Configuration of one run.
 */
struct cfg {
	u64	rate_bps;	/* bottleneck rate */
	u32	rtt_us;		/* propagation RTT */
	u32	fifo;		/* FIFO size, packets (0: 4 BDP + 4/delta) */
	u32	mss;
	u32	delta_milli;
	u32	loss_reaction;	/* percent, as the sysctl */
	u32	competitive;
	u32	ack_every;	/* 1 or 2 */
	double	loss;		/* random loss probability */
	u64	duration_us;
	u64	measure_from_us; /* time-averages start here */
	u64	step_at_us;	/* 0: no step */
	u64	step_rate_bps;
	u32	jitter_us;	/* ACK jitter, +- uniform */
	u32	ack_delay_us;	/* every ACK this late, but that of a packet
				 * sent with nothing in flight (a host's
				 * scheduling delay, see host_jitter_10_gbit) */
	u64	clock_base_us;	/* now_us at time 0 */
	u32	no_sample_every; /* every Nth ACK carries rtt_us = -1 */
	u32	whole_ms_every;	/* every Nth sample is floored to whole ms */
	u64	police_bps;	/* token-bucket policer, 0: none */
	u64	police_burst;	/* bytes */
	bool	no_detect;	/* rate-limit detection off */
	u64	burst_at_us;	/* forced loss burst */
	u64	burst_len_us;
	double	burst_loss;
	u32	burst_delay_us;	/* extra delay in the burst: a standing queue */
	u32	cwnd_clamp;	/* 0: the kernel's default, ~0 */
	u64	sample_at_us;	/* record RTTmin and the mode then, 0: never */
	u64	bulk_at_us;	/* the application sends one packet at 0
				 * (iperf3's cookie), the rest from here;
				 * 0: all from the start */
	double	reorder;	/* probability a packet starts a reordering */
	u32	reorder_len;	/* packets each reordering delays */
	double	stall;		/* probability an ACK is held up, and */
	u32	stall_us;	/* up to this long, with those behind it: an
				 * emulator's stalled vCPU (TCG reads RTT
				 * outliers of 2 to 10 ms at 12 Mbit/s) */
	u32	shaper_burst;	/* bytes: the FIFO drains as a token-bucket
				 * shaper (tbf) with this bucket, sending
				 * at line rate while it has tokens; 0: a
				 * serializer at the link rate */
	u64	seed;
};

/* What a run measured. */
struct result {
	double	cwnd_avg;	/* time-average over the measurement window */
	u32	cwnd_min, cwnd_max; /* over the measurement window */
	double	util;		/* delivered / link capacity, same window */
	double	qdelay_us;	/* mean FIFO wait of delivered packets */
	u64	acks, sent, dropped;
	u32	lost;
	/* step change */
	u32	step_rounds;	/* rounds from the step to within 10% */
	bool	step_reached;
	double	step_target;
	/* loss burst */
	u64	cut_at_ps;	/* first ACK of the cut, 0 if none */
	u32	cut_from, cut_to;
	int	recover_rtts;	/* RTTs from the cut to 90% util, -1 never */
	double	util_after_cut;
	/* policer */
	u64	hold_acks;	/* ACKs processed in a hold */
	u32	hold_cwnd_min, hold_cwnd_max;
	u64	hold_rate;
	u32	holds;
	u32	undos;		/* reductions undone (reordering) */
	/* wrap */
	bool	crossed_2_32;
	/* slow start's end: when, cwnd then, ACKs in competitive mode */
	u64	ss_end_ps;
	u32	ss_end_cwnd;
	u64	competitive_acks;
	u64	standing_ps;	/* last ACK with dq over RTTmin / 4 */
	/* RTTmin (us) and competitive mode at sample_at_us and at the end */
	u32	sample_rtt_min, end_rtt_min;
	bool	sample_competitive, end_competitive;
	u64	rtt_min_grew_ps; /* RTTmin first over rtt_us + burst_delay_us */
};

/* ---------------------------------------------------------------------
 * The simulation.
 */
struct ackrec {
	u64	at;		/* arrival at the sender, ps */
	u32	seq;		/* newest packet it covers */
};

struct sim {
	const struct cfg *c;
	struct result *r;
	u64	t;		/* ps */
	u64	rng;

	/* sender */
	struct copa ca;
	u32	cwnd, clamp;
	u64	pacing;		/* bytes/s */
	u32	srtt8;		/* us << 3 */
	u64	next_send;	/* pacer, ps */
	u32	snd_nxt;	/* next sequence number */
	u32	ack_hi;		/* all seq < ack_hi are acknowledged or lost */
	u32	delivered, lost;
	u32	inflight;
	u32	pending_losses;	/* marked by the probe timer, not yet reported */
	u32	max_packets_out, cwnd_usage_seq;
	bool	is_cwnd_limited;
	bool	in_recovery;
	bool	recovery_spurious; /* only reordering marked lost in it */
	u32	recovery_hi;
	u32	reorder_left;	/* packets of this reordering still to send */
	u32	ring_mask;
	u64	*send_ps;	/* per packet, indexed by seq & ring_mask */
	u32	*prior_delivered;
	u8	*dropped;
	u32	*drops;		/* dropped, not yet marked lost: FIFO */
	u32	drop_head, drop_tail;
	u32	ack_count;
	u32	sample_count;
	u32	sync_seq;	/* the last packet sent with nothing in flight */

	/* bottleneck */
	u64	*fifo_dep;	/* departure times of queued packets */
	u32	fifo_head, fifo_tail, fifo_mask;
	u64	last_dep;
	double	tokens;		/* policer, bytes */
	u64	tokens_at;
	double	sh_tokens;	/* shaper bucket, bytes */
	u64	sh_at;
	u64	last_send;	/* ps, tp->lsndtime */
	u32	rate_delivered;	/* the last rate sample, packets ... */
	u32	rate_interval_us; /* ... over this interval */

	/* receiver */
	u32	rcv_pending;	/* received, not yet acknowledged */
	u32	rcv_last;	/* newest received seq */
	u32	rcv_expect;	/* next in-order seq */
	u64	rcv_deadline;	/* delayed-ACK timer, ps of arrival */

	/* ACKs on their way back */
	struct ackrec *acks;
	u32	ack_head, ack_tail, ack_mask;
	u64	last_ack_at;

	/* measurement */
	u64	meas_from;	/* ps */
	u64	cwnd_at;	/* time of the last cwnd change */
	double	cwnd_area;
	u64	meas_delivered_bytes;
	double	qdelay_sum;
	u64	qdelay_n;
	u32	max_rtt_sample, min_rtt_sample;
};

static u64 xrand(struct sim *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return s->rng;
}

static double urand(struct sim *s)
{
	return (xrand(s) >> 11) * (1.0 / 9007199254740992.0);
}

static u32 pow2_above(u64 n)
{
	u32 p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static u64 now_us(const struct sim *s)
{
	return s->c->clock_base_us + s->t / PS_PER_US;
}

static u64 link_rate(const struct sim *s, u64 at)
{
	if (s->c->step_at_us && at >= s->c->step_at_us * PS_PER_US)
		return s->c->step_rate_bps;
	return s->c->rate_bps;
}

/*
 * BDP of the link in packets at @rate, over the RTT Copa measures as
 * RTTmin: the propagation RTT plus one packet's transmission at the
 * bottleneck (1 packet more; at 1 Mbit/s that packet is 11.6 ms).
 */
static double bdp_pkts(const struct cfg *c, u64 rate)
{
	return (double)rate * c->rtt_us / 1e6 / 8 / c->mss + 1;
}

/*
 * The window a lone flow settles at: BDP plus the queue Copa aims for,
 * 1/delta packets but at most BDP / COPA_QUEUE_BDP_DIV and at least
 * COPA_QUEUE_MIN (copa_target_inv_delta()).
 */
static double target_pkts(const struct cfg *c, u64 rate)
{
	double bdp = bdp_pkts(c, rate);
	double queue = fmin(1000.0 / c->delta_milli, bdp / COPA_QUEUE_BDP_DIV);

	return bdp + fmax(queue, (double)COPA_QUEUE_MIN / COPA_UNIT);
}

/* Account the time the current cwnd was in force. */
static void cwnd_account(struct sim *s)
{
	if (s->t > s->meas_from) {
		u64 from = s->cwnd_at > s->meas_from ? s->cwnd_at : s->meas_from;

		s->cwnd_area += (double)s->cwnd * (s->t - from);
	}
	s->cwnd_at = s->t;
}

/* ---------------------------------------------------------------------
 * Receiver: runs when a packet is sent, since its arrival time is known
 * then and arrivals are in send order.
 */
static void push_ack(struct sim *s, u64 sent_at, u32 seq)
{
	u64 rev = (u64)s->c->rtt_us * PS_PER_US / 2;
	u64 at = sent_at + rev;
	struct ackrec *a;

	if (s->c->jitter_us) {
		u64 j = (u64)s->c->jitter_us * PS_PER_US;

		at = at - j + (u64)(urand(s) * 2 * j);
	}
	if (s->c->stall > 0 && urand(s) < s->c->stall)
		at += (u64)(urand(s) * s->c->stall_us * PS_PER_US);
	if (seq != s->sync_seq)
		at += (u64)s->c->ack_delay_us * PS_PER_US;
	if (at < s->last_ack_at)
		at = s->last_ack_at;	/* ACKs stay in order */
	s->last_ack_at = at;
	if (s->ack_tail - s->ack_head > s->ack_mask)
		fail("ACK ring overflow");
	a = &s->acks[s->ack_tail++ & s->ack_mask];
	a->at = at;
	a->seq = seq;
}

static void rcv_flush_timer(struct sim *s)
{
	if (s->rcv_pending) {
		push_ack(s, s->rcv_deadline, s->rcv_last);
		s->rcv_pending = 0;
	}
}

static void receive(struct sim *s, u32 seq, u64 at)
{
	bool hole = seq != s->rcv_expect;

	if (s->rcv_pending && at > s->rcv_deadline)
		rcv_flush_timer(s);
	s->rcv_last = seq;
	s->rcv_expect = seq + 1;
	s->rcv_pending++;
	if (hole || s->rcv_pending >= s->c->ack_every) {
		push_ack(s, at, seq);
		s->rcv_pending = 0;
	} else {
		s->rcv_deadline = at + DELACK_PS;
	}
}

static bool in_burst(const struct sim *s)
{
	const struct cfg *c = s->c;

	return c->burst_len_us && s->t >= c->burst_at_us * PS_PER_US &&
	       s->t < (c->burst_at_us + c->burst_len_us) * PS_PER_US;
}

/* ---------------------------------------------------------------------
 * Bottleneck: policer, random loss, FIFO. Returns false if dropped.
 */
/*
 * A token-bucket shaper (tbf) sends the packet at the head of its FIFO at
 * @start, as soon as the bucket holds a packet's worth of tokens, at line
 * rate: only packets beyond the bucket wait their serialization time.
 * Returns the departure; *tx becomes the wait for tokens.
 */
static u64 shape(struct sim *s, u64 start, u64 *tx)
{
	const struct cfg *c = s->c;
	double rate = (double)link_rate(s, start) / 8 / PS_PER_S; /* B/ps */
	double tokens = s->sh_tokens + (start - s->sh_at) * rate;

	if (tokens > c->shaper_burst)
		tokens = c->shaper_burst;
	*tx = tokens >= c->mss ? 0 : (u64)((c->mss - tokens) / rate);
	s->sh_tokens = tokens + *tx * rate - c->mss;
	s->sh_at = start + *tx;
	return s->sh_at;
}

static bool bottleneck(struct sim *s, u32 seq)
{
	const struct cfg *c = s->c;
	u64 tx, dep;

	while (s->fifo_head != s->fifo_tail &&
	       s->fifo_dep[s->fifo_head & s->fifo_mask] <= s->t)
		s->fifo_head++;

	if (c->police_bps) {
		s->tokens += (double)(s->t - s->tokens_at) * c->police_bps / 8 /
			     PS_PER_S;
		s->tokens_at = s->t;
		if (s->tokens > c->police_burst)
			s->tokens = c->police_burst;
		if (s->tokens < c->mss)
			return false;
		s->tokens -= c->mss;
	}
	if (c->loss > 0 && urand(s) < c->loss)
		return false;
	if (in_burst(s) && urand(s) < c->burst_loss)
		return false;
	/* The packet in transmission does not count against the limit. */
	if (s->fifo_tail - s->fifo_head > s->c->fifo)
		return false;

	tx = (u64)c->mss * 8 * PS_PER_S / link_rate(s, s->t);
	dep = (s->last_dep > s->t ? s->last_dep : s->t) + tx;
	if (c->shaper_burst)
		dep = shape(s, dep - tx, &tx);
	if (s->t >= s->meas_from) {
		s->qdelay_sum += (double)(dep - tx - s->t) / PS_PER_US;
		s->qdelay_n++;
	}
	s->last_dep = dep;
	s->fifo_dep[s->fifo_tail++ & s->fifo_mask] = dep;
	if (in_burst(s))
		dep += (u64)c->burst_delay_us * PS_PER_US;
	receive(s, seq, dep + (u64)c->rtt_us * PS_PER_US / 2);
	return true;
}

/* ---------------------------------------------------------------------
 * Sender.
 */

/* tcp_cwnd_validate() */
static void cwnd_validate(struct sim *s, bool is_cwnd_limited)
{
	u32 packets_out = s->snd_nxt - s->ack_hi;

	if (!copa_before(s->ack_hi, s->cwnd_usage_seq) || is_cwnd_limited ||
	    (!s->is_cwnd_limited && packets_out > s->max_packets_out)) {
		s->is_cwnd_limited = is_cwnd_limited;
		s->max_packets_out = packets_out;
		s->cwnd_usage_seq = s->snd_nxt;
	}
}

/* tcp_is_cwnd_limited(); ssthresh mirrors Copa's slow start. */
static bool cwnd_limited(const struct sim *s)
{
	if (s->ca.slow_start)
		return s->cwnd < 2 * s->max_packets_out;
	return s->is_cwnd_limited;
}

/* The application holds the data back: only its first packet is out. */
static bool app_waits(const struct sim *s)
{
	return s->snd_nxt && s->t < s->c->bulk_at_us * PS_PER_US;
}

static bool can_send(const struct sim *s)
{
	return s->inflight < s->cwnd && !app_waits(s) &&
	       s->snd_nxt - s->ack_hi < s->ring_mask;
}

/*
 * CA_EVENT_TX_START: sending starts with nothing in flight (tcp_copa.c's
 * copa_tx_start(), then copa_pace_window()).
 */
static void tx_start(struct sim *s)
{
	struct copa_ack a = { .mss = s->c->mss, .srtt_us = s->srtt8 >> 3 };

	s->cwnd = copa_on_tx_start(&s->ca, (s->t - s->last_send) / PS_PER_US,
				   s->srtt8 >> 3, s->cwnd, s->rate_delivered,
				   s->rate_interval_us);
	a.cwnd = s->cwnd;
	if (!copa_held_rate(&s->ca))
		s->pacing = copa_pacing_rate(&s->ca, &a);
}

/*
 * Reordering (veth between CPUs, a guest's vCPUs): now and then a few
 * packets arrive late, after RACK's reordering window; the sender marks
 * them lost and retransmits them, then DSACKs show the losses spurious
 * and the stack undoes the reduction. The model delivers them on time,
 * reports each as lost on the ACK that covers it, and undoes the
 * recovery episode they began when it ends, if nothing in it was
 * really dropped.
 */
static bool reordered(struct sim *s)
{
	if (!s->reorder_left && s->c->reorder > 0 && urand(s) < s->c->reorder)
		s->reorder_left = s->c->reorder_len;
	if (!s->reorder_left)
		return false;
	s->reorder_left--;
	return true;
}

static void send_one(struct sim *s)
{
	u32 seq = s->snd_nxt++;
	u32 i = seq & s->ring_mask;

	if (!s->inflight && seq)
		tx_start(s);
	s->last_send = s->t;

	if (!s->inflight)
		s->sync_seq = seq;
	s->send_ps[i] = s->t;
	s->prior_delivered[i] = s->delivered;
	s->inflight++;
	s->r->sent++;
	s->dropped[i] = !bottleneck(s, seq);
	if (s->dropped[i]) {
		s->drops[s->drop_tail++ & s->ring_mask] = seq;
		s->r->dropped++;
	} else if (reordered(s)) {
		s->dropped[i] = REORDERED;
	}
	cwnd_validate(s, s->inflight >= s->cwnd);
	if (s->snd_nxt <= INIT_CWND)
		s->next_send = s->t;
	else
		s->next_send = s->t + (u64)s->c->mss * PS_PER_S / s->pacing;
}

/* Mark dropped packets older than @seq lost (RACK without reordering). */
static u32 mark_lost(struct sim *s, u32 seq, bool all)
{
	u32 n = 0;

	while (s->drop_head != s->drop_tail) {
		u32 d = s->drops[s->drop_head & s->ring_mask];

		if (!all && !copa_before(d, seq))
			break;
		s->drop_head++;
		n++;
	}
	s->lost += n;
	s->inflight -= n;
	return n;
}

static u64 probe_deadline(const struct sim *s)
{
	u32 d;

	if (s->drop_head == s->drop_tail)
		return NEVER;
	d = s->drops[s->drop_head & s->ring_mask];
	return s->send_ps[d & s->ring_mask] +
	       ((u64)(s->srtt8 >> 2) + 10000) * PS_PER_US;
}

/* The invariants every output must keep (see the comment at the top). */
/*
 * @held: a hold was in force when the ACK came (a hold starts and ends
 * at a round start, in the middle of copa_on_ack()).
 */
static void check_ack(struct sim *s, const struct copa_ack *a,
		      u32 cwnd_before, bool held)
{
	const struct copa *ca = &s->ca;
	u32 hi = min(a->cwnd_clamp, COPA_MAX_CWND);
	u32 standing = copa_win_min(&ca->rtt_standing);
	u32 rmin = copa_win_min(&ca->rtt_min);

	if (a->cwnd < COPA_MIN_CWND || a->cwnd > max(hi, (u32)COPA_MIN_CWND))
		fail("cwnd %u outside [2, %u]", a->cwnd, hi);
	if (!a->pacing_rate)
		fail("pacing rate 0");
	if (copa_held_rate(ca) && held) {
		u64 bdp = copa_rate_bdp(ca, a, copa_held_rate(ca));

		if (a->pacing_rate != copa_held_rate(ca) ||
		    a->cwnd != copa_clamp_cwnd(a, copa_hold_cwnd(ca, a)))
			fail("hold: pacing %llu cwnd %u, rate %llu bdp %llu",
			     (unsigned long long)a->pacing_rate, a->cwnd,
			     (unsigned long long)copa_held_rate(ca),
			     (unsigned long long)bdp);
	} else if (standing && !copa_held_rate(ca) && !held) {
		/* rate * RTTstanding in [1, 2] x cwnd * mss, less rounding */
		double x = (double)a->pacing_rate * standing /
			   ((double)a->cwnd * a->mss * 1e6);

		if (x > 2.0 + 1e-9 || x < 1.0 - (double)standing / 1e6 /
					    ((double)a->cwnd * a->mss) - 1e-9)
			fail("pacing %llu B/s, cwnd %u, RTTstanding %u: %.6f x",
			     (unsigned long long)a->pacing_rate, a->cwnd,
			     standing, x);
	}
	if (ca->inv_delta < COPA_INV_DELTA_MIN ||
	    ca->inv_delta > COPA_INV_DELTA_MAX)
		fail("1/delta %u (configured %u)", ca->inv_delta,
		     ca->inv_delta0);
	if (ca->velocity < 1 || ca->velocity > COPA_MAX_VELOCITY)
		fail("velocity %u", ca->velocity);
	/* below one packet of the window it was computed for */
	if ((u64)(ca->cwnd_acc < 0 ? -(s64)ca->cwnd_acc : ca->cwnd_acc) >=
	    (u64)COPA_UNIT * max(a->cwnd, cwnd_before))
		fail("cwnd_acc %d at cwnd %u (was %u)", ca->cwnd_acc, a->cwnd,
		     cwnd_before);
	if (s->sample_count && (standing > s->max_rtt_sample ||
				rmin > s->max_rtt_sample ||
				(rmin && rmin < s->min_rtt_sample) ||
				(standing && standing < s->min_rtt_sample) ||
				copa_win_max(&ca->rtt_max) > s->max_rtt_sample))
		fail("RTT filters min %u standing %u max %u outside samples [%u, %u]",
		     rmin, standing, copa_win_max(&ca->rtt_max),
		     s->min_rtt_sample, s->max_rtt_sample);
	if (copa_dq_us(ca) > s->max_rtt_sample)
		fail("dq %u us", copa_dq_us(ca));
}

static void on_ack(struct sim *s, const struct ackrec *ar)
{
	const struct cfg *c = s->c;
	struct copa *ca = &s->ca;
	struct copa_ack a;
	u32 acked = 0, losses, spurious = 0, seq, i;
	s64 rtt_ps;
	s32 rtt_us;
	u32 cwnd_before = s->cwnd;
	u32 delivered_before = s->delivered;
	bool was_held = copa_held_rate(ca);

	for (seq = s->ack_hi; copa_before(seq, ar->seq + 1); seq++) {
		u8 *d = &s->dropped[seq & s->ring_mask];

		spurious += *d == REORDERED;
		if (!*d || *d == REORDERED) {
			*d = 2; /* delivered */
			acked++;
		}
	}
	/* Everything up to the ACK's seq is acknowledged or still a drop. */
	losses = mark_lost(s, ar->seq, false) + s->pending_losses;
	s->pending_losses = 0;
	s->lost += spurious;
	s->ack_hi = ar->seq + 1;
	s->delivered += acked;
	s->inflight -= acked;
	if (s->t >= s->meas_from)
		s->meas_delivered_bytes += (u64)acked * c->mss;

	i = ar->seq & s->ring_mask;
	rtt_ps = s->t - s->send_ps[i];
	rtt_us = max_t(s64, rtt_ps / (s64)PS_PER_US, 1);
	s->ack_count++;
	if (c->no_sample_every && s->ack_count % c->no_sample_every == 0) {
		rtt_us = -1;
	} else {
		if (c->whole_ms_every &&
		    s->ack_count % c->whole_ms_every == 1 && rtt_us >= 1000)
			rtt_us -= rtt_us % 1000;	/* timestamp echo */
		/* tcp_rtt_estimator() */
		if (!s->srtt8)
			s->srtt8 = rtt_us << 3;
		else
			s->srtt8 += rtt_us - (s->srtt8 >> 3);
		if (!s->sample_count || (u32)rtt_us > s->max_rtt_sample)
			s->max_rtt_sample = rtt_us;
		if (!s->sample_count || (u32)rtt_us < s->min_rtt_sample)
			s->min_rtt_sample = rtt_us;
		s->sample_count++;
	}

	/*
	 * tcp_fastretrans_alert(): leave recovery, undoing it if DSACKs
	 * showed every loss in it spurious (undo_cwnd()), or enter it
	 * (ssthresh()).
	 */
	if (s->in_recovery && !copa_before(s->ack_hi, s->recovery_hi) &&
	    s->drop_head == s->drop_tail) {
		s->in_recovery = false;
		if (s->recovery_spurious) {
			s->cwnd = copa_undo(ca, s->cwnd);
			s->r->undos++;
		}
	}
	if ((losses || spurious) && !s->in_recovery) {
		copa_save_prior(ca, s->cwnd);
		s->in_recovery = true;
		s->recovery_spurious = true;
		s->recovery_hi = s->snd_nxt;
	}
	s->recovery_spurious &= !losses;
	losses += spurious;

	a = (struct copa_ack) {
		.now_us		= now_us(s),
		.srtt_us	= s->srtt8 >> 3,
		.cwnd		= s->cwnd,
		.cwnd_clamp	= s->clamp,
		.mss		= c->mss,
		.delivered	= s->delivered,
		.lost		= s->lost,
		.prior_delivered = s->prior_delivered[i],
		.rs_delivered	= s->delivered - s->prior_delivered[i],
		.acked_sacked	= acked,
		.losses		= losses,
		.rtt_us		= rtt_us,
		.cwnd_limited	= cwnd_limited(s),
		.app_limited	= 0,
	};
	copa_on_ack(ca, &a);
	if (rtt_us > 0) {	/* tcp_rate_gen() keeps the last sample */
		s->rate_delivered = a.rs_delivered;
		s->rate_interval_us = rtt_us;
	}
	if (getenv("MODEL_TRACE") && copa_held_rate(ca) && !was_held)
		fprintf(stderr, "t %.3f hold at %llu B/s, cwnd %u (was %u)\n",
			s->t / 1e12, (unsigned long long)copa_held_rate(ca),
			a.cwnd, cwnd_before);
	check_ack(s, &a, cwnd_before, was_held);
	if (getenv("MODEL_TRACE") && s->ca.round_start)
		fprintf(stderr, "t %.3f cwnd %u target %u dq %u standing %u min %u srtt %u v %u inv %u mode %d acked %u lost %u\n", s->t/1e12, a.cwnd, a.target, copa_dq_us(ca), copa_win_min(&ca->rtt_standing), copa_win_min(&ca->rtt_min), a.srtt_us, ca->velocity, ca->inv_delta, copa_mode(ca), acked, s->lost);

	cwnd_account(s);
	s->cwnd = a.cwnd;
	s->pacing = a.pacing_rate;
	s->r->acks++;
	if (a.now_us >> 32)
		s->r->crossed_2_32 = true;

	if (s->t >= s->meas_from) {
		s->r->cwnd_min = min(s->r->cwnd_min, s->cwnd);
		s->r->cwnd_max = max(s->r->cwnd_max, s->cwnd);
	}
	/* the loss reaction's cut: cwnd *= 7/10 in one ACK */
	if (!s->r->cut_at_ps && c->burst_len_us && !ca->slow_start &&
	    s->cwnd <= cwnd_before * 3 / 4 && cwnd_before > 100) {
		s->r->cut_at_ps = s->t;
		s->r->cut_from = cwnd_before;
		s->r->cut_to = s->cwnd;
	}
	if (!ca->slow_start && !s->r->ss_end_ps) {
		s->r->ss_end_ps = s->t;
		s->r->ss_end_cwnd = cwnd_before;
	}
	if (copa_dq_us(ca) > copa_win_min(&ca->rtt_min) / 4)
		s->r->standing_ps = s->t;
	s->r->competitive_acks += ca->competitive;
	if (copa_held_rate(ca) && !was_held)
		s->r->holds++;
	/* the ACKs whose output a hold set */
	if (copa_held_rate(ca) && was_held) {
		s->r->hold_acks++;
		s->r->hold_cwnd_min = min(s->r->hold_cwnd_min, s->cwnd);
		s->r->hold_cwnd_max = max(s->r->hold_cwnd_max, s->cwnd);
		s->r->hold_rate = copa_held_rate(ca);
	}
	(void)delivered_before;
}

/* Per-round hooks for the step and recovery measurements. */
struct watch {
	/* step: rounds since the step, first round within 10% */
	u32	rounds;
	bool	after_step;
	/* recovery: delivery per RTT after the cut */
	u64	bin_start;
	u64	bin_delivered;
	int	bins;
};

static void watch_ack(struct sim *s, struct watch *w)
{
	const struct cfg *c = s->c;
	struct result *r = s->r;
	u32 rtt_min = copa_win_min(&s->ca.rtt_min);

	if (c->sample_at_us && !r->sample_rtt_min &&
	    s->t >= c->sample_at_us * PS_PER_US) {
		r->sample_rtt_min = rtt_min;
		r->sample_competitive = s->ca.competitive;
	}
	if (c->burst_delay_us && !r->rtt_min_grew_ps &&
	    rtt_min >= c->rtt_us + c->burst_delay_us)
		r->rtt_min_grew_ps = s->t;
	r->end_rtt_min = rtt_min;
	r->end_competitive = s->ca.competitive;

	if (c->step_at_us && s->t >= c->step_at_us * PS_PER_US) {
		double tgt = target_pkts(c, c->step_rate_bps);

		if (!w->after_step) {
			w->after_step = true;
			w->rounds = 0;
			r->step_target = tgt;
		}
		if (s->ca.round_start)
			w->rounds++;
		if (!r->step_reached && fabs(s->cwnd - tgt) <= 0.1 * tgt) {
			r->step_reached = true;
			r->step_rounds = w->rounds;
		}
	}
	if (r->cut_at_ps && r->recover_rtts < 0) {
		u64 rtt = (u64)c->rtt_us * PS_PER_US;
		u64 cap = c->rate_bps * c->rtt_us / 1000000 / 8;

		/*
		 * The first RTT after the cut delivers what was sent before
		 * it: counting from the cut, that bin alone read as recovered.
		 */
		if (!w->bin_start) {
			if (s->t < r->cut_at_ps + rtt)
				return;
			w->bin_start = s->t;
			w->bin_delivered = s->delivered;
		}
		while (s->t >= w->bin_start + rtt) {
			double u = (double)(s->delivered - w->bin_delivered) *
				   c->mss / cap;

			w->bins++;
			if (u >= 0.9) {
				r->recover_rtts = w->bins + 1;
				break;
			}
			w->bin_start += rtt;
			w->bin_delivered = s->delivered;
			if (w->bins > 1000)
				break;
		}
	}
}

static void run(const struct cfg *c, struct result *r)
{
	struct sim s = { .c = c, .r = r };
	double bdp = bdp_pkts(c, max(c->rate_bps, c->step_rate_bps));
	u64 end = c->duration_us * PS_PER_US;
	u32 ring = pow2_above((u64)(3 * bdp + 4000000.0 / c->delta_milli +
				    c->fifo + 4096));
	struct watch w = {};
	struct copa_ack a0;

	memset(r, 0, sizeof(*r));
	r->cwnd_min = r->hold_cwnd_min = U32_MAX;
	r->recover_rtts = -1;
	s.rng = c->seed ? c->seed : 0x9e3779b97f4a7c15ULL;
	s.clamp = c->cwnd_clamp ? c->cwnd_clamp : U32_MAX;
	s.ring_mask = ring - 1;
	s.send_ps = calloc(ring, sizeof(*s.send_ps));
	s.prior_delivered = calloc(ring, sizeof(*s.prior_delivered));
	s.dropped = calloc(ring, 1);
	s.drops = calloc(ring, sizeof(*s.drops));
	s.fifo_mask = pow2_above(c->fifo + 2) - 1;
	s.fifo_dep = calloc(s.fifo_mask + 1, sizeof(*s.fifo_dep));
	s.ack_mask = ring - 1;
	s.acks = calloc(ring, sizeof(*s.acks));
	if (!s.send_ps || !s.prior_delivered || !s.dropped || !s.drops ||
	    !s.fifo_dep || !s.acks)
		fail("out of memory");
	s.meas_from = c->measure_from_us * PS_PER_US;
	s.tokens = c->police_burst;

	/* copa_init() after the handshake measured the RTT */
	s.cwnd = INIT_CWND;
	s.srtt8 = c->rtt_us << 3;
	copa_reset(&s.ca, c->delta_milli, c->competitive,
		   c->loss_reaction, s.cwnd, 0);
	copa_set_detector(&s.ca, !c->no_detect, COPA_LIMIT_LOSS_PCT,
			  COPA_RATE_TOL_PCT, COPA_HOLD_ROUNDS);
	a0 = (struct copa_ack){ .cwnd = s.cwnd, .mss = c->mss,
				.srtt_us = s.srtt8 >> 3 };
	s.pacing = copa_pacing_rate(&s.ca, &a0);

	while (s.t < end) {
		u64 t_send = can_send(&s) ? max(s.next_send, s.t) : NEVER;
		u64 t_ack = s.ack_head != s.ack_tail ?
			    s.acks[s.ack_head & s.ack_mask].at : NEVER;
		u64 t_timer = s.rcv_pending ? s.rcv_deadline : NEVER;
		u64 t_probe = probe_deadline(&s);
		u64 t_app = app_waits(&s) ? c->bulk_at_us * PS_PER_US : NEVER;
		u64 t = min(min(t_send, t_ack), min(t_timer, t_probe));

		t = min(t, t_app);

		if (t == NEVER)
			fail("deadlock at %llu ps", (unsigned long long)s.t);
		if (t < s.t)
			fail("time went back");
		s.t = t;
		if (t == t_ack) {
			struct ackrec ar = s.acks[s.ack_head++ & s.ack_mask];

			on_ack(&s, &ar);
			watch_ack(&s, &w);
		} else if (t == t_timer) {
			rcv_flush_timer(&s);
		} else if (t == t_probe) {
			s.pending_losses += mark_lost(&s, 0, true);
		} else if (t == t_send) {
			send_one(&s);
		}
	}
	cwnd_account(&s);
	if (end > s.meas_from) {
		double span = end - s.meas_from;

		r->cwnd_avg = s.cwnd_area / span;
		r->util = s.meas_delivered_bytes * 8.0 /
			  (c->rate_bps * (span / PS_PER_S));
		if (c->step_at_us && c->step_at_us < c->measure_from_us)
			r->util = s.meas_delivered_bytes * 8.0 /
				  (c->step_rate_bps * (span / PS_PER_S));
	}
	r->qdelay_us = s.qdelay_n ? s.qdelay_sum / s.qdelay_n : 0;
	r->lost = s.lost;
	free(s.send_ps);
	free(s.prior_delivered);
	free(s.dropped);
	free(s.drops);
	free(s.fifo_dep);
	free(s.acks);
}

/* A link of @mbit Mbit/s and @rtt_ms ms with the test defaults. */
static struct cfg mklink(double mbit, double rtt_ms, u32 mss, u32 delta_milli)
{
	struct cfg c = {
		.rate_bps = (u64)(mbit * 1e6),
		.rtt_us = (u32)(rtt_ms * 1000),
		.mss = mss,
		.delta_milli = delta_milli,
		.loss_reaction = 5,
		.competitive = getenv("MODEL_NOCOMP") ? 0 : 1,
		.ack_every = 1,
	};
	double bdp = bdp_pkts(&c, c.rate_bps);

	/* 4 BDP plus 4x the target queue: never the limit in steady state */
	c.fifo = (u32)(4 * bdp + 4000.0 / delta_milli) + 8;
	return c;
}

/* Run long enough for @rounds RTTs at the target, measure the last 40%. */
static void set_duration(struct cfg *c, u32 rounds)
{
	double rtt_us = c->rtt_us + 1e6 * 8 * c->mss * 1000.0 /
				    c->delta_milli / c->rate_bps;

	c->duration_us = (u64)(rounds * rtt_us);
	c->measure_from_us = c->duration_us * 6 / 10;
}

/* ---------------------------------------------------------------------
 * The cases. Each returns true if it passed and describes what it
 * measured in @out.
 */
#define OUT(...)	snprintf(out, len, __VA_ARGS__)

/*
 * Steady state: a lone flow keeps 1/delta packets queued (at most a
 * quarter of the BDP), so its window settles at target_pkts() (copa.rst,
 * "Target"). The queue and cwnd
 * follow a sawtooth of a few rounds, so the test compares the
 * time-average of cwnd over the last 40% of the run (after slow start and
 * the first approach, many sawtooth periods) with that target, within
 * 10%.
 */
static bool steady(const struct cfg *c, char *out, size_t len)
{
	struct result r;
	double tgt = target_pkts(c, c->rate_bps);
	double err;

	run(c, &r);
	err = (r.cwnd_avg - tgt) / tgt;
	OUT("target %.1f cwnd_avg %.1f (%+.1f%%) min %u max %u util %.3f qdelay_us %.0f lost %u",
	    tgt, r.cwnd_avg, 100 * err, r.cwnd_min, r.cwnd_max, r.util,
	    r.qdelay_us, r.lost);
	return fabs(err) <= 0.10;
}

#define STEADY(fname, mbit, rtt_ms, mss, dm, rounds, extra)		\
static bool fname(char *out, size_t len)				\
{									\
	struct cfg c = mklink(mbit, rtt_ms, mss, dm);			\
									\
	set_duration(&c, rounds);					\
	extra;								\
	return steady(&c, out, len);					\
}

/* windows from 2 to 86,000 packets */
STEADY(win_2_pkts, 1, 24, 1448, 500, 300, )
STEADY(win_41_pkts_delta_0_04, 12, 40, 1448, 40, 300, )
STEADY(win_863_pkts, 1000, 10, 1448, 500, 300, )
STEADY(win_86000_pkts, 10000, 100, 1448, 500, 300, )
STEADY(win_86000_pkts_delta_0_01, 10000, 100, 1448, 10, 300, )
/* MSS */
STEADY(mss_536, 12, 40, 536, 500, 300, )
STEADY(mss_8948_delta_0_04, 1000, 40, 8948, 40, 200, )
STEADY(mss_65483_delta_1, 10000, 40, 65483, 1000, 200, )
/* delta */
STEADY(delta_0_001, 1000, 10, 1448, 1, 200, )
STEADY(delta_1_win_2, 1, 24, 1448, 1000, 300, )
STEADY(delta_0_1_ack_every_2, 100, 20, 1448, 100, 300, c.ack_every = 2)
STEADY(delta_0_5_random_loss, 100, 20, 1448, 500, 300, c.loss = 0.001)
/* RTT samples: -1 on every 7th ACK, every 5th floored to whole ms */
STEADY(rtt_samples_missing_and_whole_ms, 100, 40, 1448, 500, 300,
       (c.no_sample_every = 7, c.whole_ms_every = 5))


/*
 * A household up-link of the cheapest price group (unit 213524: 0.615
 * Mbit/s, 30 ms, 2 BDP FIFO of 3 packets), drained by a tbf with a
 * two-frame bucket as copa-eval's lab does, with delayed ACKs: its BDP is
 * 1.6 packets, so one ACK covers all in flight each round and the stack
 * calls the tx-start hook every round. The window must still grow past
 * two packets: utilisation at least 0.9 over the last 40% (it was 0.72 in
 * the VM while that hook capped cwnd at the rate of the round before).
 */
static bool household_up_0_6_mbit(char *out, size_t len)
{
	struct cfg c = mklink(0.615, 30, 1448, 500);
	struct result r;

	set_duration(&c, 300);
	c.ack_every = 2;
	c.fifo = 3;
	c.shaper_burst = 2 * (c.mss + 66);	/* two 1514-byte frames */
	run(&c, &r);
	OUT("cwnd_avg %.2f min %u max %u util %.3f (>= 0.9) qdelay_us %.0f",
	    r.cwnd_avg, r.cwnd_min, r.cwnd_max, r.util, r.qdelay_us);
	return r.util >= 0.9;
}

/*
 * Step change of the link rate at 20 s (x4 down or up) on 100 Mbit/s or
 * 1 Gbit/s, 40 ms, delta 0.5. cwnd must come within 10% of the new
 * target, BDP' + 1/delta, within
 *
 *   3 + log2(delta * |target' - target|) + 4 rounds:
 *
 * velocity is 1 for the first three rounds in the new direction (moving
 * 1/delta packets per round), then doubles each round, so after k more
 * rounds cwnd has moved about 2^(k+1) / delta packets, and
 * log2(delta * change) rounds cover the change. The slack of 4 rounds:
 * one for the new rate to show in RTTstanding (its window spans up to
 * srtt/2 and the ACKs are a round late), one because the round that
 * started before the signal changed does not count towards the three,
 * and two for the cap of half a window per round (going up x4 at
 * cwnd/2 per round takes log(4)/log(1.5) = 3.4 rounds at the cap, not
 * 2). Rounds are counted as the algorithm counts them (round_start).
 * Afterwards the time-average over the last 40% of the run must be
 * within 10% of the new target, as for the steady-state cases.
 */
static bool step_case(double mbit, double factor, char *out, size_t len)
{
	struct cfg c = mklink(mbit, 40, 1448, 500);
	struct result r;
	double t0, t1, bound, err;

	c.fifo = (u32)(4 * bdp_pkts(&c, (u64)(mbit * 1e6 * max(factor, 1.0))) +
		       8 / 0.5) + 8;
	c.step_at_us = 20 * 1000000ULL;
	c.step_rate_bps = (u64)(mbit * 1e6 * factor);
	c.duration_us = 40 * 1000000ULL;
	c.measure_from_us = 32 * 1000000ULL;
	t0 = target_pkts(&c, c.rate_bps);
	t1 = target_pkts(&c, c.step_rate_bps);
	bound = 3 + ceil(log2(0.5 * fabs(t1 - t0))) + 4;
	run(&c, &r);
	err = (r.cwnd_avg - t1) / t1;
	OUT("target %.0f -> %.0f: within 10%% after %s%u rounds (bound %.0f); then cwnd_avg %.1f (%+.1f%%) util %.3f",
	    t0, t1, r.step_reached ? "" : "never, ", r.step_rounds, bound,
	    r.cwnd_avg, 100 * err, r.util);
	return r.step_reached && r.step_rounds <= bound && fabs(err) <= 0.1;
}

static bool step_down_x4_100mbit(char *out, size_t len)
{
	return step_case(100, 0.25, out, len);
}

static bool step_up_x4_100mbit(char *out, size_t len)
{
	return step_case(25, 4, out, len);
}

static bool step_down_x4_1gbit(char *out, size_t len)
{
	return step_case(1000, 0.25, out, len);
}

/*
 * A host's scheduling delay as veth has it: every ACK 20 us late, but
 * that of a packet sent with nothing in flight (a packet and its ACK
 * handled in one softirq pass), on a 10 Gbit/s path of 4 us, delta 0.02.
 * RTTmin keeps the first packet's 4 us, RTTstanding reads the usual 24:
 * dq reads 20 us of jitter at all times. Copa must still fill the link:
 * utilisation at least 0.9 over the last 40% (0.09 when the BDP bound
 * of copa_target_inv_delta() allowed one packet of queue, as bpf_copa's
 * 0.05 on veth at 10 Gbit/s).
 */
static bool host_jitter_10_gbit(char *out, size_t len)
{
	struct cfg c = mklink(10000, 0.004, 1448, 20);
	struct result r;

	set_duration(&c, 2000);
	c.ack_delay_us = 20;
	run(&c, &r);
	OUT("util %.3f (>= 0.9) cwnd_avg %.1f qdelay_us %.1f", r.util,
	    r.cwnd_avg, r.qdelay_us);
	return r.util >= 0.9;
}

/*
 * Sub-packet progress: with the direction and velocity fixed, the window
 * must move by exactly sum(acked * v / (delta * cwnd)) packets, where
 * cwnd is the window before each ACK, however small each step. At cwnd
 * 100,000 and delta 1 a step is 1e-5 packet (COPA_UNIT * cwnd = 2.56e7
 * per packet, against 256 per ACK), so a rounded or truncated step would
 * move nothing at all. Two million ACKs of 1 to 3 packets, through
 * copa_update_cwnd() (the per-ACK rule, target unbounded or tiny), up and
 * down, at v = 1 and v = 4, and at delta 0.001: the sum of the steps
 * must equal the exact sum within one packet (the only error is the
 * remainder, below one packet, and its rescaling when cwnd changes).
 */
static double subpacket_run(u32 delta_milli, u32 v, bool up, u32 acks,
			    double *exact_out)
{
	struct copa ca;
	struct copa_ack a = { .cwnd = 100000, .cwnd_clamp = U32_MAX,
			      .mss = 1448, .cwnd_limited = 1 };
	long double exact = 0;
	u32 i;

	copa_reset(&ca, delta_milli, false, 0, a.cwnd, 0);
	copa_exit_slow_start(&ca);
	ca.rtt_min.cur = ca.rtt_min.prev = 100000;
	ca.rtt_standing.cur = ca.rtt_standing.prev = up ? 100000 : 150000;
	ca.dir = up ? COPA_UP : COPA_DOWN;
	ca.velocity = v;
	for (i = 0; i < acks; i++) {
		u32 acked = 1 + i % 3;

		a.acked_sacked = acked;
		exact += (long double)acked * v * ca.inv_delta / COPA_UNIT /
			 a.cwnd;
		copa_update_cwnd(&ca, &a);
		if (ca.velocity != v)
			fail("velocity changed to %u", ca.velocity);
	}
	*exact_out = up ? (double)exact : -(double)exact;
	return (double)a.cwnd - 100000 +
	       (double)ca.cwnd_acc / ((double)COPA_UNIT * a.cwnd);
}

static bool subpacket_progress(char *out, size_t len)
{
	static const struct { u32 dm, v; bool up; } runs[] = {
		{ 1000, 1, true }, { 1000, 1, false }, { 1000, 4, true },
		{ 1000, 4, false }, { 1, 1, true }, { 1, 1, false },
	};
	double worst = 0;
	int n = 0;
	u32 i;

	for (i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		double exact, moved = subpacket_run(runs[i].dm, runs[i].v,
						    runs[i].up, 2000000, &exact);
		double err = fabs(moved - exact);

		if (err > worst)
			worst = err;
		n += snprintf(out + n, len - n, "%sdelta %g v %u %s: %.4f vs %.4f",
			      i ? "; " : "", runs[i].dm / 1000.0, runs[i].v,
			      runs[i].up ? "up" : "down", moved, exact);
	}
	snprintf(out + n, len - n, "; worst error %.2g packet", worst);
	return worst < 1;
}

/*
 * Nothing overflows or wraps: the clock starts 2 s before 2^32 us, so it
 * crosses 2^32 us (where the RTT filters' u32 timestamps wrap) at 2 s, in
 * the middle of the run; 524 Gbit/s, 100 ms, MSS 65483: a BDP of 100,000
 * packets of 64 KB, 6.5 GB per round trip. check_ack() verifies every
 * output on every ACK. The same run with the clock starting at 0 must
 * give exactly the same result (ACK count, cwnd minimum, maximum and
 * time-average, delivered): only time differences may matter. How well
 * Copa fills a 100,000-packet path is win_86000_pkts's business.
 */
static bool clock_wrap_100k_pkts_mss_65483(char *out, size_t len)
{
	struct cfg c = mklink(100000.0 * 65483 * 8 / 0.1 / 1e6, 100, 65483,
			      500);
	struct result r, r0;

	c.duration_us = 5000000;
	c.measure_from_us = 3000000;
	run(&c, &r0);
	c.clock_base_us = (1ULL << 32) - 2000000;
	run(&c, &r);
	OUT("crossed 2^32 us: %s; %llu ACKs checked; cwnd min %u max %u avg %.0f (BDP %.0f) util %.3f; clock from 0: %s",
	    r.crossed_2_32 ? "yes" : "no", (unsigned long long)r.acks,
	    r.cwnd_min, r.cwnd_max, r.cwnd_avg, bdp_pkts(&c, c.rate_bps),
	    r.util, r0.acks == r.acks && r0.cwnd_min == r.cwnd_min &&
	    r0.cwnd_max == r.cwnd_max && r0.cwnd_avg == r.cwnd_avg &&
	    r0.util == r.util ? "identical" : "DIFFERENT");
	return r.crossed_2_32 && r0.acks == r.acks &&
	       r0.cwnd_min == r.cwnd_min && r0.cwnd_max == r.cwnd_max &&
	       r0.cwnd_avg == r.cwnd_avg && r0.util == r.util;
}

/*
 * An application that sends one small packet before its data (iperf3's
 * cookie on its data connection; a request): 12 Mbit/s, 50 ms, FIFO of
 * 1 BDP, the data from 200 ms on. The first round of data goes out with
 * the initial window (copa_on_tx_start()), not the one packet per RTT
 * the cookie's rate sample measured: at least 0.6 of the link over the
 * data's first 8 round trips. Capped at the sample, slow start began at
 * 2 packets and moved 0.39.
 */
static bool start_after_small_packet(char *out, size_t len)
{
	struct cfg c = mklink(12, 50, 1448, 500);
	struct result r;

	c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
	c.bulk_at_us = 200000;
	c.measure_from_us = c.bulk_at_us;
	c.duration_us = c.bulk_at_us + 8 * c.rtt_us;
	run(&c, &r);
	OUT("util %.3f (>= 0.6) over the first 8 RTTs of data; cwnd max %u",
	    r.util, r.cwnd_max);
	return r.util >= 0.6;
}

/*
 * Reordering is not a limit (copa_undo_limit()): delta 0.04 on a
 * 1 Gbit/s, 1 ms path (veth's case, scaled to what the model runs in
 * seconds), and the VM's low-delay link, 12 Mbit/s, 40 ms, a 4 BDP FIFO,
 * delta 0.5. Once in 1,000 packets on average, 4 in a row arrive past
 * RACK's reordering window: marked lost, each such recovery is undone
 * when it ends. No hold in 8 seeds of 30 s each, and utilisation at
 * least 0.9 over the last 12 s. Before undo forgot the limited rounds
 * of spurious losses, two of them at the link's own rate read as a
 * policer: 28 holds at 1 Gbit/s (none at 12 Mbit/s in the model, where
 * the VM showed one). Behind the loss matrix's policers, with the same
 * reordering (MODEL_REORDER=0.001, 4 seeds), retransmissions moved by
 * -0.16 to +0.01 points.
 */
static bool reordering_holds_nothing(char *out, size_t len)
{
	static const struct { double mbit, rtt_ms; u32 delta; } links[] = {
		{ 12, 40, 500 }, { 1000, 1, 40 },
	};
	u32 holds[2] = { 0 }, undos = 0, l, seed;
	double util_min = 1;

	for (l = 0; l < 2; l++) {
		struct cfg c = mklink(links[l].mbit, links[l].rtt_ms, 1448,
				      links[l].delta);
		struct result r;

		c.reorder = 1.0 / 1000;
		c.reorder_len = 4;
		c.duration_us = 30000000;
		c.measure_from_us = 18000000;
		for (seed = 1; seed <= 8; seed++) {
			c.seed = seed;
			run(&c, &r);
			holds[l] += r.holds;
			undos += r.undos;
			util_min = fmin(util_min, r.util);
		}
	}
	OUT("12/40 d0.5: %u holds; 1000/1 d0.04: %u holds; %u undone, util min %.3f (>= 0.9)",
	    holds[0], holds[1], undos, util_min);
	return !holds[0] && !holds[1] && undos && util_min >= 0.9;
}

/*
 * Recovery after the loss reaction: 1 Gbit/s, 120 ms (10,360 packets),
 * FIFO of 1 BDP, loss_reaction 5 (the default). At 20 s, for one RTT, a
 * burst drops 20% of the packets and delays the rest by half an RTT, as
 * a buffer-filler's queue would: losses with a standing queue, 10% of a
 * two-round loss window, over 5%, so Copa cuts cwnd by 30% and halves
 * 1/delta. Utilisation, measured per propagation RTT from the cut, must
 * reach 90% within 20 RTTs (issue 9).
 */
static bool recovery_after_cut_10k_pkts(char *out, size_t len)
{
	struct cfg c = mklink(1000, 120, 1448, 500);
	struct result r;

	c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
	c.burst_at_us = 20000000;
	c.burst_len_us = c.rtt_us;
	c.burst_loss = 0.2;
	c.burst_delay_us = c.rtt_us / 2;
	c.duration_us = 20000000 + 60 * c.rtt_us;
	c.measure_from_us = 20000000 + 20 * c.rtt_us;
	run(&c, &r);
	if (!r.cut_at_ps) {
		OUT("no cut seen; cwnd_avg %.0f", r.cwnd_avg);
		return false;
	}
	OUT("cut at %.3f s from %u to %u; util >= 0.9 after %d RTTs (bound 20); util from RTT 20 to 60: %.3f",
	    r.cut_at_ps / 1e12, r.cut_from, r.cut_to, r.recover_rtts, r.util);
	return r.recover_rtts >= 0 && r.recover_rtts <= 20;
}

/*
 * Slow start's overshoot (10 Mbit/s, 100 ms, a FIFO of 1 BDP, delta 0.5,
 * the light-loss link of test_copa_link without its loss): slow start
 * ends about a round after the queue appears, with about a BDP on its way
 * into the queue. The overshoot lands in the next round (about 1.6 RTTmin
 * long then) and must be gone two rounds later: no queue over RTTmin / 4
 * (a standing queue to copa_queue_standing) after 5 RTTmin; and a lone
 * flow must never enter competitive mode. Drained at v = 1 (2 packets a
 * round at first) the queue stood for 10.7 RTTmin, and competitive mode
 * began; in the VM that episode and its end ran into false policer holds.
 */
static bool slow_start_overshoot_drains(char *out, size_t len)
{
	struct cfg c = mklink(10, 100, 1448, 500);
	double rounds;
	struct result r;

	c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
	c.duration_us = 10000000;
	c.measure_from_us = 5000000;
	run(&c, &r);
	rounds = ((double)r.standing_ps - r.ss_end_ps) / 1e6 / c.rtt_us;
	OUT("slow start ended at %.2f s, cwnd %u (BDP %.0f); the last queue over RTTmin / 4 %.1f RTTmin later (bound 5); %llu ACKs in competitive mode (bound 0); util %.3f",
	    r.ss_end_ps / 1e12, r.ss_end_cwnd, bdp_pkts(&c, c.rate_bps),
	    rounds, (unsigned long long)r.competitive_acks, r.util);
	return rounds <= 5 && !r.competitive_acks &&
	       r.util >= 0.95;
}

/*
 * A route whose base RTT doubles (40 to 80 ms at 20 s, 12 Mbit/s, the
 * default FIFO of 4 BDP, delta 0.5) looks to Copa like a buffer-filler's
 * standing queue: dq never comes near 0 again, competitive mode starts
 * and RTTmin is kept (copa_rtt_min_keep_half()). That is what lets Copa
 * compete with cubic; here the hold must end. Two minutes after the
 * change the stale RTTmin must still be there (the hold is on); within
 * the 10 minute window plus one 10 s window RTTmin must exceed the new
 * path's RTT, and by the end competitive mode must be over and the queue
 * below 20 ms (the hold kept about 90 ms queued). RTTmin then holds the
 * new path plus the least queue of the hold's last window, which a lone
 * Copa keeps (it cannot see below it); the 10 s window without the hold
 * ends the same way, at 98.5 ms with 19.8 ms queued.
 */
static bool rtt_min_hold_ends_after_route_change(char *out, size_t len)
{
	struct cfg c = mklink(12, 40, 1448, 500);
	u64 step_us = 20 * (u64)COPA_USEC_PER_SEC;
	u32 bound_s = (COPA_RTT_MIN_HOLD_US + COPA_RTT_MIN_WIN_US) /
		      COPA_USEC_PER_SEC;
	double grew_s, qd_ms;
	struct result r;

	c.burst_at_us = step_us;
	c.burst_delay_us = c.rtt_us;
	c.duration_us = step_us + bound_s * (u64)COPA_USEC_PER_SEC +
			120 * (u64)COPA_USEC_PER_SEC;
	c.burst_len_us = c.duration_us;
	c.sample_at_us = step_us + 120 * (u64)COPA_USEC_PER_SEC;
	c.measure_from_us = c.duration_us - 60 * (u64)COPA_USEC_PER_SEC;
	run(&c, &r);
	grew_s = r.rtt_min_grew_ps ? r.rtt_min_grew_ps / 1e12 - 20 : -1;
	qd_ms = r.qdelay_us / 1000;
	OUT("RTTmin %.1f ms (competitive %d) 2 min after; over 80 ms after %.0f s (bound %u); at the end %.1f ms, competitive %d, queue in the last minute %.1f ms (bound 20)",
	    r.sample_rtt_min / 1e3, r.sample_competitive, grew_s, bound_s,
	    r.end_rtt_min / 1e3, r.end_competitive, qd_ms);
	return r.sample_competitive &&
	       r.sample_rtt_min < c.rtt_us + c.burst_delay_us / 2 &&
	       grew_s > 0 && grew_s <= bound_s && !r.end_competitive &&
	       qd_ms < 20;
}

/*
 * Policer hold: a 10 Gbit/s, 40 ms link policed at 1 Gbit/s (token
 * bucket, burst max(100 KB, 4 packets)), with the detector's defaults
 * (loss_thresh 1, rate_tol 12, hold_rounds 48, as both modules). A hold
 * must start, and throughout every hold cwnd must stay within 2x of the
 * policed BDP (1 Gbit/s x RTTmin): the hold sets 1.5x the BDP of the
 * measured rate, which must not exceed the policed rate. The asserted
 * run has loss_reaction=0, the paper's algorithm; the default's is
 * printed as "default: N holds".
 */
static bool policer_case(u32 mss, char *out, size_t len)
{
	struct cfg c = mklink(10000, 40, mss, 500);
	struct result r, rdef;
	double bdp_p;

	c.police_bps = 1000000000ULL;
	c.police_burst = max(100000ULL, 4ULL * mss);
	c.duration_us = 10000000;
	c.measure_from_us = 6000000;
	run(&c, &rdef);
	c.loss_reaction = 0;
	run(&c, &r);
	bdp_p = (double)c.police_bps * (c.rtt_us + 8.0 * mss * 1e6 /
					c.rate_bps) / 1e6 / 8 / mss;
	if (!r.holds) {
		OUT("no hold; policed BDP %.1f, cwnd_avg %.1f, lost %u; default: %u holds",
		    bdp_p, r.cwnd_avg, r.lost, rdef.holds);
		return false;
	}
	OUT("%u holds, policed BDP %.1f pkts; cwnd in holds %u..%u (%.3fx..%.3fx); held at %.3f Gbit/s; lost %u of %llu; default: %u holds, lost %u of %llu",
	    r.holds, bdp_p, r.hold_cwnd_min, r.hold_cwnd_max,
	    r.hold_cwnd_min / bdp_p, r.hold_cwnd_max / bdp_p,
	    r.hold_rate * 8 / 1e9, r.lost, (unsigned long long)r.sent,
	    rdef.holds, rdef.lost, (unsigned long long)rdef.sent);
	return r.hold_cwnd_max <= 2 * bdp_p && r.hold_cwnd_min >= bdp_p / 2;
}

static bool policer_hold_mss_8948(char *out, size_t len)
{
	return policer_case(8948, out, len);
}

static bool policer_hold_mss_65483(char *out, size_t len)
{
	return policer_case(65483, out, len);
}

/* ---------------------------------------------------------------------
 * The loss links of issue 10: policers, random loss, a shallow FIFO.
 */
struct loss_link {
	const char *name;
	double	mbit, rtt_ms, police_mbit, loss;
	u32	burst, fifo;	/* bytes; packets (0: 1 BDP) */
	u32	delta_milli;	/* 0: 500 */
};

static const struct loss_link loss_links[] = {
	{ "police 4 on 20/40", 20, 40, 4, 0, 20000, 0, 0 },
	{ "police 6 on 30/30", 30, 30, 6, 0, 30000, 0, 0 },
	{ "police 3 on 24/40", 24, 40, 3, 0, 20000, 0, 0 },
	{ "police 12 on 24/40", 24, 40, 12, 0, 20000, 0, 0 },
	{ "police 100 on 1000/40", 1000, 40, 100, 0, 200000, 0, 0 },
	{ "loss 1% 12/50", 12, 50, 0, 0.01, 0, 0, 0 },
	{ "loss 2% 12/50", 12, 50, 0, 0.02, 0, 0, 0 },
	{ "loss 5% 12/50", 12, 50, 0, 0.05, 0, 0, 0 },
	{ "loss 2% 20/40", 20, 40, 0, 0.02, 0, 0, 0 },
	{ "loss 5% 20/40", 20, 40, 0, 0.05, 0, 0, 0 },
	{ "loss 1% 1000/40", 1000, 40, 0, 0.01, 0, 0, 0 },
	{ "fifo 1 pkt 12/40", 12, 40, 0, 0, 0, 1, 0 },
	{ "fifo 5 pkt 12/40 d0.1", 12, 40, 0, 0, 0, 5, 100 },
	{ "fifo 1 pkt 100/20", 100, 20, 0, 0, 0, 1, 0 },
	{ "fifo 16 pkt 12/40 d0.05", 12, 40, 0, 0, 0, 16, 50 },
	{ "fifo 12 pkt 24/40 d0.05", 24, 40, 0, 0, 0, 12, 50 },
	{ "fifo 1 BDP 12/40", 12, 40, 0, 0, 0, 0, 0 },
	{ "fifo 12 pkt 50/20 d0.05", 50, 20, 0, 0, 0, 12, 50 },
	{ "fifo 8 pkt 24/40 d0.05", 24, 40, 0, 0, 0, 8, 50 },
	{ "fifo 10 pkt 12/40 d0.05", 12, 40, 0, 0, 0, 10, 50 },
	{ "fifo 8 pkt 12/100 d0.1", 12, 100, 0, 0, 0, 8, 100 },
	{ "fifo 8 pkt 24/100 d0.1", 24, 100, 0, 0, 0, 8, 100 },
};

/* The longest an emulator's stall holds up ACKs (cfg.stall_us). */
#define STALL_US	10000

/* A loss link and the most a case lets Copa retransmit on it. */
struct link_bound {
	const char *link;
	double max_retrans;
};

static struct cfg loss_cfg(const struct loss_link *l, u32 loss_reaction,
			   bool detect)
{
	struct cfg c = mklink(l->mbit, l->rtt_ms, 1448,
			      l->delta_milli ? l->delta_milli : 500);

	c.police_bps = (u64)(l->police_mbit * 1e6);
	c.police_burst = l->burst;
	c.loss = l->loss;
	c.fifo = l->fifo ? l->fifo : (u32)bdp_pkts(&c, c.rate_bps);
	c.loss_reaction = loss_reaction;
	c.no_detect = !detect;
	if (getenv("MODEL_ACK2"))	/* delayed ACKs and 0.5 ms jitter */
		c.ack_every = 2, c.jitter_us = 500;
	if (getenv("MODEL_REORDER"))	/* reorderings of 4 packets */
		c.reorder = atof(getenv("MODEL_REORDER")), c.reorder_len = 4;
	if (getenv("MODEL_STALL"))	/* ACKs held up to STALL_US */
		c.stall = atof(getenv("MODEL_STALL")), c.stall_us = STALL_US;
	c.duration_us = 30000000;
	c.measure_from_us = 5000000;
	if (getenv("MODEL_START"))	/* the first MODEL_START seconds */
		c.duration_us = 1000000ULL * atoi(getenv("MODEL_START")),
		c.measure_from_us = 0;
	return c;
}

/* Utilisation of the policed rate, or of the link if none. */
static double loss_util(const struct loss_link *l, const struct result *r)
{
	return l->police_mbit ? r->util * l->mbit / l->police_mbit : r->util;
}

/* The seed of the @k-th run of a link: 0 (the default) for the first. */
static u64 loss_seed(u32 k)
{
	return k ? 0x9e3779b97f4a7c15ULL * (k + 1) : 0;
}

static void loss_matrix(const char *only)
{
	u32 seeds = getenv("MODEL_SEEDS") ? atoi(getenv("MODEL_SEEDS")) : 1;
	u32 first = getenv("MODEL_SEED0") ? atoi(getenv("MODEL_SEED0")) : 0;

	static const struct { const char *name; u32 lr; bool pol; } vs[] = {
		{ "copa", 5, true }, { "copa lr=0", 0, true },
		{ "copa nodetect", 5, false }, { "copa nodetect lr=0", 0, false },
	};
	u32 i, j;

	for (i = 0; i < sizeof(loss_links) / sizeof(loss_links[0]); i++) {
		const struct loss_link *l = &loss_links[i];
		double cap = l->police_mbit ? l->police_mbit : l->mbit;

		if (only && !strstr(l->name, only))
			continue;
		for (j = 0; j < sizeof(vs) / sizeof(vs[0]); j++) {
			struct cfg c = loss_cfg(l, vs[j].lr, vs[j].pol);
			double util = 0, lo = 1e9, retrans = 0, q = 0;
			u32 holds = 0, k;
			struct result r;

			for (k = 0; k < seeds; k++) {
				c.seed = loss_seed(k + first);
				run(&c, &r);
				util += loss_util(l, &r) / seeds;
				lo = fmin(lo, loss_util(l, &r));
				retrans += 100.0 * r.dropped / r.sent / seeds;
				q += r.qdelay_us / 1000 / seeds;
				holds += r.holds;
			}
			printf("%-22s %-18s util %.3f (min %.3f) of %5.1f  retrans %6.2f%%  qdelay %7.2f ms  holds %u\n",
			       l->name, vs[j].name, util, lo, cap, retrans, q,
			       holds);
			fflush(stdout);
		}
	}
}

/*
 * Losses told apart (issue 10), on the links of loss_links[], 30 s, the
 * first 5 s not measured, with the loss reaction at its default (5) and
 * off: behind a policer Copa must hold near the policed rate with little
 * loss; under random loss it must keep the link (the paper's Copa, which
 * ignores loss, gets 0.99 on these links; a loss reaction that takes it
 * for congestion got 0.28 at 5%); on a FIFO of one packet it must keep
 * the link without overflowing it every round.
 */
/* The loss link named @name; fail() and NULL if there is none. */
static const struct loss_link *loss_link_named(const char *name)
{
	u32 i;

	for (i = 0; i < sizeof(loss_links) / sizeof(loss_links[0]); i++)
		if (!strcmp(loss_links[i].name, name))
			return &loss_links[i];
	fail("no link %s", name);
	return NULL;
}

static bool loss_case(const char *link, double min_util, double max_retrans,
		      char *out, size_t len)
{
	static const u32 lrs[] = { 5, 0 };
	const struct loss_link *l = loss_link_named(link);
	bool ok = true;
	int n = 0;
	u32 j;

	if (!l)
		return false;
	for (j = 0; j < 2; j++) {
		struct cfg c = loss_cfg(l, lrs[j], true);
		struct result r;
		double util, retrans;

		run(&c, &r);
		util = loss_util(l, &r);
		retrans = (double)r.dropped / r.sent;
		n += snprintf(out + n, len - n,
			      "%sloss_reaction %u: util %.3f (>= %.2f) retrans %.2f%% (<= %.1f%%) holds %u",
			      j ? "; " : "", lrs[j], util, min_util,
			      100 * retrans, 100 * max_retrans, r.holds);
		ok &= util >= min_util && retrans <= max_retrans;
	}
	return ok;
}

#define LOSS_CASE(fname, link, min_util, max_retrans)			\
static bool fname(char *out, size_t len)				\
{									\
	return loss_case(link, min_util, max_retrans, out, len);	\
}

LOSS_CASE(policer_4_on_20_mbit, "police 4 on 20/40", 0.95, 0.03)
LOSS_CASE(policer_100_on_1000_mbit, "police 100 on 1000/40", 0.95, 0.03)
LOSS_CASE(policer_12_on_24_mbit, "police 12 on 24/40", 0.95, 0.012)
LOSS_CASE(random_loss_5pct, "loss 5% 12/50", 0.9, 0.06)
LOSS_CASE(random_loss_1pct_1000_mbit, "loss 1% 1000/40", 0.9, 0.015)
LOSS_CASE(fifo_1_pkt, "fifo 1 pkt 12/40", 0.95, 0.015)
LOSS_CASE(fifo_5_pkts_delta_0_1, "fifo 5 pkt 12/40 d0.1", 0.95, 0.015)

/*
 * The round a probe ends on a full 5-packet FIFO, set up directly (12
 * Mbit/s, RTTmin 40 ms, RTTstanding 44 ms, RTT max 45 ms, srtt 45 ms, delta
 * 0.1): 60 packets sent, 40 delivered and 5 lost in 44 ms (1.32 MB/s,
 * 40 packets in RTTstanding), and a limit sample a quarter below that
 * rate, so the two disagree. With the buffer full it holds at once at
 * the round's rate (copa_short_buffer_over()); with the queue empty
 * (RTTstanding at RTTmin) the round only becomes the new sample. In the
 * VM such rounds, reading rates up to a fifth apart, kept a probe at a
 * full FIFO for 14 rounds before two agreed.
 */
static void short_buffer_round(u32 standing_us, struct copa *ca, u32 *rate)
{
	struct copa_ack a = {
		.now_us = 10000000 + 44000, .srtt_us = 45000, .cwnd = 60,
		.cwnd_clamp = COPA_MAX_CWND, .mss = 1448,
		.delivered = 1000 + 40, .lost = 100 + 5, .rtt_us = -1,
	};

	copa_reset(ca, 100, true, 5, 60, 0);
	ca->slow_start = 0;
	ca->round_slow_start = 0;
	ca->rtt_min = (struct copa_win){ 40000, 40000, 10000000 };
	ca->rtt_standing = (struct copa_win){ standing_us, standing_us,
					      10000000 };
	ca->rtt_max = (struct copa_win){ 45000, 45000, 10000000 };
	ca->next_round_delivered = 1000;
	ca->round_start_us = 10000000;
	ca->round_start_lost = 100;
	ca->round_drop = 1;
	*rate = copa_round_rate(ca, &a);
	ca->limit_rate = copa_rate_store(*rate / 4 * 3);
	ca->limit_cwnd = 45;
	copa_detect_limit(ca, &a, 60);
}

static bool short_buffer_overflow_holds(char *out, size_t len)
{
	struct copa full, empty;
	u32 rate;

	short_buffer_round(44000, &full, &rate);
	short_buffer_round(40000, &empty, &rate);
	/* Stored rates keep whole units of 2^COPA_RATE_SHIFT bytes/s. */
	u64 stored = copa_rate_load(copa_rate_store(rate));

	OUT("round at %u B/s, sample %u B/s: full FIFO holds %llu B/s; empty queue holds %llu, new sample %llu B/s",
	    rate, rate / 4 * 3, (unsigned long long)copa_held_rate(&full),
	    (unsigned long long)copa_held_rate(&empty),
	    (unsigned long long)copa_rate_load(empty.limit_rate));
	return copa_held_rate(&full) == stored && !copa_held_rate(&empty) &&
	       copa_rate_load(empty.limit_rate) == stored;
}

/*
 * A FIFO shorter than Copa's target, full while Copa no longer grows,
 * holds (copa_short_buffer_full()): at delta 0.05, 10 packets at
 * 12 Mbit/s and 12 at 50 Mbit/s, each at most 0.6 % retransmitted in
 * 30 s, its start included. Counting only growth past a plateau, Copa sat
 * above the FIFO and lost about a sixth of each window between holds:
 * 1.99 and 1.40 %. At 100 ms and delta 0.1, 8 packets at 12 and
 * 24 Mbit/s, at most 3 %: with the RTT's sixteenth (6.3 ms) as the floor
 * of a full buffer's queue, 11.63 and 3.98 % (2.00 and 1.72 % with two
 * packets' time).
 */
static bool short_fifo_flat_overflow_holds(char *out, size_t len)
{
	static const struct link_bound links[] = {
		{ "fifo 10 pkt 12/40 d0.05", 0.006 },
		{ "fifo 12 pkt 50/20 d0.05", 0.006 },
		{ "fifo 8 pkt 12/100 d0.1", 0.03 },
		{ "fifo 8 pkt 24/100 d0.1", 0.03 },
	};
	char part[256];
	bool ok = true;
	int n = 0;
	u32 i;

	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		ok &= loss_case(links[i].link, 0.95, links[i].max_retrans,
				part, sizeof(part));
		n += snprintf(out + n, len - n, "%s%s: %s", i ? "; " : "",
			      links[i].link, part);
	}
	return ok;
}

/*
 * A full short buffer is told apart under ACKs held up by a host's
 * stalls (cfg.stall: 2 % of ACKs up to 10 ms late, as TCG's vCPUs read;
 * STALL_SEEDS runs each). The stalls push single RTT samples far above
 * the queue, so the highest raw RTT of the last rounds read a spread the
 * buffer never held, and copa_short_buffer_full() stayed false on a full
 * FIFO: a probe sat at Copa's own target and lost for rounds. Measured
 * on the standing RTT (copa_update_rtt()), the spread keeps to the
 * queue. The worst of four runs, raw samples against RTTstanding: 8
 * packets at 100 ms and delta 0.1, 5.75 and 4.82 % retransmitted at 12
 * and 24 Mbit/s against 0.86 and 1.00 %; 10 packets at 12 Mbit/s, 40 ms
 * and delta 0.05, 0.72 against 0.40 %; 5 packets, delta 0.1, 0.40
 * against 0.36 % (there the VM's stalls weigh more: five runs of
 * test_policer_shallow read copa's median 0.57x cubic's retransmissions
 * with it, 1.43x in six before).
 */
#define STALL_SEEDS	4

static bool short_fifo_stalled_acks(char *out, size_t len)
{
	static const struct link_bound links[] = {
		{ "fifo 5 pkt 12/40 d0.1", 0.006 },
		{ "fifo 10 pkt 12/40 d0.05", 0.006 },
		{ "fifo 8 pkt 12/100 d0.1", 0.015 },
		{ "fifo 8 pkt 24/100 d0.1", 0.015 },
	};
	bool ok = true;
	int n = 0;
	u32 i, k;

	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		const struct loss_link *l = loss_link_named(links[i].link);
		struct cfg c;
		double worst = 0, lo = 1e9;
		struct result r;

		if (!l)
			return false;
		c = loss_cfg(l, 5, true);
		c.stall = 0.02;
		c.stall_us = STALL_US;
		for (k = 0; k < STALL_SEEDS; k++) {
			c.seed = loss_seed(k);
			run(&c, &r);
			worst = fmax(worst, (double)r.dropped / r.sent);
			lo = fmin(lo, loss_util(l, &r));
		}
		n += snprintf(out + n, len - n,
			      "%s%s: retrans at most %.2f%% (<= %.1f%%), util min %.3f",
			      n ? "; " : "", l->name, 100 * worst,
			      100 * links[i].max_retrans, lo);
		ok &= worst <= links[i].max_retrans && lo >= 0.9;
	}
	return ok;
}

/*
 * Random loss never holds a rate: on each random-loss link at 12 and
 * 20 Mbit/s, NOISE_SEEDS runs with the default loss reaction must not
 * hold once, and each keeps at least 0.95 of the link. A full link with
 * random loss delivers a flat rate too, but the window it adds waits in
 * the FIFO; counting it as growth past a limit held a rate in 9 of these
 * 40 runs (0.89x the link at worst).
 */
#define NOISE_SEEDS	8

static bool random_loss_never_holds(char *out, size_t len)
{
	bool ok = true;
	int n = 0;
	u32 i, k;

	for (i = 0; i < sizeof(loss_links) / sizeof(loss_links[0]); i++) {
		const struct loss_link *l = &loss_links[i];
		struct cfg c = loss_cfg(l, 5, true);
		double lo = 1e9;
		u32 holds = 0;
		struct result r;

		if (!l->loss || l->mbit > 20)
			continue;
		for (k = 0; k < NOISE_SEEDS; k++) {
			c.seed = loss_seed(k);
			run(&c, &r);
			lo = fmin(lo, loss_util(l, &r));
			holds += r.holds;
		}
		n += snprintf(out + n, len - n, "%s%s: holds %u, util min %.3f",
			      n ? "; " : "", l->name, holds, lo);
		ok &= !holds && lo >= 0.95;
	}
	return ok;
}

/*
 * Slow start's overshoot into a FIFO shorter than Copa's target queue
 * holds at once (copa_hold_start()): on the two short-FIFO links where
 * the initial window fits the FIFO, each of START_SEEDS runs drops at
 * most two BDPs in its first START_US. Growing on from slow start's cut
 * until the detector had two samples dropped 278 and 312 packets (3.4
 * and 3.8 BDPs) there.
 */
#define START_SEEDS	8
#define START_US	3000000

static bool start_holds_short_fifo(char *out, size_t len)
{
	static const char *const links[] = { "fifo 16 pkt 12/40 d0.05",
					     "fifo 12 pkt 24/40 d0.05" };
	bool ok = true;
	int n = 0;
	u32 i, k;

	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		const struct loss_link *l = loss_link_named(links[i]);
		struct cfg c;
		u64 most = 0;
		double bdp;
		struct result r;

		if (!l)
			return false;
		c = loss_cfg(l, 5, true);
		c.duration_us = START_US;
		c.measure_from_us = 0;
		bdp = bdp_pkts(&c, c.rate_bps);
		for (k = 0; k < START_SEEDS; k++) {
			c.seed = loss_seed(k);
			run(&c, &r);
			most = max_t(u64, most, r.dropped);
		}
		n += snprintf(out + n, len - n,
			      "%s%s: at most %llu dropped (<= %.0f)",
			      n ? "; " : "", l->name,
			      (unsigned long long)most, 2 * bdp);
		ok &= most <= 2 * bdp;
	}
	return ok;
}

/*
 * The growth after slow start's loss cut is not a plateau: 2 % random
 * loss at 12 Mbit/s, 50 ms, in the one seed of 32 where slow start ended
 * on a loss at 41 packets (cut to 28, below the 50-packet BDP). The
 * first round after the cut delivered 39 packets; anchored at 28, the
 * window's growth back to 37 at a rate 11 % higher read as a limit, and
 * Copa held 0.61 of the link three times in its first two seconds.
 */
#define CUT_GROWTH_SEED	12

static bool growth_after_cut_never_holds(char *out, size_t len)
{
	const struct loss_link *l = loss_link_named("loss 2% 12/50");
	struct result r;
	struct cfg c;

	if (!l)
		return false;
	c = loss_cfg(l, 5, true);
	c.seed = loss_seed(CUT_GROWTH_SEED);
	run(&c, &r);
	snprintf(out, len, "seed %u: holds %u, util %.3f", CUT_GROWTH_SEED,
		 r.holds, loss_util(l, &r));
	return !r.holds && loss_util(l, &r) >= 0.95;
}

/* ---------------------------------------------------------------------
 * The table for Documentation/copa.rst, "Choosing delta".
 */
static void table(void)
{
	static const double mbits[] = { 10, 100, 1000, 10000 };
	static const u32 deltas[] = { 500, 100, 40, 10 };
	static const char *rule =
		"===========  =====  ============  ===========  ===========";
	u32 i, j;

	printf("%s\nlink         delta  target queue  utilisation  mean qdelay\n%s\n",
	       rule, rule);
	for (i = 0; i < 4; i++) {
		for (j = 0; j < 4; j++) {
			struct cfg c = mklink(mbits[i], 20, 1448, deltas[j]);
			struct result r;
			double q_ms = 1000.0 / deltas[j] * 8 * 1448 * 1e3 /
				      c.rate_bps;
			char q[32];

			c.jitter_us = 20;
			set_duration(&c, 400);
			run(&c, &r);
			if (q_ms >= 1)
				snprintf(q, sizeof(q), "%.1f ms", q_ms);
			else
				snprintf(q, sizeof(q), "%.1f us", q_ms * 1000);
			printf("%-11s  %5.2f  %12s  %11.3f  %8.3f ms\n",
			       mbits[i] >= 1000 ?
			       (mbits[i] >= 10000 ? "10 Gbit/s" : "1 Gbit/s") :
			       (mbits[i] >= 100 ? "100 Mbit/s" : "10 Mbit/s"),
			       deltas[j] / 1000.0, q, r.util,
			       r.qdelay_us / 1000);
			fflush(stdout);
		}
	}
	printf("%s\n", rule);
}

/* ---------------------------------------------------------------------
 * Running the cases: each in its own process, one per CPU at a time.
 */
struct tcase {
	const char *name;
	bool (*fn)(char *out, size_t len);
};

#define CASE(f)	{ #f, f }
static const struct tcase cases[] = {
	CASE(win_2_pkts),
	CASE(win_41_pkts_delta_0_04),
	CASE(win_863_pkts),
	CASE(win_86000_pkts),
	CASE(win_86000_pkts_delta_0_01),
	CASE(mss_536),
	CASE(mss_8948_delta_0_04),
	CASE(mss_65483_delta_1),
	CASE(delta_0_001),
	CASE(delta_1_win_2),
	CASE(delta_0_1_ack_every_2),
	CASE(delta_0_5_random_loss),
	CASE(household_up_0_6_mbit),
	CASE(rtt_samples_missing_and_whole_ms),
	CASE(step_down_x4_100mbit),
	CASE(step_up_x4_100mbit),
	CASE(step_down_x4_1gbit),
	CASE(host_jitter_10_gbit),
	CASE(subpacket_progress),
	CASE(clock_wrap_100k_pkts_mss_65483),
	CASE(start_after_small_packet),
	CASE(reordering_holds_nothing),
	CASE(recovery_after_cut_10k_pkts),
	CASE(rtt_min_hold_ends_after_route_change),
	CASE(slow_start_overshoot_drains),
	CASE(policer_hold_mss_8948),
	CASE(policer_hold_mss_65483),
	CASE(policer_4_on_20_mbit),
	CASE(policer_100_on_1000_mbit),
	CASE(policer_12_on_24_mbit),
	CASE(random_loss_5pct),
	CASE(random_loss_never_holds),
	CASE(growth_after_cut_never_holds),
	CASE(start_holds_short_fifo),
	CASE(short_fifo_flat_overflow_holds),
	CASE(short_fifo_stalled_acks),
	CASE(short_buffer_overflow_holds),
	CASE(random_loss_1pct_1000_mbit),
	CASE(fifo_1_pkt),
	CASE(fifo_5_pkts_delta_0_1),
};
#define NCASES	(sizeof(cases) / sizeof(cases[0]))

struct job {
	pid_t pid;
	int fd;
	char buf[1024];
	size_t n;
	int status;
	double secs;
	struct timespec start;
};

static double since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (b.tv_sec - a->tv_sec) + (b.tv_nsec - a->tv_nsec) / 1e9;
}

static void start_job(struct job *j, const struct tcase *tc)
{
	int p[2];

	if (pipe(p))
		fail("pipe: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &j->start);
	j->pid = fork();
	if (j->pid < 0)
		fail("fork: %s", strerror(errno));
	if (!j->pid) {
		char out[900];
		bool ok;

		close(p[0]);
		out[0] = 0;
		ok = tc->fn(out, sizeof(out));
		if (write(p[1], out, strlen(out)) < 0)
			_exit(2);
		_exit(ok ? 0 : 1);
	}
	close(p[1]);
	j->fd = p[0];
}

static void finish_job(struct job *j)
{
	ssize_t n;

	while ((n = read(j->fd, j->buf + j->n, sizeof(j->buf) - 1 - j->n)) > 0)
		j->n += n;
	j->buf[j->n] = 0;
	close(j->fd);
	if (waitpid(j->pid, &j->status, 0) < 0)
		fail("waitpid: %s", strerror(errno));
	j->secs = since(&j->start);
}

static int check(int argc, char **argv)
{
	static struct job jobs[NCASES];
	u32 sel[NCASES], nsel = 0, i, next = 0, done = 0, passed = 0;
	long par = sysconf(_SC_NPROCESSORS_ONLN);
	const char *env = getenv("MODEL_JOBS");

	if (env)
		par = atol(env);
	if (par < 1)
		par = 1;
	for (i = 0; i < NCASES; i++) {
		int k;
		bool want = argc == 0;

		for (k = 0; k < argc; k++)
			want |= !strcmp(argv[k], cases[i].name);
		if (want)
			sel[nsel++] = i;
	}
	if (!nsel) {
		fprintf(stderr, "model: no such case\n");
		return 2;
	}
	printf("KTAP version 1\n1..%u\n", nsel);
	fflush(stdout);
	/* start up to par jobs; report in order as they complete */
	while (done < nsel) {
		while (next < nsel && next - done < (u32)par)
			start_job(&jobs[next], &cases[sel[next]]), next++;
		finish_job(&jobs[done]);
		{
			struct job *j = &jobs[done];
			bool ok = WIFEXITED(j->status) &&
				  WEXITSTATUS(j->status) == 0;

			if (WIFSIGNALED(j->status))
				snprintf(j->buf, sizeof(j->buf),
					 "crashed with signal %d (see stderr)",
					 WTERMSIG(j->status));
			printf("%s %u %s # %s (%.1f s)\n", ok ? "ok" : "not ok",
			       done + 1, cases[sel[done]].name, j->buf,
			       j->secs);
			fflush(stdout);
			passed += ok;
		}
		done++;
	}
	printf("%u passed, %u failed\n", passed, nsel - passed);
	return passed == nsel ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "losses")) {
		loss_matrix(argc > 2 ? argv[2] : NULL);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "table")) {
		table();
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "check"))
		argc--, argv++;
	return check(argc - 1, argv + 1);
}
