// SPDX-License-Identifier: GPL-2.0
/*
 * User-space model test of Copa: the real algorithm (tcp_copa_algo.h, the
 * same file the kernel modules and the BPF build compile) driven by a
 * packet-level model of one bottleneck, the way tcp_copa.c drives it.
 *
 *   model [check] [CASE...]   run the test cases (default all but the
 *                             pending ones), KTAP-ish
 *   model table               the "Choosing delta" table of results.rst
 *   model losses [NAME]       the loss links (issue 10), every variant
 *   model noise               the timing-noise grid (issue 36), the table
 *                             of results/issue36-noise-model.md
 *   model noise1 MBIT RTT_MS N  one run of it, noise N of noises[]
 *
 * MODEL_TRACE=1 prints the state at each round start and each hold on
 * stderr, MODEL_NOCOMP=1 turns competitive mode off, MODEL_ACK2=1 makes
 * the loss links' receiver ACK every second packet with 0.5 ms jitter,
 * MODEL_START=S measures the loss links' first S seconds instead of 5 to
 * 30 s, MODEL_SEEDS and MODEL_SEED0 choose how many seeds and from which,
 * MODEL_REORDER=P reorders 4 packets with probability P per packet
 * (cfg.reorder), MODEL_STALL=P holds up an ACK, and those behind it, by
 * up to 10 ms with probability P (cfg.stall). MODEL_PENDING=1 runs the
 * cases that wait for a fix too (PENDING() in cases[]).
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
 *   is acknowledged or lost. There is no RTO with SACK: the model never
 *   stalls long enough for one;
 * - without SACK (cfg.no_sack) the sender is Linux's NewReno: the
 *   receiver ACKs cumulatively, a lost packet is retransmitted under its
 *   own sequence number, a dupACK counts one packet delivered with no
 *   rate sample and no RTT, the third marks the head lost, each partial
 *   ACK the next head; an ACK covering a retransmission has no RTT; a
 *   timeout (srtt + 200 ms, backed off) marks all lost, restarts Copa
 *   (set_state(TCP_CA_Loss)) and retransmits from the head (ack_reno(),
 *   rto_fire());
 * - SACK reneging (cfg.reneg_at_us) enters loss the same way, and every
 *   ACK until recovery ends has no rate sample; cfg.no_rate_every takes
 *   the rate sample off every Nth ACK;
 * - the application writes either without end, or chunks after idle gaps
 *   (cfg.chunk_pkts), marking the rate samples application-limited as
 *   tcp_rate_check_app_limited() does (app_write());
 * - in_ack_event() on every ACK (the model sends no CE marks);
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
#define RTX_LOST	1	/* sim.retx[]: marked lost (TCPCB_LOST), */
#define RTX_SENT	2	/* retransmitted (TCPCB_SACKED_RETRANS), */
#define RTX_EVER	4	/* ever retransmitted: no RTT sample */
#define RTO_MIN_US	200000	/* TCP_RTO_MIN */

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
	u32	agg_us;		/* ACK aggregation (interrupt coalescing): an
				 * ACK waits until agg_us after the first of
				 * its batch, ... */
	u32	agg_bytes;	/* ... or until the batch acknowledges this
				 * much data (GRO's 64 KB); 0: agg_us only */
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
	bool	no_sack;	/* a NewReno receiver: cumulative ACKs only */
	u32	no_rate_every;	/* every Nth ACK carries no rate sample */
	u64	reneg_at_us;	/* the receiver reneges on its SACKs, 0: never */
	u32	chunk_pkts;	/* the application writes this many packets at
				 * a time, 0: unlimited data from the start */
	u32	chunks;		/* ... this many times, ... */
	const u32 *gaps_ms;	/* ... after idle gaps: gaps_ms[k % ngaps]
				 * from the end of the previous chunk */
	u32	ngaps;
	bool	police_shared;	/* other traffic empties the policer's
				 * bucket while the application is idle */
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
	u32	hold_cwnd_min, hold_cwnd_max; /* past slow start's overshoot */
	u64	hold_rate;
	u32	holds;
	u32	undos;		/* reductions undone (reordering) */
	u32	rtos;		/* NewReno's timeouts */
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
	u32	ss_exit_cwnd;	/* cwnd slow start's end left */
	u32	overshoot_lost;	/* lost as the first round after slow start
				 * that lost nothing ended, 0: never */
	u32	ss_exits;	/* slow starts that ended (timeouts restart) */
	double	ss_exit_worst;	/* the lowest cwnd after / before of those */
	u64	hold_rate_min;	/* lowest rate held (bytes/s), 0: no hold */
	u32	comp_inv_min;	/* lowest 1/delta in competitive mode */
	/* chunks of the application: how many, and their goodput */
	u32	chunks_done;
	double	chunk_bps_min;	/* the lowest of a chunk after the first */
	u32	chunk_min_k;	/* which one that was */
	double	chunk_bps_first;
};

/* ---------------------------------------------------------------------
 * The simulation.
 */
struct ackrec {
	u64	at;		/* arrival at the sender, ps */
	u32	seq;		/* newest packet it covers */
	u32	cum;		/* next in-order packet (cfg.no_sack) */
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
	s32	acc_before;	/* cwnd_acc before this ACK, and ... */
	u32	acc_cwnd;	/* ... the window it was last computed for */
	u8	*retx;		/* per packet: RTX_* (cfg.no_sack) */
	u32	sacked_out;	/* NewReno: dupACKs counted, tp->sacked_out */
	u32	lost_out, retrans_out;
	u32	rtx_next, rtx_end; /* NewReno: marked lost, to retransmit */
	u64	rto_at;		/* NewReno's retransmission timer, ps */
	u32	rto_backoff;
	bool	in_loss;	/* TCP_CA_Loss, after a timeout */
	bool	reneged;	/* the receiver reneged (cfg.reneg_at_us) ... */
	bool	is_sack_reneg;	/* ... and recovery from it goes on */

	/* the application (cfg.chunk_pkts) */
	u64	app_written;	/* packets written so far */
	u64	app_write_at;	/* ps of the next write, NEVER: none */
	u32	app_limited;	/* tp->app_limited: a delivered count, 0 */
	u8	*app_lim;	/* per packet: tx.is_app_limited */
	u64	chunk_start;	/* ps of the last write */

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
	u32	rcv_nxt;	/* without SACK: all below received ... */
	u8	*rcv_got;	/* ... and what is above it, per packet */
	u64	rcv_deadline;	/* delayed-ACK timer, ps of arrival */

	/* ACKs on their way back */
	struct ackrec *acks;
	u32	ack_head, ack_tail, ack_mask;
	u64	last_ack_at;
	u32	agg_first;	/* the first ACK of the open batch, ... */
	u32	agg_acked;	/* ... the bytes it acknowledges so far ... */
	u64	agg_release;	/* ... and when it goes, ps; 0: none open */
	u64	agg_before;	/* last_ack_at before it opened */

	/* measurement */
	u64	meas_from;	/* ps */
	u64	cwnd_at;	/* time of the last cwnd change */
	double	cwnd_area;
	u64	meas_delivered_bytes;
	double	qdelay_sum;
	u64	qdelay_n;
	u32	max_rtt_sample, min_rtt_sample;
	u32	round_lost;	/* lost as the last round began */
};

/* xorshift64: the model's one generator, seeded per run (cfg.seed) */
static u64 xorshift(u64 *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* uniform in [0, 1), from the top 53 bits */
static double unit_rand(u64 *x)
{
	return (xorshift(x) >> 11) * (1.0 / 9007199254740992.0);
}

static double urand(struct sim *s)
{
	return unit_rand(&s->rng);
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

/*
 * ACK aggregation (cfg.agg_us): the ACK arriving at @at joins the open
 * batch, which goes to the sender agg_us after its first ACK arrived, or
 * at once when the batch acknowledges agg_bytes; returns when this ACK
 * goes. The batch's ACKs are still in the ring (they go in the future).
 */
static u64 aggregate(struct sim *s, u64 at)
{
	const struct cfg *c = s->c;
	u32 i;

	if (!c->agg_us)
		return at;
	if (!s->agg_release || at > s->agg_release) {
		s->agg_first = s->ack_tail;
		s->agg_acked = 0;
		s->agg_release = at + (u64)c->agg_us * PS_PER_US;
		s->agg_before = s->last_ack_at;
	}
	s->agg_acked += c->mss * c->ack_every;
	if (!c->agg_bytes || s->agg_acked < c->agg_bytes)
		return s->agg_release;
	at = max(at, s->agg_before);
	s->last_ack_at = at;
	for (i = s->agg_first; i != s->ack_tail; i++)
		s->acks[i & s->ack_mask].at = at;
	s->agg_release = 0;
	return at;
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
	at = aggregate(s, at);
	if (at < s->last_ack_at)
		at = s->last_ack_at;	/* ACKs stay in order */
	s->last_ack_at = at;
	if (s->ack_tail - s->ack_head > s->ack_mask)
		fail("ACK ring overflow");
	a = &s->acks[s->ack_tail++ & s->ack_mask];
	a->at = at;
	a->seq = seq;
	a->cum = s->rcv_nxt;
}

static void rcv_flush_timer(struct sim *s)
{
	if (s->rcv_pending) {
		push_ack(s, s->rcv_deadline, s->rcv_last);
		s->rcv_pending = 0;
	}
}

/*
 * Without SACK, the ACK carries only the next in-order packet; one for a
 * packet out of order, or one that fills a hole, goes out at once (as
 * with SACK), the first a duplicate.
 */
static bool receive_cum(struct sim *s, u32 seq)
{
	u32 from = s->rcv_nxt;

	if (copa_before(seq, s->rcv_nxt) || s->rcv_got[seq & s->ring_mask])
		return true;	/* a duplicate: ACKed at once */
	s->rcv_got[seq & s->ring_mask] = 1;
	while (s->rcv_got[s->rcv_nxt & s->ring_mask]) {
		s->rcv_got[s->rcv_nxt & s->ring_mask] = 0;
		s->rcv_nxt++;
	}
	return seq != from || s->rcv_nxt - from > 1;
}

static void receive(struct sim *s, u32 seq, u64 at)
{
	bool hole = seq != s->rcv_expect;

	if (s->rcv_pending && at > s->rcv_deadline)
		rcv_flush_timer(s);
	if (s->c->no_sack)
		hole = receive_cum(s, seq);
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

/*
 * Packets of the application's data on their way or delivered: with SACK
 * the model sends a lost packet's data again as a new packet, so those
 * marked lost do not count; without, snd_nxt is new data only.
 */
static u64 data_out(const struct sim *s)
{
	return s->c->no_sack ? s->snd_nxt : (u64)s->snd_nxt - s->lost;
}

/*
 * The application holds the data back: only its first packet is out
 * (cfg.bulk_at_us), or all it wrote is (cfg.chunk_pkts).
 */
static bool app_waits(const struct sim *s)
{
	if (s->c->chunk_pkts)
		return data_out(s) >= s->app_written;
	return s->snd_nxt && s->t < s->c->bulk_at_us * PS_PER_US;
}

/* When the application next gives data, NEVER if not waiting for it. */
static u64 app_next(const struct sim *s)
{
	if (s->c->chunk_pkts)
		return s->app_write_at;
	return app_waits(s) ? s->c->bulk_at_us * PS_PER_US : NEVER;
}

/* NewReno: the next packet marked lost to retransmit, if any. */
static bool rtx_due(struct sim *s)
{
	if (copa_before(s->rtx_next, s->ack_hi))
		s->rtx_next = s->ack_hi;
	return copa_before(s->rtx_next, s->rtx_end);
}

static bool can_send(struct sim *s)
{
	return s->inflight < s->cwnd && (rtx_due(s) || !app_waits(s)) &&
	       s->snd_nxt - s->ack_hi < s->ring_mask;
}

/*
 * The application writes a chunk (tcp_sendmsg()): first
 * tcp_rate_check_app_limited(), which marks the connection
 * application-limited when all it wrote is sent, no lost packet waits
 * and the window is open: the packets sent until delivery passes the
 * packets delivered and in flight now carry is_app_limited, and so does
 * the rate sample of an ACK whose newest packet does.
 */
static void app_write(struct sim *s)
{
	if (data_out(s) >= s->app_written && !rtx_due(s) &&
	    s->inflight < s->cwnd)
		s->app_limited = (s->delivered + s->inflight) ? : 1;
	s->app_written += s->c->chunk_pkts;
	s->app_write_at = NEVER;
	s->chunk_start = s->t;
	if (s->c->police_shared && s->r->chunks_done) {
		s->tokens = 0;
		s->tokens_at = s->t;
	}
}

/* A chunk is delivered: its goodput, and the next write after a gap. */
static void chunk_done(struct sim *s)
{
	const struct cfg *c = s->c;
	struct result *r = s->r;
	double bps = (double)c->chunk_pkts * c->mss * 8 /
		     ((double)(s->t - s->chunk_start) / PS_PER_S);

	if (!r->chunks_done) {
		r->chunk_bps_first = bps;
	} else if (r->chunks_done == 1 || bps < r->chunk_bps_min) {
		r->chunk_bps_min = bps;
		r->chunk_min_k = r->chunks_done;
	}
	if (getenv("MODEL_TRACE"))
		fprintf(stderr, "t %.3f chunk %u: %.3f Mbit/s\n", s->t / 1e12,
			r->chunks_done, bps / 1e6);
	if (++r->chunks_done < c->chunks)
		s->app_write_at = s->t + (u64)c->gaps_ms[(r->chunks_done - 1) %
							 c->ngaps] * PS_PER_MS;
}

/*
 * CA_EVENT_TX_START: sending starts with nothing in flight (tcp_copa.c's
 * copa_tx_start(), then copa_pace_window()).
 */
static void tx_start(struct sim *s)
{
	u64 rate;

	s->cwnd = copa_on_tx_start(&s->ca, (s->t - s->last_send) / PS_PER_US,
				   s->srtt8 >> 3, s->cwnd, s->rate_delivered,
				   s->rate_interval_us);
	rate = copa_window_pacing_rate(&s->ca, s->cwnd, s->c->mss, s->srtt8 >> 3);
	if (rate)
		s->pacing = rate;
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

/* NewReno's packets in flight: tcp_packets_in_flight(). */
static u32 reno_inflight(const struct sim *s)
{
	return s->snd_nxt - s->ack_hi - s->sacked_out - s->lost_out +
	       s->retrans_out;
}

/* NewReno's retransmission timeout: srtt + TCP_RTO_MIN, backed off. */
static void rto_arm(struct sim *s)
{
	u64 rto = ((u64)(s->srtt8 >> 3) + RTO_MIN_US) * PS_PER_US;

	s->rto_at = s->t + (rto << min(s->rto_backoff, 6U));
}

static void send_one(struct sim *s)
{
	bool rtx = s->c->no_sack && rtx_due(s);
	u32 seq = rtx ? s->rtx_next++ : s->snd_nxt++;
	u32 i = seq & s->ring_mask;

	if (!s->inflight && seq)
		tx_start(s);
	s->last_send = s->t;

	if (!s->inflight)
		s->sync_seq = seq;
	s->send_ps[i] = s->t;
	s->prior_delivered[i] = s->delivered;
	s->app_lim[i] = !!s->app_limited;
	s->r->sent++;
	if (rtx) {
		s->retx[i] |= RTX_SENT | RTX_EVER;
		s->retrans_out++;
	}
	if (s->c->no_sack && (seq == s->ack_hi || s->rto_at == NEVER))
		rto_arm(s);
	s->inflight = s->c->no_sack ? reno_inflight(s) : s->inflight + 1;
	s->dropped[i] = !bottleneck(s, seq);
	if (s->dropped[i] && s->c->no_sack) {
		s->r->dropped++;	/* dupACKs or the timer tell */
	} else if (s->dropped[i]) {
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
		u64 hold_cwnd = copa_hold_cwnd(ca, a);

		/* less slow start's overshoot: copa_conserve() */
		if (a->pacing_rate != copa_held_rate(ca) ||
		    a->cwnd > copa_clamp_cwnd(a, hold_cwnd) ||
		    (a->cwnd != copa_clamp_cwnd(a, hold_cwnd) &&
		     !ca->overshoot))
			fail("hold: pacing %llu cwnd %u, rate %llu cwnd %llu",
			     (unsigned long long)a->pacing_rate, a->cwnd,
			     (unsigned long long)copa_held_rate(ca),
			     (unsigned long long)hold_cwnd);
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
	/*
	 * below one packet of the window it was computed for: this ACK's,
	 * or an earlier one's if this one moved nothing (a dupACK)
	 */
	if (ca->cwnd_acc != s->acc_before)
		s->acc_cwnd = max(a->cwnd, cwnd_before);
	if ((u64)(ca->cwnd_acc < 0 ? -(s64)ca->cwnd_acc : ca->cwnd_acc) >=
	    (u64)COPA_UNIT * max3(a->cwnd, cwnd_before, s->acc_cwnd))
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

/* What one ACK reports, besides the socket's counters (tcp_ack()). */
struct ack_info {
	u32	acked;		/* rs->acked_sacked */
	u32	losses;		/* rs->losses */
	u32	seq;		/* the newest packet delivered: its sample */
	bool	sample;		/* a rate sample (seq delivered, timed) */
	bool	rtt;		/* an RTT sample (seq not retransmitted) */
	bool	tsopt;		/* else one from the timestamp echo, whole ms */
	u32	ts_seq;		/* the packet whose timestamp is echoed */
	u32	goodput;	/* packets delivered in order */
};

/*
 * With SACK: the ACK covers everything up to the packet it was sent for,
 * losses are marked as RACK does, recovery episodes begin and end.
 */
static void ack_sack(struct sim *s, const struct ackrec *ar,
		     struct ack_info *ai)
{
	struct copa *ca = &s->ca;
	u32 spurious = 0, seq;

	for (seq = s->ack_hi; copa_before(seq, ar->seq + 1); seq++) {
		u8 *d = &s->dropped[seq & s->ring_mask];

		spurious += *d == REORDERED;
		if (!*d || *d == REORDERED) {
			*d = 2; /* delivered */
			ai->acked++;
		}
	}
	/* Everything up to the ACK's seq is acknowledged or still a drop. */
	ai->losses = mark_lost(s, ar->seq, false) + s->pending_losses;
	s->pending_losses = 0;
	s->lost += spurious;
	s->ack_hi = ar->seq + 1;
	s->delivered += ai->acked;
	s->inflight -= ai->acked;
	ai->seq = ar->seq;
	ai->sample = true;
	ai->rtt = true;
	ai->goodput = ai->acked;

	/*
	 * tcp_fastretrans_alert(): leave recovery, undoing it if DSACKs
	 * showed every loss in it spurious (undo_cwnd()), or enter it
	 * (ssthresh()).
	 */
	if (s->in_recovery && !copa_before(s->ack_hi, s->recovery_hi) &&
	    s->drop_head == s->drop_tail) {
		s->in_recovery = false;
		s->is_sack_reneg = false;
		if (s->recovery_spurious) {
			s->cwnd = copa_undo(ca, s->cwnd);
			s->r->undos++;
		}
	}
	if ((ai->losses || spurious) && !s->in_recovery) {
		copa_save_prior(ca, s->cwnd);
		s->in_recovery = true;
		s->recovery_spurious = true;
		s->recovery_hi = s->snd_nxt;
	}
	s->recovery_spurious &= !ai->losses;
	ai->losses += spurious;
}

/*
 * SACK reneging (cfg.reneg_at_us): the ACK points at data the receiver
 * had SACKed, and the stack enters loss as on a timeout
 * (tcp_check_sack_reneging(), tcp_enter_loss()): ssthresh(), cwnd one
 * more than in flight once all is marked lost, set_state(TCP_CA_Loss),
 * slow start from there. Until that recovery ends, tcp_rate_gen() gives
 * no rate sample (tp->is_sack_reneg). The model delivers the packets in
 * flight as before; only the sender's view changes.
 */
static void reneg(struct sim *s)
{
	copa_save_prior(&s->ca, s->cwnd);
	s->cwnd = 1;
	copa_restart(&s->ca, s->cwnd, s->delivered);
	s->reneged = true;
	s->is_sack_reneg = true;
	s->in_recovery = true;
	s->recovery_spurious = false;
	s->recovery_hi = s->snd_nxt;
}

/* NewReno marks the head lost and retransmits it: tcp_newreno_mark_lost() */
static void reno_mark_head(struct sim *s, struct ack_info *ai)
{
	u32 i = s->ack_hi & s->ring_mask;

	if (s->retx[i] & RTX_LOST)
		return;
	s->retx[i] |= RTX_LOST;
	s->lost_out++;
	s->lost++;
	ai->losses++;
	s->rtx_next = s->ack_hi;
	s->rtx_end = s->ack_hi + 1;
}

/*
 * Without SACK (cfg.no_sack), as Linux's NewReno: an ACK that moves the
 * cumulative ACK delivers the packets it covers less the dupACKs already
 * counted for them (tcp_remove_reno_sacks()), and its rate sample and
 * RTT are those of the newest packet it covers, but no RTT if it covers
 * a retransmission. A dupACK counts one packet delivered
 * (tcp_add_reno_sack()), with no rate sample and no RTT (tcp_rate_gen():
 * no timed packet was delivered). The third dupACK marks the head lost
 * and starts recovery; each partial ACK in it marks the next head. A
 * lost retransmission waits for the timeout (rto_fire()).
 */
static void ack_reno(struct sim *s, const struct ackrec *ar,
		     struct ack_info *ai)
{
	u32 cum = ar->cum, out = s->snd_nxt - s->ack_hi, seq;

	if (copa_before(s->ack_hi, cum)) {
		u32 n = cum - s->ack_hi;
		bool retrans = false;

		for (seq = s->ack_hi; seq != cum; seq++) {
			u32 i = seq & s->ring_mask;

			s->lost_out -= !!(s->retx[i] & RTX_LOST);
			s->retrans_out -= !!(s->retx[i] & RTX_SENT);
			retrans |= !!(s->retx[i] & RTX_EVER);
			s->retx[i] = 0;
			if (!ai->sample ||
			    s->send_ps[i] >= s->send_ps[ai->seq & s->ring_mask])
				ai->seq = seq;
			ai->sample = true;
			s->dropped[i] = 2;
		}
		ai->acked = n > s->sacked_out ? n - s->sacked_out : 1;
		s->sacked_out = n - 1 >= s->sacked_out ? 0 :
				s->sacked_out - (n - 1);
		out = s->snd_nxt - cum;
		/* tcp_check_reno_reordering(): at most out less the holes */
		if (s->sacked_out + max(s->lost_out, 1U) > out)
			s->sacked_out = out > max(s->lost_out, 1U) ?
					out - max(s->lost_out, 1U) : 0;
		ai->rtt = !retrans;
		ai->tsopt = retrans;
		/*
		 * The receiver echoes the timestamp of the packet that moved
		 * its left edge (tcp_replace_ts_recent()), the one that
		 * filled the hole at the old cumulative ACK, not the newest
		 * it covers, which go-back-N resent moments ago.
		 */
		ai->ts_seq = s->ack_hi;
		ai->goodput = n;
		s->ack_hi = cum;
		s->rto_backoff = 0;
		if (s->ack_hi == s->snd_nxt)
			s->rto_at = NEVER;
		else
			rto_arm(s);
		if (s->in_recovery && !copa_before(cum, s->recovery_hi))
			s->in_recovery = s->in_loss = false;
		else if (s->in_recovery && !s->in_loss &&
			 s->ack_hi != s->snd_nxt)
			reno_mark_head(s, ai);
	} else if (out) {
		/* tcp_limit_reno_sacked(): the holes are not delivered */
		if (s->sacked_out + max(s->lost_out, 1U) < out) {
			s->sacked_out++;
			ai->acked = 1;
		}
		if (!s->in_recovery && s->sacked_out >= 3) {
			copa_save_prior(&s->ca, s->cwnd);
			s->in_recovery = true;
			s->recovery_hi = s->snd_nxt;
			reno_mark_head(s, ai);
		}
	}
	s->delivered += ai->acked;
	s->inflight = reno_inflight(s);
}

/*
 * NewReno's retransmission timeout (tcp_retransmit_timer(),
 * tcp_enter_loss()): ssthresh(), everything in flight marked lost (no
 * ACK reports these), the dupACK count cleared, cwnd one packet more
 * than in flight, set_state(TCP_CA_Loss), and the lot retransmitted in
 * order from the head.
 */
static void rto_fire(struct sim *s)
{
	u32 seq;

	copa_save_prior(&s->ca, s->cwnd);
	for (seq = s->ack_hi; seq != s->snd_nxt; seq++) {
		u8 *x = &s->retx[seq & s->ring_mask];

		/* tcp_mark_skb_lost(): a lost retransmission counts again */
		s->lost += !(*x & RTX_LOST) || (*x & RTX_SENT);
		if (*x & RTX_SENT) {
			*x &= ~RTX_SENT;
			s->retrans_out--;
		}
		if (!(*x & RTX_LOST)) {
			*x |= RTX_LOST;
			s->lost_out++;
		}
	}
	s->sacked_out = 0;
	s->inflight = reno_inflight(s);
	cwnd_account(s);
	s->cwnd = s->inflight + 1;
	copa_restart(&s->ca, s->cwnd, s->delivered);
	s->in_recovery = s->in_loss = true;
	s->recovery_hi = s->snd_nxt;
	s->rtx_next = s->ack_hi;
	s->rtx_end = s->snd_nxt;
	s->r->rtos++;
	s->rto_backoff++;
	rto_arm(s);
}

static void on_ack(struct sim *s, const struct ackrec *ar)
{
	const struct cfg *c = s->c;
	struct copa *ca = &s->ca;
	struct ack_info ai = {};
	struct copa_ack a;
	s32 rtt_us = -1, rs_delivered;
	u32 cwnd_before = s->cwnd;
	bool was_held = copa_held_rate(ca);
	bool was_slow = ca->slow_start;
	u32 i;

	if (c->reneg_at_us && !s->reneged &&
	    s->t >= c->reneg_at_us * PS_PER_US) {
		reneg(s);
		cwnd_before = s->cwnd;
	}
	if (c->no_sack)
		ack_reno(s, ar, &ai);
	else
		ack_sack(s, ar, &ai);
	if (s->t >= s->meas_from)
		s->meas_delivered_bytes += (u64)ai.goodput * c->mss;
	/* tcp_rate_gen(): the application-limited bubble is gone */
	if (s->app_limited && copa_before(s->app_limited, s->delivered))
		s->app_limited = 0;

	i = ai.seq & s->ring_mask;
	s->ack_count++;
	if (ai.tsopt) {
		/*
		 * tcp_ack_update_rtt(): an ACK of retransmitted data is timed
		 * by the timestamp its receiver echoes, the retransmission's,
		 * in whole milliseconds (0 ms is no sample for Copa).
		 */
		rtt_us = (s32)((s->t - s->send_ps[ai.ts_seq & s->ring_mask]) /
			       PS_PER_MS) * 1000;
	} else if (ai.rtt && !(c->no_sample_every &&
			       s->ack_count % c->no_sample_every == 0)) {
		rtt_us = max_t(s64, (s64)(s->t - s->send_ps[i]) /
				    (s64)PS_PER_US, 1);
		if (c->whole_ms_every &&
		    s->ack_count % c->whole_ms_every == 1 && rtt_us >= 1000)
			rtt_us -= rtt_us % 1000;	/* timestamp echo */
	}
	if (rtt_us > 0) {
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
	} else {
		rtt_us = -1;
	}
	rs_delivered = s->delivered - s->prior_delivered[i];
	if (!ai.sample || s->is_sack_reneg ||
	    (c->no_rate_every && s->ack_count % c->no_rate_every == 0))
		rs_delivered = -1;

	a = (struct copa_ack) {
		.now_us		= now_us(s),
		.srtt_us	= s->srtt8 >> 3,
		.cwnd		= s->cwnd,
		.cwnd_clamp	= s->clamp,
		.mss		= c->mss,
		.delivered	= s->delivered,
		.lost		= s->lost,
		.prior_delivered = ai.sample ? s->prior_delivered[i] : 0,
		.rs_delivered	= rs_delivered,
		.acked_sacked	= ai.acked,
		.losses		= ai.losses,
		.in_flight	= s->inflight,
		.rtt_us		= rtt_us,
		.cwnd_limited	= cwnd_limited(s),
		.app_limited	= ai.sample && s->app_lim[i],
	};
	/* in_ack_event(), on every ACK; the model sends no CE marks */
	copa_on_ack_event(ca, false);
	s->acc_before = ca->cwnd_acc;
	copa_on_ack(ca, &a);
	/* tcp_rate_gen() keeps the last valid sample */
	if (rtt_us > 0 && rs_delivered >= 0) {
		s->rate_delivered = a.rs_delivered;
		s->rate_interval_us = rtt_us;
	}
	if (getenv("MODEL_TRACE") && copa_held_rate(ca) && !was_held)
		fprintf(stderr, "t %.3f hold at %llu B/s, cwnd %u (was %u)\n",
			s->t / 1e12, (unsigned long long)copa_held_rate(ca),
			a.cwnd, cwnd_before);
	check_ack(s, &a, cwnd_before, was_held);
	if (getenv("MODEL_TRACE") && s->ca.round_start)
		fprintf(stderr, "t %.3f cwnd %u target %u dq %u standing %u min %u srtt %u v %u inv %u mode %d acked %u lost %u held %llu app %d noise %u\n", s->t/1e12, a.cwnd, a.target, copa_dq_us(ca), copa_win_min(&ca->rtt_standing), copa_win_min(&ca->rtt_min), a.srtt_us, ca->velocity, ca->inv_delta, copa_mode(ca), ai.acked, s->lost, (unsigned long long)copa_held_rate(ca), a.app_limited, ca->noise_us);

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
	if (was_slow && !ca->slow_start) {
		double x = (double)s->cwnd / max(cwnd_before, 1U);

		if (!s->r->ss_exits++ || x < s->r->ss_exit_worst)
			s->r->ss_exit_worst = x;
	}
	if (!ca->slow_start && !s->r->ss_end_ps) {
		s->r->ss_end_ps = s->t;
		s->r->ss_end_cwnd = cwnd_before;
		s->r->ss_exit_cwnd = s->cwnd;
		if (getenv("MODEL_TRACE"))
			fprintf(stderr, "t %.3f slow start ends: cwnd %u -> %u, rs_delivered %d, losses %u\n",
				s->t / 1e12, cwnd_before, s->cwnd,
				rs_delivered, ai.losses);
	}
	/* the first round after slow start's end that lost nothing */
	if (s->r->ss_end_ps && !s->r->overshoot_lost && ca->round_start) {
		if (s->round_lost == s->lost)
			s->r->overshoot_lost = s->lost;
		s->round_lost = s->lost;
	}
	if (copa_dq_us(ca) > copa_win_min(&ca->rtt_min) / 4)
		s->r->standing_ps = s->t;
	s->r->competitive_acks += ca->competitive;
	if (ca->competitive)
		s->r->comp_inv_min = min(s->r->comp_inv_min, ca->inv_delta);
	if (copa_held_rate(ca) && !was_held)
		s->r->holds++;
	if (copa_held_rate(ca) && (!s->r->hold_rate_min ||
				    copa_held_rate(ca) < s->r->hold_rate_min))
		s->r->hold_rate_min = copa_held_rate(ca);
	/* the ACKs whose output a hold set */
	if (copa_held_rate(ca) && was_held) {
		s->r->hold_acks++;
		s->r->hold_rate = copa_held_rate(ca);
	}
	if (copa_held_rate(ca) && was_held && !ca->overshoot) {
		s->r->hold_cwnd_min = min(s->r->hold_cwnd_min, s->cwnd);
		s->r->hold_cwnd_max = max(s->r->hold_cwnd_max, s->cwnd);
	}
	if (c->chunk_pkts && s->app_write_at == NEVER &&
	    s->delivered >= s->app_written)
		chunk_done(s);
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

	memset(r, 0, sizeof(*r));
	r->cwnd_min = r->hold_cwnd_min = r->comp_inv_min = U32_MAX;
	r->recover_rtts = -1;
	s.rng = c->seed ? c->seed : 0x9e3779b97f4a7c15ULL;
	s.clamp = c->cwnd_clamp ? c->cwnd_clamp : U32_MAX;
	s.ring_mask = ring - 1;
	s.send_ps = calloc(ring, sizeof(*s.send_ps));
	s.prior_delivered = calloc(ring, sizeof(*s.prior_delivered));
	s.dropped = calloc(ring, 1);
	s.drops = calloc(ring, sizeof(*s.drops));
	s.retx = calloc(ring, 1);
	s.app_lim = calloc(ring, 1);
	s.rcv_got = calloc(ring, 1);
	s.fifo_mask = pow2_above(c->fifo + 2) - 1;
	s.fifo_dep = calloc(s.fifo_mask + 1, sizeof(*s.fifo_dep));
	s.ack_mask = ring - 1;
	s.acks = calloc(ring, sizeof(*s.acks));
	if (!s.send_ps || !s.prior_delivered || !s.dropped || !s.drops ||
	    !s.fifo_dep || !s.acks || !s.retx || !s.app_lim || !s.rcv_got)
		fail("out of memory");
	s.meas_from = c->measure_from_us * PS_PER_US;
	s.tokens = c->police_burst;
	s.sh_tokens = c->shaper_burst;	/* an idle link's buckets are full */
	s.app_write_at = c->chunk_pkts ? 0 : NEVER;
	s.rto_at = NEVER;

	/* copa_init() after the handshake measured the RTT */
	s.cwnd = INIT_CWND;
	s.srtt8 = c->rtt_us << 3;
	copa_reset(&s.ca, c->delta_milli, c->competitive,
		   c->loss_reaction, s.cwnd, 0);
	copa_set_detector(&s.ca, !c->no_detect, COPA_LIMIT_LOSS_PCT,
			  COPA_RATE_TOL_PCT, COPA_HOLD_ROUNDS);
	s.pacing = copa_window_pacing_rate(&s.ca, s.cwnd, c->mss, s.srtt8 >> 3);

	while (s.t < end) {
		u64 t_send = can_send(&s) ? max(s.next_send, s.t) : NEVER;
		u64 t_ack = s.ack_head != s.ack_tail ?
			    s.acks[s.ack_head & s.ack_mask].at : NEVER;
		u64 t_timer = s.rcv_pending ? s.rcv_deadline : NEVER;
		u64 t_probe = probe_deadline(&s);
		u64 t_app = app_next(&s);
		u64 t = min(min(t_send, t_ack), min(t_timer, t_probe));

		t = min(min(t, t_app), s.rto_at);

		if (t == NEVER && c->chunk_pkts && r->chunks_done >= c->chunks)
			break;
		if (t == NEVER)
			fail("deadlock at %llu ps: cwnd %u, in flight %u (out %u sacked %u lost %u retrans %u)",
			     (unsigned long long)s.t, s.cwnd, s.inflight,
			     s.snd_nxt - s.ack_hi, s.sacked_out, s.lost_out,
			     s.retrans_out);
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
		} else if (t == s.rto_at) {
			rto_fire(&s);
		} else if (t == t_app && c->chunk_pkts) {
			app_write(&s);
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
	free(s.retx);
	free(s.app_lim);
	free(s.rcv_got);
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

/* Linux's receiver on a real path: an ACK every second packet, 0.5 ms of jitter */
static void delayed_acks(struct cfg *c)
{
	c->ack_every = 2;
	c->jitter_us = 500;
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
#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/*
 * Steady state: a lone flow keeps 1/delta packets queued (at most a
 * quarter of the BDP), so its window settles at target_pkts() (copa.rst,
 * "Target and per-ACK update"). The queue and cwnd
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
 * A tbf-shaped link whose base RTT is shorter than a packet's time (a
 * shaped LAN, a nearby server): the first packets pass the full bucket at
 * line rate, so RTTmin lacks even a packet's serialization, and a lone
 * Copa at its floor of two packets reads one in service and one queued
 * above it. Copa's own queue is bounded by one packet's time
 * (copa_own_queue_us()), so the queue never reads nearly empty and Copa
 * goes competitive and fills the 200 ms FIFO (23 to 555 packets queued
 * here). Pending: a bound of two packets' time where RTTmin is under it
 * fixes these links but, from Copa's view, a window squeezed to two
 * packets by a buffer-filler looks the same, and copa's share beside
 * cubic fell from 0.27-0.46 to 0.056 in the VM. Passing needs no ACK in
 * competitive mode, utilisation at least 0.95 and a mean queue of at most
 * four packets over the last two thirds of 30 s, delta 0.5.
 */
static bool shaped_link_short_rtt(char *out, size_t len)
{
	static const double links[][2] = {	/* Mbit/s, base RTT ms */
		{ 2, 0.05 }, { 2, 5.05 }, { 10, 0.05 }, { 10, 1.05 },
		{ 100, 0.05 },
	};
	bool ok = true;
	int n = 0;
	u32 k;

	for (k = 0; k < sizeof(links) / sizeof(links[0]); k++) {
		struct cfg c = mklink(links[k][0], links[k][1], 1448, 500);
		double pkt_us = (c.mss + 66) * 8e6 / c.rate_bps;
		struct result r;
		bool good;

		c.fifo = (u32)(0.2e6 / pkt_us) + 1;	/* 200 ms */
		c.shaper_burst = 2 * (c.mss + 66);	/* two frames */
		c.duration_us = 30000000;
		c.measure_from_us = 10000000;
		run(&c, &r);
		good = !r.competitive_acks && r.util >= 0.95 &&
		       r.qdelay_us <= 4 * pkt_us;
		ok &= good;
		n += snprintf(out + n, len - n,
			      "%s%g Mbit/s %g ms: util %.3f qdelay %.1f pkts, %llu ACKs competitive%s",
			      k ? "; " : "", links[k][0], links[k][1], r.util,
			      r.qdelay_us / pkt_us,
			      (unsigned long long)r.competitive_acks,
			      good ? "" : " FAIL");
	}
	return ok;
}

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
 * measured rate, which must not exceed the policed rate. A hold begun on
 * slow start's train is counted from the end of the overshoot, whose
 * losses copa_conserve() takes out of the window first. The asserted
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
	if (getenv("MODEL_ACK2"))
		delayed_acks(&c);
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
static void short_buffer_round(u32 standing_us, struct copa *ca, u64 *rate)
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
	u64 rate, stored;

	short_buffer_round(44000, &full, &rate);
	short_buffer_round(40000, &empty, &rate);
	stored = copa_rate_load(copa_rate_store(rate));
	OUT("round at %llu B/s, sample %llu B/s: full FIFO holds %llu B/s; empty queue holds %llu, new sample %llu B/s",
	    (unsigned long long)rate, (unsigned long long)rate / 4 * 3,
	    (unsigned long long)copa_held_rate(&full),
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
 * Random loss seldom holds a rate, and a hold costs it little: on each
 * random-loss link at 12 and 20 Mbit/s, RANDOM_LOSS_SEEDS runs with the
 * default loss reaction. At 1 and 2 % loss no run holds; at 5 % at most
 * one run in RANDOM_LOSS_HELD holds (two lossy rounds at agreeing rates
 * happen by chance there), and every run keeps at least 0.95 of the link.
 * A full link with random loss delivers a flat rate too, but the window
 * it adds waits in the FIFO; counting it as growth past a limit held a
 * rate in 9 of 40 runs (8 seeds on each link; 0.89x the link at worst).
 */
#define RANDOM_LOSS_SEEDS	40
#define RANDOM_LOSS_HELD	8

/*
 * @seeds runs of @c, seeded loss_seed(0) on: how many held a rate, and
 * the lowest utilisation of the link.
 */
static void count_holds(struct cfg *c, u32 seeds, u32 *held, double *lo)
{
	struct result r;
	u32 k;

	*held = 0;
	*lo = 1e9;
	for (k = 0; k < seeds; k++) {
		c->seed = loss_seed(k);
		run(c, &r);
		*lo = fmin(*lo, r.util);
		*held += !!r.holds;
	}
}

/*
 * Random loss of @loss holds seldom: no run of @seeds at 2 % or less, at
 * most one in RANDOM_LOSS_HELD above (two lossy rounds at agreeing rates
 * happen by chance there).
 */
static bool holds_seldom(double loss, u32 held, u32 seeds)
{
	return loss > 0.02 ? held * RANDOM_LOSS_HELD <= seeds : !held;
}

static bool random_loss_never_holds(char *out, size_t len)
{
	bool ok = true;
	int n = 0;
	u32 i;

	for (i = 0; i < sizeof(loss_links) / sizeof(loss_links[0]); i++) {
		const struct loss_link *l = &loss_links[i];
		struct cfg c = loss_cfg(l, 5, true);
		double lo;
		u32 held;

		if (!l->loss || l->mbit > 20)
			continue;
		count_holds(&c, RANDOM_LOSS_SEEDS, &held, &lo);
		n += snprintf(out + n, len - n,
			      "%s%s: %u of %u runs held, util min %.3f",
			      n ? "; " : "", l->name, held, RANDOM_LOSS_SEEDS,
			      lo);
		ok &= lo >= 0.95 && holds_seldom(l->loss, held,
						 RANDOM_LOSS_SEEDS);
	}
	return ok;
}

/*
 * Random loss of @loss from the first round (make bench's loss-20mbit
 * link: 20 Mbit/s, 40 ms, a 1 BDP FIFO), delayed ACKs with 0.5 ms of
 * jitter, the whole of 15 s counted, as copa-eval measures.
 */
static struct cfg small_window_cfg(double loss)
{
	struct cfg c = mklink(20, 40, 1448, 500);

	c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
	c.loss = loss;
	delayed_acks(&c);
	c.duration_us = 15 * COPA_USEC_PER_SEC;
	return c;
}

/*
 * At 5 % loss at most SMALL_WIN_HELD of SMALL_WIN_SEEDS_5 runs hold, and
 * every run keeps SMALL_WIN_UTIL of the link: 9 and 0.865 with
 * copa_cwnd_beyond()'s COPA_LIMIT_SLACK_PKTS, 20 and 0.704 before (when
 * slow start ends on the first rounds' losses, the window is 5 to 10
 * packets, and two rounds that lose one packet each at one rate passed
 * its percentages).
 */
#define SMALL_WIN_SEEDS_5	300
#define SMALL_WIN_HELD		15
#define SMALL_WIN_UTIL		0.8

static bool random_loss_5pct_small_windows(char *out, size_t len)
{
	struct cfg c = small_window_cfg(0.05);
	double lo;
	u32 held;

	count_holds(&c, SMALL_WIN_SEEDS_5, &held, &lo);
	OUT("%u of %u runs held (<= %u), util min %.3f (>= %.1f)", held,
	    SMALL_WIN_SEEDS_5, SMALL_WIN_HELD, lo, SMALL_WIN_UTIL);
	return held <= SMALL_WIN_HELD && lo >= SMALL_WIN_UTIL;
}

/*
 * The goal: at 2 % loss no run in SMALL_WIN_SEEDS_2 holds, at 5 % at most
 * one in RANDOM_LOSS_HELD, and every run keeps 0.9 of the link. Pending:
 * 1 of 1000 runs holds at 2 %, 9 of 300 at 5 %, down to 0.865 of the
 * link (make bench at 13ad838, before COPA_LIMIT_SLACK_PKTS: 0.772 at
 * 2 %).
 */
#define SMALL_WIN_SEEDS_2	1000

static bool random_loss_small_window_holds(char *out, size_t len)
{
	static const struct { double loss; u32 seeds; } runs[] = {
		{ 0.02, SMALL_WIN_SEEDS_2 }, { 0.05, SMALL_WIN_SEEDS_5 },
	};
	bool ok = true;
	int n = 0;
	u32 i;

	for (i = 0; i < NELEM(runs); i++) {
		struct cfg c = small_window_cfg(runs[i].loss);
		double lo;
		u32 held;

		count_holds(&c, runs[i].seeds, &held, &lo);
		n += snprintf(out + n, len - n,
			      "%s%g %% loss: %u of %u runs held, util min %.3f",
			      i ? "; " : "", 100 * runs[i].loss, held,
			      runs[i].seeds, lo);
		ok &= lo >= 0.9 && holds_seldom(runs[i].loss, held,
						runs[i].seeds);
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
 * Issue 32: entry points called directly, and the paths that reach them.
 */

/*
 * ACKs fed to copa_on_ack() directly, as the glue hands them in: one
 * packet each, @rtt_us apart per window (the window sent a round before
 * it, so a round ends every cwnd ACKs), the output window fed back.
 */
struct feed {
	struct copa ca;
	struct copa_ack a;
	u64 now;
	u32 delivered, lost;
};

static void feed_init(struct feed *f, u32 delta_milli, u32 cwnd, u32 mss)
{
	memset(f, 0, sizeof(*f));
	f->now = 10 * (u64)COPA_USEC_PER_SEC;
	copa_reset(&f->ca, delta_milli, true, 5, cwnd, 0);
	f->a = (struct copa_ack){ .cwnd = cwnd, .cwnd_clamp = U32_MAX,
				  .mss = mss };
}

static void feed_ack(struct feed *f, u32 cwnd, u32 rtt_us, u32 losses)
{
	struct copa_ack *a = &f->a;

	f->now += max(rtt_us / max(cwnd, 1U), 1U);
	f->delivered++;
	f->lost += losses;
	*a = (struct copa_ack){
		.now_us		= f->now,
		.srtt_us	= rtt_us,
		.cwnd		= cwnd,
		.cwnd_clamp	= U32_MAX,
		.mss		= a->mss,
		.delivered	= f->delivered,
		.lost		= f->lost,
		.prior_delivered = f->delivered - min(cwnd, f->delivered),
		.rs_delivered	= min_t(u32, cwnd, S32_MAX),
		.acked_sacked	= 1,
		.losses		= losses,
		.rtt_us		= rtt_us,
		.cwnd_limited	= 1,
	};
	copa_on_ack_event(&f->ca, false);
	copa_on_ack(&f->ca, a);
}

/* Is @rate within [1x, 2x] of @lo_cwnd to @hi_cwnd packets per @rtt_us? */
static bool pacing_sane(u64 rate, u64 lo_cwnd, u64 hi_cwnd, u32 mss,
			u32 rtt_us)
{
	double x_lo = (double)rate * rtt_us / (lo_cwnd * (double)mss * 1e6);
	double x_hi = (double)rate * rtt_us / (hi_cwnd * (double)mss * 1e6);

	return x_lo >= 1.0 - 1e-6 && x_hi <= 2.0 + 1e-6;
}

/*
 * Windows far beyond COPA_MAX_CWND (2^22) reach every entry point: a
 * route's initcwnd is clamped only to snd_cwnd_clamp, which the owner of
 * a user namespace sets too. At 2^24, 2^25 and 2^31 - 1 packets of
 * 65,483 bytes, copa_reset(), copa_on_tx_start(), the window's pacing
 * rate, copa_save_prior() and copa_undo(), and copa_on_ack() (in slow
 * start, on a loss, then 200 ACKs with the window fed back) must not
 * divide by zero or wrap: every window that comes out is within
 * [COPA_MIN_CWND, COPA_MAX_CWND], and every pacing rate within 1x to 2x
 * of a window between the clamped and the given one per RTT. Before
 * issue 32, copa_own_queue_us() divided by max(cwnd, 1) << 8 in 32 bits,
 * 0 at 2^24, and the pacing rate of 2^31 - 1 packets wrapped.
 */
static bool huge_windows_clamped(char *out, size_t len)
{
	static const u32 wins[] = { 1U << 24, 1U << 25, 0x7fffffffU };
	const u32 mss = 65483, srtt = 10000;
	bool ok = true;
	int n = 0;
	u32 k, j;

	for (k = 0; k < sizeof(wins) / sizeof(wins[0]); k++) {
		u32 w = wins[k], lo = min(w, COPA_MAX_CWND);
		u32 tx_idle, tx_busy, undo, worst_lo = U32_MAX, worst_hi = 0;
		struct feed f;
		u64 pace;
		bool acks_ok = true;

		feed_init(&f, 500, w, mss);
		pace = copa_window_pacing_rate(&f.ca, w, mss, srtt);
		tx_busy = copa_on_tx_start(&f.ca, 0, srtt, w, 0, 0);
		tx_idle = copa_on_tx_start(&f.ca, 10 * (u64)COPA_USEC_PER_SEC,
					   srtt, w, 1000, srtt);
		copa_save_prior(&f.ca, w);
		undo = copa_undo(&f.ca, w);
		n += snprintf(out + n, len - n,
			      "%scwnd %u: pacing %.4g B/s (%s), tx_start %u and %u, undo %u",
			      k ? "; " : "", w, (double)pace,
			      pacing_sane(pace, lo, w, mss, srtt) ?
			      "ok" : "WRAPPED", tx_busy, tx_idle, undo);
		ok &= pacing_sane(pace, lo, w, mss, srtt);
		ok &= tx_busy >= COPA_MIN_CWND && tx_busy <= COPA_MAX_CWND;
		ok &= tx_idle >= COPA_MIN_CWND && tx_idle <= COPA_MAX_CWND;
		ok &= undo >= COPA_MIN_CWND && undo <= COPA_MAX_CWND;
		if (!ok)
			return false;	/* before copa_on_ack() may abort */

		/* slow start's ACKs, one loss, then the window fed back */
		feed_init(&f, 500, w, mss);
		for (j = 0; j < 203; j++) {
			u32 cw = j < 2 ? w : f.a.cwnd;

			feed_ack(&f, cw, srtt + 1 + j % 7, j == 1);
			worst_lo = min(worst_lo, f.a.cwnd);
			worst_hi = max(worst_hi, f.a.cwnd);
			if (!f.a.pacing_rate ||
			    !pacing_sane(f.a.pacing_rate, f.a.cwnd, f.a.cwnd,
					 mss, copa_win_min(&f.ca.rtt_standing)))
				acks_ok = false;
		}
		n += snprintf(out + n, len - n, ", ACKs: cwnd %u..%u, pacing %s",
			      worst_lo, worst_hi, acks_ok ? "ok" : "WRONG");
		ok &= acks_ok && worst_lo >= COPA_MIN_CWND &&
		      worst_hi <= COPA_MAX_CWND;
	}
	return ok;
}

/*
 * The callbacks the stack can make before init, on icsk_ca_priv as it
 * zeroes it (a SYN's timeout calls ssthresh and set_state, a TFO SYN
 * with data tx_start, an undo can follow; every ACK in_ack_event), leave
 * the state uninitialised (inv_delta and inv_delta0 0, the glue's
 * sentinel); copa_reset() and ACKs then work as on a fresh socket: slow
 * start grows the window. Before issue 32, copa_undo() set 1/delta to 1.
 */
static bool callbacks_before_init(char *out, size_t len)
{
	static const struct copa zero;
	struct feed f;
	u32 undo, tx, j, inv, inv0;
	u64 pace;
	bool still_zero;

	memset(&f, 0, sizeof(f));
	copa_save_prior(&f.ca, 10);
	copa_restart(&f.ca, 1, 0);
	undo = copa_undo(&f.ca, 10);
	tx = copa_on_tx_start(&f.ca, 3 * (u64)COPA_USEC_PER_SEC, 0, 10, 0, 0);
	copa_on_ack_event(&f.ca, true);
	copa_on_ack_event(&f.ca, false);
	pace = copa_window_pacing_rate(&f.ca, 10, 1448, 0);
	inv = f.ca.inv_delta;
	inv0 = f.ca.inv_delta0;
	still_zero = !memcmp(&f.ca, &zero, sizeof(zero));

	feed_init(&f, 500, 10, 1448);
	for (j = 0; j < 60; j++)
		feed_ack(&f, f.a.cwnd, 20001, 0);
	OUT("before init: inv_delta %u inv_delta0 %u (both 0), state %s, undo %u, tx_start %u, pacing %llu; after copa_reset and 60 ACKs: cwnd %u (> 10), slow start %d, inv_delta %u",
	    inv, inv0, still_zero ? "still zero" : "CHANGED", undo, tx,
	    (unsigned long long)pace, f.a.cwnd, f.ca.slow_start,
	    f.ca.inv_delta);
	return !inv && !inv0 && f.a.cwnd > 10 &&
	       f.ca.inv_delta == f.ca.inv_delta0 && f.ca.slow_start;
}

/*
 * An ECN echo on an ACK that never reaches cong_control (nothing in
 * flight: tcp_ack()'s no_queue path) does not count on a later one: the
 * glue hands every ACK's flag to copa_on_ack_event(). Echo, then an ACK
 * without, then copa_on_ack(): no loss or mark in the round. Echo on the
 * ACK copa_on_ack() processes: the round has a mark. Before issue 32,
 * the flag was only ever set, and the stale echo counted.
 */
static bool stale_ecn_echo(char *out, size_t len)
{
	struct feed f, g;
	u32 j, lost0;

	feed_init(&f, 500, 20, 1448);
	for (j = 0; j < 50; j++)
		feed_ack(&f, 20, 20001, 0);
	g = f;
	lost0 = f.ca.loss_lost;
	/* within the round: this ACK does not end it */
	copa_on_ack_event(&f.ca, true);
	copa_on_ack_event(&f.ca, false);
	f.a.prior_delivered = f.ca.next_round_delivered - 1;
	f.a.delivered = ++f.delivered;
	f.a.acked_sacked = 1;
	f.a.losses = 0;
	f.a.now_us = ++f.now;
	copa_on_ack(&f.ca, &f.a);

	copa_on_ack_event(&g.ca, true);
	g.a.prior_delivered = g.ca.next_round_delivered - 1;
	g.a.delivered = ++g.delivered;
	g.a.acked_sacked = 1;
	g.a.losses = 0;
	g.a.now_us = ++g.now;
	copa_on_ack(&g.ca, &g.a);
	OUT("stale echo: round_ece %d round_loss %d loss_lost %u -> %u (all unchanged); echo on the ACK: round_ece %d round_loss %d",
	    f.ca.round_ece, f.ca.round_loss, lost0, f.ca.loss_lost,
	    g.ca.round_ece, g.ca.round_loss);
	return !f.ca.round_ece && !f.ca.round_loss && f.ca.loss_lost == lost0 &&
	       g.ca.round_ece && g.ca.round_loss;
}

/*
 * Competitive mode never lets delta exceed the configured value: with the
 * loss reaction on (5 %), rounds that lose 1 packet in 20 with a standing
 * queue (RTTmin 40 ms, every sample 100 ms) halve 1/delta at most down to
 * the configured 1/delta, at delta 0.5 and 0.04, over 4,000 ACKs. Before
 * issue 32, the loss reaction came first and took 1/delta down to 1.
 */
static bool competitive_keeps_delta(char *out, size_t len)
{
	static const u32 deltas[] = { 500, 40 };
	bool ok = true;
	int n = 0;
	u32 k, j;

	for (k = 0; k < sizeof(deltas) / sizeof(deltas[0]); k++) {
		u32 inv_min = U32_MAX, comp_acks = 0, lossy = 0;
		struct feed f;

		feed_init(&f, deltas[k], 100, 1448);
		f.ca.slow_start = 0;
		f.ca.round_slow_start = 0;
		f.ca.competitive = 1;
		f.ca.quiet_rounds = COPA_EMPTY_ROUNDS;
		f.ca.rtt_min = (struct copa_win){ 40000, 40000, (u32)f.now };
		for (j = 0; j < 4000; j++) {
			u32 losses = j % 20 == 19;

			feed_ack(&f, f.a.cwnd, 100001, losses);
			lossy += f.ca.round_start;
			if (f.ca.competitive) {
				comp_acks++;
				inv_min = min(inv_min, f.ca.inv_delta);
			}
		}
		n += snprintf(out + n, len - n,
			      "%sdelta %.3f: 1/delta at least %.2f in competitive mode (configured %.2f), %u of 4000 ACKs competitive, %u rounds",
			      k ? "; " : "", deltas[k] / 1000.0,
			      inv_min / (double)COPA_UNIT,
			      f.ca.inv_delta0 / (double)COPA_UNIT, comp_acks,
			      lossy);
		ok &= comp_acks > 3000 && inv_min >= f.ca.inv_delta0;
	}
	return ok;
}

/*
 * The same in the packet model: a buffer-filler's standing queue (40 ms
 * more on a 12 Mbit/s, 40 ms path from 10 s on) that drops 3 % (above
 * loss_reaction / 4), delta 0.5. Competitive mode starts, and 1/delta
 * never goes below the configured 2 while it lasts.
 */
static bool competitive_loss_packet_model(char *out, size_t len)
{
	struct cfg c = mklink(12, 40, 1448, 500);
	struct result r;

	c.burst_at_us = 10 * (u64)COPA_USEC_PER_SEC;
	c.burst_len_us = 20 * (u64)COPA_USEC_PER_SEC;
	c.burst_delay_us = c.rtt_us;
	c.burst_loss = 0.03;
	c.duration_us = c.burst_at_us + c.burst_len_us;
	c.measure_from_us = c.burst_at_us;
	run(&c, &r);
	OUT("%llu ACKs in competitive mode; 1/delta there at least %.2f (configured 2.00); util %.3f",
	    (unsigned long long)r.competitive_acks,
	    r.competitive_acks ? r.comp_inv_min / (double)COPA_UNIT : 0.0,
	    r.util);
	return r.competitive_acks > 1000 && r.comp_inv_min >= 2 * COPA_UNIT;
}

/*
 * Rates of 40 to 200 Gbit/s are not held at 34.36 Gbit/s (2^32 - 1
 * bytes/s, where u32 rates saturated): 40, 100 and 200 Gbit/s, 1 ms, MSS
 * 65,483, delta 0.04, 2 % random loss, 1.5 s each. Utilisation over the
 * last half at least 0.9, and no hold below half the link. Before issue
 * 32, two limited rounds at the saturated rate agreed and held it.
 */
static bool rates_40_to_200_gbit(char *out, size_t len)
{
	static const double gbits[] = { 40, 100, 200 };
	bool ok = true;
	int n = 0;
	u32 k;

	for (k = 0; k < sizeof(gbits) / sizeof(gbits[0]); k++) {
		struct cfg c = mklink(gbits[k] * 1000, 1, 65483, 40);
		double link = c.rate_bps / 8.0;
		struct result r;

		c.loss = 0.02;
		c.duration_us = 1500000;
		c.measure_from_us = 750000;
		run(&c, &r);
		n += snprintf(out + n, len - n,
			      "%s%.0f Gbit/s: util %.3f, %u holds, lowest at %.2f Gbit/s",
			      k ? "; " : "", gbits[k], r.util, r.holds,
			      r.hold_rate_min * 8 / 1e9);
		ok &= r.util >= 0.9 &&
		      (!r.holds || r.hold_rate_min >= 0.5 * link);
	}
	return ok;
}

/*
 * An application that writes 512 KB at a time, with idle gaps of 1 to
 * 30 s, behind a 10 Mbit/s (1.25 MB/s) token-bucket policer on a
 * 50 Mbit/s, 40 ms path (a 20 KB bucket, a FIFO of 1 BDP). Rate samples
 * are marked application-limited as Linux does at each write
 * (tcp_rate_check_app_limited()). Once with the policer to itself, once
 * shared with traffic that empties its bucket while the application is
 * silent, so that the first packet after a gap is dropped: its loss
 * lands in the round that began before the gap. Copa holds the policer's
 * rate; the held rate never falls below half of it, and every chunk after
 * the first gets at least half of it (a chunk is about 9 RTTs at the
 * policer's rate). Before issue 32, a hold that had lost once took the
 * rate of the round that spanned a gap, a few packets over seconds: it
 * held 433 B/s, and that chunk got 0.001 of the policer.
 */
static const u32 chunk_gaps_ms[] = {
	1000, 30000, 5000, 30000, 2000, 10000, 30000, 1000, 20000, 3000,
};

static bool chunks_behind_policer(char *out, size_t len)
{
	struct cfg c = mklink(50, 40, 1448, 500);
	double police = 10e6;
	bool ok = true;
	int n = 0;
	u32 k;

	c.police_bps = (u64)police;
	c.police_burst = 20000;
	c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
	c.chunk_pkts = 512 * 1024 / c.mss;
	c.chunks = 24;
	c.gaps_ms = chunk_gaps_ms;
	c.ngaps = sizeof(chunk_gaps_ms) / sizeof(chunk_gaps_ms[0]);
	c.duration_us = 3600 * (u64)COPA_USEC_PER_SEC;
	for (k = 0; k < 2; k++) {
		struct result r;

		c.police_shared = k;
		run(&c, &r);
		n += snprintf(out + n, len - n,
			      "%s%s: %u of 24 chunks, %u holds, lowest held rate %llu B/s (>= %.0f), lowest chunk %.3f of the policer (>= 0.5, chunk %u), first %.3f",
			      k ? "; " : "", k ? "shared" : "alone",
			      r.chunks_done, r.holds,
			      (unsigned long long)r.hold_rate_min, police / 16,
			      r.chunk_bps_min / police, r.chunk_min_k,
			      r.chunk_bps_first / police);
		ok &= r.chunks_done == c.chunks && r.holds &&
		      r.hold_rate_min >= police / 16 &&
		      r.chunk_bps_min >= 0.5 * police;
	}
	return ok;
}

/*
 * The last round of a chunk: tests/vm/test_policer_chunks.py's link (a
 * 4 Mbit/s policer with a 20 KB bucket on 20 Mbit/s, a FIFO of 1 BDP),
 * five chunks after its gaps of 1 to 4 s, swept over chunk sizes of 400 to
 * 620 KB, RTTs of 38 to 44 ms, delayed ACKs or not, ACK stalls and jitter
 * (576 runs). A chunk's tail may be retransmitted after the application
 * ran out of data: its round delivers a few packets over an RTT and more,
 * and no write marks it application-limited. A hold whose second lossy
 * round was that one was cut to its rate: 0.318 of the policer, and the
 * next chunk got 0.310 of it (the VM run of a8b6e2b held at 0.247). Every
 * hold is at least half the policer now, and so is every chunk after the
 * first.
 */
static const u32 vm_chunk_gaps_ms[] = { 1000, 4000, 1500, 2500 };
#define VM_CHUNKS	5

/* One run of chunk_tail_behind_policer's sweep; @k picks seed and noise. */
static void chunk_tail_run(u32 ack_every, u32 rtt_ms, u32 kb, u32 k,
			   struct result *r)
{
	struct cfg c = mklink(20, rtt_ms, 1448, 500);

	c.police_bps = 4000000;
	c.police_burst = 20000;
	c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
	c.chunk_pkts = kb * 1024 / c.mss;
	c.chunks = VM_CHUNKS;
	c.gaps_ms = vm_chunk_gaps_ms;
	c.ngaps = NELEM(vm_chunk_gaps_ms);
	c.duration_us = 60 * (u64)COPA_USEC_PER_SEC;
	c.ack_every = ack_every;
	c.seed = k * 7919;
	c.stall = k > 1 ? 0.002 : 0;
	c.stall_us = 5000;
	c.jitter_us = k > 3 ? 500 : 0;
	run(&c, r);
}

static bool chunk_tail_behind_policer(char *out, size_t len)
{
	double police = 4e6 / 8, hold_min = 1e18, chunk_min = 1e18;
	u32 runs = 0, holds = 0, done = 0, i;

	/* 2 ACK policies x RTTs 38-44 ms x 400-620 KB x 6 seeds */
	for (i = 0; i < 2 * 4 * 12 * 6; i++) {
		struct result r;

		chunk_tail_run(1 + i / 288, 38 + 2 * (i / 72 % 4),
			       400 + 20 * (i / 6 % 12), 1 + i % 6, &r);
		runs++;
		holds += r.holds;
		done += r.chunks_done == VM_CHUNKS;
		if (r.holds)
			hold_min = fmin(hold_min, r.hold_rate_min / police);
		chunk_min = fmin(chunk_min, r.chunk_bps_min / 8 / police);
	}
	OUT("%u runs, %u with every chunk done, %u holds: lowest held rate %.3f of the policer (>= 0.5), lowest chunk after the first %.3f (>= 0.5)",
	    runs, done, holds, hold_min, chunk_min);
	return done == runs && holds && hold_min >= 0.5 && chunk_min >= 0.5;
}

/*
 * Slow start behind a policer far below the link (policer-random's link2
 * of seed 32: 2.32 Mbit/s, a 62869-byte bucket, on 23.23 Mbit/s, 133 ms,
 * a 697510-byte FIFO): the bucket's burst lets the window double past the
 * policed rate, and slow start ends on a loss with several times the
 * policed BDP in flight. Its recovery must lose no more than the window
 * slow start reached: what was in flight may be dropped, but not the
 * retransmissions as well. Sending the window on through recovery (the
 * stack runs no PRR for a cong_control) lost 205 packets of a 120-packet
 * overshoot; copa_conserve() keeps it to the overshoot.
 */
static bool policer_start_overshoot(char *out, size_t len)
{
	struct cfg c = mklink(23.23, 133.45, 1448, 500);
	struct result r;

	c.fifo = 697510 / c.mss;
	c.police_bps = 2320000;
	c.police_burst = 62869;
	c.ack_every = 2;
	c.duration_us = 5000000;
	run(&c, &r);
	OUT("slow start ended at %.2f s, cwnd %u -> %u; lost %u by the overshoot's end (bound %u), %u by 5 s, %u holds",
	    r.ss_end_ps / 1e12, r.ss_end_cwnd, r.ss_exit_cwnd,
	    r.overshoot_lost, r.ss_end_cwnd, r.lost, r.holds);
	return r.overshoot_lost && r.overshoot_lost <= r.ss_end_cwnd;
}

/*
 * Slow starts behind policers drawn at random (START_POLICERS of them,
 * the same each run): a link of 10 to 100 Mbit/s, policed at 10 to 70 %
 * of it with a bucket of 10 to 100 KB, 10 to 150 ms, delayed ACKs with
 * 0.5 ms of jitter; the first 5 s. Slow start's first loss often comes
 * while the bucket's burst still carries its train at the link's rate, so
 * the train shows no limit; the round after it then loses a quarter or
 * more of what it sent (copa_hold_start()). All runs together lose at
 * most START_LOST times the windows their slow starts ended with (Reno's
 * halving loses about one window) and keep START_UTIL of the policed rate
 * on average. Over four draws of 300 (unit_rand()'s seed 0x1234567 here,
 * and three others) they lost 0.91 to 1.04 times those windows and kept
 * 0.847 to 0.878; holding only after trains that showed a limit lost 1.22
 * to 1.32 times and kept 0.794 to 0.815.
 */
#define START_POLICERS	300
#define START_LOST	1.1
#define START_UTIL	0.83

static bool policer_start_random(char *out, size_t len)
{
	u64 g = 0x1234567, lost = 0, ends = 0;
	double util = 0;
	u32 k;

	for (k = 0; k < START_POLICERS; k++) {
		double base, police, rtt;
		struct result r;
		struct cfg c;
		u32 burst;

		base = 10 + unit_rand(&g) * 90;
		police = base * (0.1 + unit_rand(&g) * 0.6);
		rtt = 10 + unit_rand(&g) * 140;
		burst = 10000 + (u32)(unit_rand(&g) * 90000);
		c = mklink(base, rtt, 1448, 500);
		c.police_bps = (u64)(police * 1e6);
		c.police_burst = burst;
		c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
		delayed_acks(&c);
		c.seed = k + 1;
		c.duration_us = 5000000;
		run(&c, &r);
		lost += r.lost;
		ends += r.ss_end_cwnd;
		util += r.util * base / police / START_POLICERS;
	}
	OUT("lost %llu, slow starts ended at %llu packets in all (%.2fx, <= %.1f); %.3f of the policed rate on average (>= %.2f)",
	    (unsigned long long)lost, (unsigned long long)ends,
	    (double)lost / ends, START_LOST, util, START_UTIL);
	return lost <= START_LOST * ends && util >= START_UTIL;
}

/*
 * copa-fleet's policed prefix (tests/vm/fleet_control.py): a 3 Mbit/s
 * policer with a 20 KB bucket on a 12 Mbit/s, 60 ms link with a 1 BDP
 * FIFO, delayed ACKs with 0.5 ms of jitter; a connection per object of
 * 50 KB, 100 KB, 512 KB (counted twice, as the fetchers draw it), 1 MB
 * and 5 MB, OBJECT_SEEDS of each. What all of them lost, over what they
 * delivered, is at most OBJECT_LOSS: cubic's retransmission overhead on
 * that prefix in the VM (3.2 to 3.5 %, copa_policer 4.3 to 4.4 %,
 * Documentation/results/fleet-control-vm.md). Pending: slow start's
 * overshoot loses about 20 packets of every object past 50 KB, and the
 * hold after it starts from a round the bucket still carried, above the
 * policer's rate (4.7 Mbit/s), until two lossy rounds cut it.
 */
#define OBJECT_SEEDS	10
#define OBJECT_LOSS	0.032

static bool policed_prefix_objects(char *out, size_t len)
{
	static const u32 sizes[] = { 50000, 100000, 512000, 512000, 1000000,
				     5000000 };
	u64 lost = 0, delivered = 0;
	int n = 0;
	u32 i, k;

	for (i = 0; i < NELEM(sizes); i++) {
		u64 size_lost = 0, size_sent = 0;

		for (k = 0; k < OBJECT_SEEDS; k++) {
			struct cfg c = mklink(12, 60, 1448, 500);
			struct result r;

			c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
			c.police_bps = 3000000;
			c.police_burst = 20000;
			delayed_acks(&c);
			c.seed = k + 1;
			c.chunk_pkts = (sizes[i] + c.mss - 1) / c.mss;
			c.chunks = 1;
			c.duration_us = 60 * COPA_USEC_PER_SEC;
			run(&c, &r);
			size_lost += r.lost;
			size_sent += r.sent;
		}
		lost += size_lost;
		delivered += size_sent - size_lost;
		if (i && sizes[i] == sizes[i - 1])
			continue;
		n += snprintf(out + n, len - n, "%u KB: %.1f of %.1f lost; ",
			      sizes[i] / 1000, (double)size_lost / OBJECT_SEEDS,
			      (double)size_sent / OBJECT_SEEDS);
	}
	snprintf(out + n, len - n, "all: %.2f %% of what was delivered (<= %.1f %%)",
		 100.0 * lost / delivered, 100 * OBJECT_LOSS);
	return lost <= OBJECT_LOSS * delivered;
}

/*
 * Slow start's end on a loss reported by an ACK without a rate sample
 * (rs->delivered = -1): without SACK every dupACK is one, and so is every
 * ACK of recovery from SACK reneging, or one that delivers nothing timed.
 * Slow start must still leave about half its window (the lowest ratio of
 * all its ends is at least 1/4), not 2 packets. Before issue 32 it took
 * max(rs->delivered, 0) = 0 as what the path carried.
 */
#define EXIT_MIN	0.25

/*
 * NewReno against SACK on the same 100 Mbit/s, 40 ms path, where a 2 ms
 * spell of 30 % loss at 120, 160 or 200 ms ends slow start: over the
 * first 2 s, NewReno delivers at least 0.97 of what SACK does. Before
 * issue 32: 85, 165 and 325 packets down to 2, 0.90 to 0.95 of SACK.
 */
static bool no_sack_slow_start_exit(char *out, size_t len)
{
	static const u32 at_ms[] = { 120, 160, 200 };
	double worst = 1, ratio = 2;
	bool ok = true;
	int n = 0;
	u32 k;

	for (k = 0; k < sizeof(at_ms) / sizeof(at_ms[0]); k++) {
		struct cfg c = mklink(100, 40, 1448, 500);
		struct result rs, rn;

		c.burst_at_us = at_ms[k] * COPA_USEC_PER_MSEC;
		c.burst_len_us = 2000;
		c.burst_loss = 0.3;
		c.duration_us = 2 * COPA_USEC_PER_SEC;
		run(&c, &rs);
		c.no_sack = true;
		run(&c, &rn);
		n += snprintf(out + n, len - n,
			      "%sat %u ms: SACK %u -> %u util %.3f, NewReno %u -> %u util %.3f",
			      k ? "; " : "", at_ms[k], rs.ss_end_cwnd,
			      rs.ss_exit_cwnd, rs.util, rn.ss_end_cwnd,
			      rn.ss_exit_cwnd, rn.util);
		ok &= rn.ss_exits && rs.ss_exits;
		worst = fmin(worst, rn.ss_exit_worst);
		ratio = fmin(ratio, rn.util / rs.util);
	}
	snprintf(out + n, len - n,
		 "; worst exit %.3f of the window (>= %.2f), NewReno %.3f of SACK (>= 0.97)",
		 worst, EXIT_MIN, ratio);
	return ok && worst >= EXIT_MIN && ratio >= 0.97;
}

/*
 * With SACK, on 100 Mbit/s, 40 ms, 1 % random loss: every second ACK
 * carries no rate sample (4 seeds, 2 s), and the receiver reneges at
 * 3 s (2 seeds, 6 s: the stack enters loss, slow start again, with no
 * rate sample until recovered). Every slow start ends at 1/4 of its
 * window or more, and without rate samples on half the ACKs Copa
 * delivers at least 0.95 of what it does with all. Before issue 32:
 * 89 and 369 packets down to 2 (0.90 and 0.78 of the delivery), and
 * after reneging 0.077 and 0.040 of the window.
 */
static bool invalid_rate_samples(char *out, size_t len)
{
	struct cfg c = mklink(100, 40, 1448, 500);
	double worst = 1, ratio = 2;
	bool ok = true;
	u32 k, exits = 0;

	c.loss = 0.01;
	c.duration_us = 2 * COPA_USEC_PER_SEC;
	for (k = 0; k < 4; k++) {
		struct result rv, ri;

		c.seed = loss_seed(k);
		c.no_rate_every = 0;
		run(&c, &rv);
		c.no_rate_every = 2;
		run(&c, &ri);
		exits += ri.ss_exits;
		worst = fmin(worst, ri.ss_exit_worst);
		ratio = fmin(ratio, ri.util / rv.util);
	}
	c.no_rate_every = 0;
	c.reneg_at_us = 3 * COPA_USEC_PER_SEC;
	c.duration_us = 6 * COPA_USEC_PER_SEC;
	for (k = 0; k < 2; k++) {
		struct result r;

		c.seed = loss_seed(k);
		run(&c, &r);
		ok &= r.ss_exits == 2;
		exits += r.ss_exits;
		worst = fmin(worst, r.ss_exit_worst);
	}
	OUT("%u slow starts ended (4 with every 2nd ACK without a rate sample, 2 x 2 around reneging): worst at %.3f of the window (>= %.2f); delivery %.3f of that with all samples (>= 0.95)",
	    exits, worst, EXIT_MIN, ratio);
	return ok && exits >= 8 && worst >= EXIT_MIN && ratio >= 0.95;
}

/* The NewReno cases' link: 1 % random loss, 20 Mbit/s, 40 ms, 4 s runs. */
static struct cfg no_sack_link(void)
{
	struct cfg c = mklink(20, 40, 1448, 500);

	c.loss = 0.01;
	c.duration_us = 4 * COPA_USEC_PER_SEC;
	return c;
}

/*
 * NewReno at 1 % random loss, 20 Mbit/s, 40 ms, 4 seeds of 4 s: every
 * slow start that ends keeps 1/4 of its window or more. Before issue 32:
 * 91 and 98 packets down to 2. (NewReno's delivery against SACK's on
 * the same link: no_sack_delivery().)
 */
static void no_sack_loss_runs(double *worst, u32 *exits, char *out,
			      size_t len)
{
	struct cfg c = no_sack_link();
	int n = 0;
	u32 k;

	*worst = 1;
	*exits = 0;
	c.no_sack = true;
	for (k = 0; k < 4; k++) {
		struct result r;

		c.seed = loss_seed(k);
		run(&c, &r);
		n += snprintf(out + n, len - n,
			      "%sseed %u: NewReno %u -> %u, util %.3f (%u timeouts)",
			      k ? "; " : "", k, r.ss_end_cwnd, r.ss_exit_cwnd,
			      r.util, r.rtos);
		*exits += r.ss_exits;
		if (r.ss_exits)
			*worst = fmin(*worst, r.ss_exit_worst);
	}
}

/*
 * NewReno's utilisation over SACK's on the same link and seed, for
 * NO_SACK_SEEDS seeds of 4 s (1 % random loss, 20 Mbit/s, 40 ms): their
 * mean, 10th percentile and minimum, and the mean timeouts per NewReno
 * run.
 */
#define NO_SACK_SEEDS	100

struct no_sack_delivery {
	double	mean, p10, min, rtos;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void no_sack_delivery(struct no_sack_delivery *d)
{
	struct cfg c = no_sack_link();
	double ratio[NO_SACK_SEEDS], sum = 0;
	u32 k, rtos = 0;

	for (k = 0; k < NO_SACK_SEEDS; k++) {
		struct result rs, rn;

		c.seed = loss_seed(k);
		c.no_sack = false;
		run(&c, &rs);
		c.no_sack = true;
		run(&c, &rn);
		ratio[k] = rn.util / rs.util;
		sum += ratio[k];
		rtos += rn.rtos;
	}
	qsort(ratio, NO_SACK_SEEDS, sizeof(ratio[0]), cmp_double);
	d->mean = sum / NO_SACK_SEEDS;
	d->p10 = ratio[NO_SACK_SEEDS / 10];
	d->min = ratio[0];
	d->rtos = (double)rtos / NO_SACK_SEEDS;
}

/*
 * Every end of slow start at 1 % random loss on a 12 Mbit/s, 40 ms path
 * with a one-BDP FIFO (tests/vm/test_copa_nosack.py's link), with SACK
 * and without, EXIT_SEEDS runs of 2 s each: the worst keeps EXIT_MIN of
 * the window. Before issue 32's fix a loss in the first two rounds took
 * what had been delivered since the handshake as what the path carries
 * (SACK: 11 -> 2, 26 -> 7), and a NewReno stretch ACK after a timeout,
 * acking 228 packets at once, cut 18 -> 2 as if 12 rounds had passed.
 */
#define EXIT_SEEDS	1000

static bool slow_start_exit_random_loss(char *out, size_t len)
{
	struct cfg c = mklink(12, 40, 1448, 500);
	double worst[2] = { 1, 1 };
	u32 exits[2] = { 0, 0 }, k, sack;

	c.fifo = (u32)bdp_pkts(&c, c.rate_bps);
	c.loss = 0.01;
	c.duration_us = 2 * COPA_USEC_PER_SEC;
	for (sack = 0; sack < 2; sack++) {
		c.no_sack = !sack;
		for (k = 0; k < EXIT_SEEDS; k++) {
			struct result r;

			c.seed = loss_seed(k);
			run(&c, &r);
			exits[sack] += r.ss_exits;
			if (r.ss_exits)
				worst[sack] = fmin(worst[sack], r.ss_exit_worst);
		}
	}
	OUT("%u runs each: SACK %u ends of slow start, worst %.3f of the window; NewReno %u, worst %.3f (>= %.2f)",
	    EXIT_SEEDS, exits[1], worst[1], exits[0], worst[0], EXIT_MIN);
	return exits[0] && exits[1] && fmin(worst[0], worst[1]) >= EXIT_MIN;
}

static bool no_sack_random_loss_1pct(char *out, size_t len)
{
	double worst;
	u32 exits;
	int n;

	no_sack_loss_runs(&worst, &exits, out, len);
	n = strlen(out);
	snprintf(out + n, len - n, "; worst exit %.3f of the window (>= %.2f)",
		 worst, EXIT_MIN);
	return exits && worst >= EXIT_MIN;
}

/*
 * A NewReno sender takes no RTT sample from a dupACK, nor a usable one
 * from an ACK that covers a retransmission (Karn; the timestamp's is
 * whole milliseconds, which Copa skips), so a long recovery leaves Copa
 * rounds without a sample and the dq of the last one. With v doubling on
 * them, a stale "empty" dq grew cwnd from 52 to 1044 packets (seed 64).
 * A round without a sample now restarts v at 1, and the delivery over
 * NO_SACK_SEEDS seeds is at least NO_SACK_MEAN of SACK's on average and
 * NO_SACK_P10 at the 10th percentile: 0.875 and 0.742, against 0.808 and
 * 0.642 before. (Competitive mode still counts such rounds as not empty
 * and can start on a stale dq: not counting them took the BPF build's
 * cong_control past the 7.2 verifier's million instructions.)
 */
#define NO_SACK_MEAN	0.84
#define NO_SACK_P10	0.70

static bool no_sack_stale_rtt(char *out, size_t len)
{
	struct no_sack_delivery d;

	no_sack_delivery(&d);
	OUT("NewReno / SACK utilisation over %u seeds: mean %.3f (>= %.2f), 10th percentile %.3f (>= %.2f), min %.3f; %.2f timeouts per run",
	    NO_SACK_SEEDS, d.mean, NO_SACK_MEAN, d.p10, NO_SACK_P10, d.min,
	    d.rtos);
	return d.mean >= NO_SACK_MEAN && d.p10 >= NO_SACK_P10;
}

/*
 * Issue 32's goal: NewReno delivers within the SACK runs' spread, at
 * least 0.9 of SACK's at the 10th percentile. Not met: the timeouts
 * (a lost retransmission) and NewReno's one repair per round trip cost
 * more than Copa's window can make up.
 */
static bool no_sack_random_loss_1pct_delivery(char *out, size_t len)
{
	struct no_sack_delivery d;

	no_sack_delivery(&d);
	OUT("NewReno / SACK utilisation over %u seeds: 10th percentile %.3f (>= 0.9), mean %.3f, min %.3f",
	    NO_SACK_SEEDS, d.p10, d.mean, d.min);
	return d.p10 >= 0.9;
}

/*
 * Timing noise (issue 36): ACK jitter and ACK aggregation (interrupt
 * coalescing up to 100 us, GRO's 64 KB) from 1 Mbit/s to 100 Gbit/s at
 * the default delta, on a 100 us path (a data centre's, where the noise
 * is as large as the RTT) and a 10 ms one. The noise floor of a run is
 * the spread of its ACK timing, max(2 * jitter, aggregation), the
 * resolution of Copa's empty-queue test, COPA_EMPTY_SLACK_US, the least
 * queue Copa aims at (copa_floor_queue_us()), or the queue the stack's
 * bursts need (burst_queue_us()); a lone
 * Copa must fill the link (utilisation >= NOISE_MIN_UTIL over the last
 * 40 %) with a mean queueing delay of at most NOISE_QUEUE_MULT times the
 * larger of that floor and 1/delta packets' time.
 */
#define NOISE_MIN_UTIL		0.95
#define NOISE_QUEUE_MULT	4

struct noise {
	const char *name;
	u32	jitter_us, agg_us, agg_bytes;
};

static const struct noise noises[] = {
	{ "none", 0, 0, 0 },
	{ "jitter 20", 20, 0, 0 },
	{ "jitter 100", 100, 0, 0 },
	{ "agg 100/64K", 0, 100, 65536 },
	{ "jit 100+agg", 100, 100, 65536 },
};

static const double noise_mbits[] = { 1, 10, 100, 1000, 10000, 25000, 100000 };
static const double noise_rtts_ms[] = { 0.1, 10 };

/*
 * The stack's TSO burst on link @c, bytes: 1 ms of Copa's pacing rate
 * (COPA_PACE_PCT of the link's), at most COPA_TSO_MAX_BYTES, as
 * tcp_tso_autosize() sizes it.
 */
static double burst_bytes(const struct cfg *c)
{
	return fmin(c->rate_bps / 8 * COPA_PACE_PCT / 100 *
		    COPA_TSO_BURST_US / 1e6, COPA_TSO_MAX_BYTES);
}

/* The queue for a window of 3/2 of those bursts on link @c, us. */
static double burst_queue_us(const struct cfg *c)
{
	double win_us = burst_bytes(c) * COPA_TSO_WIN_NUM / COPA_TSO_WIN_DEN *
			8e6 / c->rate_bps;

	return fmax(win_us - c->rtt_us, 0);
}

/* One lone flow of the grid; returns whether it met both bounds. */
static bool noise_run(double mbit, double rtt_ms, const struct noise *n,
		      struct result *r, double *bound_us)
{
	struct cfg c = mklink(mbit, rtt_ms, 1448, 500);
	double floor_us = fmax(fmax(2.0 * n->jitter_us, n->agg_us),
			       fmax(COPA_EMPTY_SLACK_US, burst_queue_us(&c)));
	double own_us = 1000.0 / c.delta_milli * 8 * c.mss * 1e6 / c.rate_bps;

	c.jitter_us = n->jitter_us;
	c.agg_us = n->agg_us;
	c.agg_bytes = n->agg_bytes;
	c.rtt_us += 2 * n->jitter_us + n->agg_us;	/* no negative delay */
	c.fifo += (u32)(4 * bdp_pkts(&c, c.rate_bps));
	set_duration(&c, 600);
	run(&c, r);
	*bound_us = NOISE_QUEUE_MULT * fmax(floor_us, own_us);
	return r->util >= NOISE_MIN_UTIL && r->qdelay_us <= *bound_us;
}

static void noise_table(void)
{
	u32 i, j, k;

	printf("| RTT | rate Mbit/s | noise | util | mean qdelay us | bound us | |\n|---|---|---|---|---|---|---|\n");
	for (k = 0; k < NELEM(noise_rtts_ms); k++)
		for (i = 0; i < NELEM(noise_mbits); i++)
			for (j = 0; j < NELEM(noises); j++) {
				struct result r;
				double b;
				bool ok = noise_run(noise_mbits[i],
						    noise_rtts_ms[k],
						    &noises[j], &r, &b);

				printf("| %g ms | %g | %s | %.3f | %.1f | %.0f | %s |\n",
				       noise_rtts_ms[k], noise_mbits[i],
				       noises[j].name, r.util, r.qdelay_us, b,
				       ok ? "ok" : "FAIL");
				fflush(stdout);
			}
}

/* The grid's runs at @rtt_ms with the noises whose jitter is @jitter. */
static bool noise_grid(double rtt_ms, bool jitter, char *out, size_t len)
{
	double worst_util = 2, worst_q = 0;
	int n = 0, failed = 0, runs = 0;
	u32 i, j;

	for (i = 0; i < NELEM(noise_mbits); i++)
		for (j = 0; j < NELEM(noises); j++) {
			struct result r;
			double b;

			if (!noises[j].jitter_us == jitter)
				continue;
			runs++;
			if (!noise_run(noise_mbits[i], rtt_ms, &noises[j], &r,
				       &b)) {
				failed++;
				n += snprintf(out + n, len - n,
					      "%g Mbit/s %s: util %.3f qdelay %.0f us (<= %.0f); ",
					      noise_mbits[i], noises[j].name,
					      r.util, r.qdelay_us, b);
			}
			worst_util = fmin(worst_util, r.util);
			worst_q = fmax(worst_q, r.qdelay_us / b);
		}
	snprintf(out + n, len - n,
		 "%d runs, %d failed; lowest util %.3f (>= %.2f), highest qdelay %.2f of its bound",
		 runs, failed, worst_util,
		 NOISE_MIN_UTIL, worst_q);
	return !failed;
}

/* No noise but the clock's, and ACK aggregation */
static bool aggregation_1_mbit_to_100_gbit_rtt_100_us(char *out, size_t len)
{
	return noise_grid(0.1, false, out, len);
}

static bool aggregation_1_mbit_to_100_gbit_rtt_10_ms(char *out, size_t len)
{
	return noise_grid(10, false, out, len);
}

/*
 * ACK jitter, kept in order: at thousands of ACKs per jitter interval
 * every ACK waits about as long as the slowest before it, so RTTmin keeps
 * a sample from slow start's sparse first round and RTTstanding reads up
 * to twice the jitter above it while the spread of the samples stays
 * small: an offset the noise estimate does not see (Documentation/copa.rst,
 * "Timing noise").
 */
static bool jitter_1_mbit_to_100_gbit_rtt_100_us(char *out, size_t len)
{
	return noise_grid(0.1, true, out, len);
}

static bool jitter_1_mbit_to_100_gbit_rtt_10_ms(char *out, size_t len)
{
	return noise_grid(10, true, out, len);
}

/*
 * The stack's bursts (issue 36): on a 100 us path at 100 Mbit/s to 10
 * Gbit/s, the window must hold 3/2 of the bursts the stack sends
 * (burst_bytes()), so that the half window a burst carries is 3/4 of one
 * and the host's cost per byte stays near a full burst's: a time-average
 * cwnd of at least BURST_WIN_MIN of that. The queue that costs stays
 * near burst_queue_us(): a mean queueing delay of at most
 * BURST_QUEUE_MULT times it plus twice COPA_EMPTY_SLACK_US. Utilisation at
 * least NOISE_MIN_UTIL.
 */
#define BURST_WIN_MIN		0.9
#define BURST_QUEUE_MULT	1.25

static bool bursts_fill_window(char *out, size_t len)
{
	static const double mbits[] = { 100, 1000, 5000, 10000 };
	bool ok = true;
	int n = 0;
	u32 i;

	for (i = 0; i < NELEM(mbits); i++) {
		struct cfg c = mklink(mbits[i], 0.1, 1448, 500);
		double win = burst_bytes(&c) * COPA_TSO_WIN_NUM /
			     COPA_TSO_WIN_DEN / c.mss;
		double q_max = BURST_QUEUE_MULT * burst_queue_us(&c) +
			       2 * COPA_EMPTY_SLACK_US;
		struct result r;

		c.fifo += (u32)(4 * win);	/* the bursts' queue fits */
		set_duration(&c, 600);
		run(&c, &r);
		ok &= r.cwnd_avg >= BURST_WIN_MIN * win &&
		      r.qdelay_us <= q_max && r.util >= NOISE_MIN_UTIL;
		n += snprintf(out + n, len - n,
			      "%s%g Mbit/s: cwnd %.1f (3/2 bursts %.1f), qdelay %.0f us (<= %.0f), util %.3f",
			      i ? "; " : "", mbits[i], r.cwnd_avg, win,
			      r.qdelay_us, q_max, r.util);
	}
	return ok;
}

/* ---------------------------------------------------------------------
 * The table for Documentation/results.rst, "Choosing delta".
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
	bool pending;	/* waits for a fix: run only when named, or with
			 * MODEL_PENDING=1 */
};

#define CASE(f)	{ #f, f, false }
#define PENDING(f)	{ #f, f, true }
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
	PENDING(shaped_link_short_rtt),
	CASE(rtt_samples_missing_and_whole_ms),
	CASE(step_down_x4_100mbit),
	CASE(step_up_x4_100mbit),
	CASE(step_down_x4_1gbit),
	CASE(host_jitter_10_gbit),
	CASE(aggregation_1_mbit_to_100_gbit_rtt_100_us),
	CASE(aggregation_1_mbit_to_100_gbit_rtt_10_ms),
	PENDING(jitter_1_mbit_to_100_gbit_rtt_100_us),
	PENDING(jitter_1_mbit_to_100_gbit_rtt_10_ms),
	CASE(bursts_fill_window),
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
	CASE(random_loss_5pct_small_windows),
	PENDING(random_loss_small_window_holds),
	CASE(growth_after_cut_never_holds),
	CASE(start_holds_short_fifo),
	CASE(short_fifo_flat_overflow_holds),
	CASE(short_fifo_stalled_acks),
	CASE(short_buffer_overflow_holds),
	CASE(random_loss_1pct_1000_mbit),
	CASE(fifo_1_pkt),
	CASE(fifo_5_pkts_delta_0_1),
	CASE(huge_windows_clamped),
	CASE(callbacks_before_init),
	CASE(stale_ecn_echo),
	CASE(competitive_keeps_delta),
	CASE(competitive_loss_packet_model),
	CASE(rates_40_to_200_gbit),
	CASE(chunks_behind_policer),
	CASE(chunk_tail_behind_policer),
	CASE(policer_start_overshoot),
	CASE(policer_start_random),
	PENDING(policed_prefix_objects),
	CASE(no_sack_slow_start_exit),
	CASE(invalid_rate_samples),
	CASE(no_sack_random_loss_1pct),
	CASE(slow_start_exit_random_loss),
	CASE(no_sack_stale_rtt),
	PENDING(no_sack_random_loss_1pct_delivery),
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
		bool want = argc == 0 &&
			    (!cases[i].pending || getenv("MODEL_PENDING"));

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
	if (argc > 4 && !strcmp(argv[1], "noise1")) {
		struct result r;
		double b;
		bool ok = noise_run(atof(argv[2]), atof(argv[3]),
				    &noises[atoi(argv[4])], &r, &b);

		printf("util %.3f qdelay %.1f bound %.0f cwnd_avg %.1f lost %u %s\n",
		       r.util, r.qdelay_us, b, r.cwnd_avg, r.lost, ok ? "ok" : "FAIL");
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "noise")) {
		noise_table();
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "check"))
		argc--, argv++;
	return check(argc - 1, argv + 1);
}
