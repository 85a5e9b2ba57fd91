/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Copa algorithm with no kernel interface in it: one ACK goes in as a
 * struct copa_ack, a window and a pacing rate come out in the same struct.
 * tcp_copa.c, tcp_copa_policer.c, the BPF build and the user-space model
 * and fuzz tests all compile this one file; tcp_copa.c's header comment
 * describes the algorithm and its modes.
 *
 * The includer provides the kernel's basic types (u8 ... u64, s32, s64,
 * bool), min(), max(), max3(), min_t(), max_t(), clamp_t(), div_u64(),
 * div64_u64() and hweight8(). Nothing here sleeps, allocates or reads the
 * clock.
 *
 * Inputs are hostile: the entry points clamp every window, MSS and time
 * first (copa_ack_in()), which bounds every product below 2^64, and every
 * divisor is non-zero by construction, so the BPF build (where a division
 * by zero yields 0) computes what the modules do.
 *
 * Fixed point: cwnd targets and 1/delta are in units of 1/COPA_UNIT
 * packet ("COPA_UNIT scale"); stored rates in 2^COPA_RATE_SHIFT bytes/s.
 * Times are microseconds; windowed filters keep the low 32 bits of the
 * 64-bit clock and compare them by u32 subtraction, which is exact for
 * ages below 2^32 us (71 minutes); an idle period long enough to matter
 * clears them (copa_on_tx_start()).
 */
#ifndef _TCP_COPA_ALGO_H
#define _TCP_COPA_ALGO_H

#include "tcp_copa_params.h"

#define COPA_SHIFT		8
#define COPA_UNIT		((u32)1 << COPA_SHIFT)

#define COPA_USEC_PER_MSEC	1000U
#define COPA_USEC_PER_SEC	1000000U
#define COPA_RTT_MIN_WIN_US	(10 * COPA_USEC_PER_SEC) /* RTTmin window, */
#define COPA_RTT_MIN_WIN_RTTS	20	/* ... or this many RTTmin if longer */
#define COPA_RTT_MIN_HOLD_US	(600 * COPA_USEC_PER_SEC) /* ... while competing */
#define COPA_EMPTY_ROUNDS	5	/* queue not empty this long: compete */
#define COPA_EMPTY_SPELLS	2	/* empty spells in 8 rounds: stop */
#define COPA_EMPTY_SLACK_US	100	/* "nearly empty" floor, us */
#define COPA_VELOCITY_ROUNDS	3	/* same-direction rounds before v grows */
#define COPA_MAX_VELOCITY	0x4000U		/* 2^14 packets per round */
#define COPA_MIN_CWND		2	/* packets */
#define COPA_INIT_CWND		10	/* TCP_INIT_CWND (RFC 6928), packets */
#define COPA_MAX_CWND		0x400000U	/* 2^22 packets: cwnd_acc fits s32 */
#define COPA_MAX_MSS		0xffffU		/* IP_MAX_MTU bounds mss_cache */
#define COPA_MAX_RTT_US		0x10000000U	/* 2^28 us (268 s) > TCP_RTO_MAX */
#define COPA_INV_DELTA_MIN	COPA_UNIT		/* delta <= 1 */
#define COPA_INV_DELTA_MAX	(1000U << COPA_SHIFT)	/* delta >= 0.001 */
#define COPA_INV_DELTA_REGROW	(COPA_UNIT / 32)	/* per loss-free round */
#define COPA_PRIOR_SHIFT	4	/* prior_inv_delta: COPA_UNIT >> 4 scale */
#define COPA_LIGHT_LOSS_DIV	4	/* halve 1/delta above thresh/4 % */
#define COPA_LOSS_CUT_NUM	7	/* loss reaction: cwnd *= 7/10 */
#define COPA_LOSS_CUT_DEN	10
#define COPA_QUEUE_BDP_DIV	4	/* queue aimed at <= BDP / 4 ... */
#define COPA_QUEUE_MIN		COPA_UNIT	/* ... and >= 1 packet */
#define COPA_ROUND_STEP_DIV	4	/* a round adds <= cwnd / 4 ... */
#define COPA_DRAIN_NUM		3	/* ... and removes <= 3/4 of the queue */
#define COPA_DRAIN_DEN		4
#define COPA_DRAIN_ROUNDS	3	/* round starts to drain slow start's */
#define COPA_PACE_PCT		200	/* pacing gain, percent of cwnd/RTT */
#define COPA_PACE_CALM_PCT	100	/* ... after a loss, idle or a hold */
#define COPA_STANDING_DIV	4	/* a queue over RTTmin / 4 is standing */
#define COPA_LIMIT_LOSS_PCT	1	/* a limited round loses >= 1% ... */
#define COPA_RATE_TOL_PCT	12	/* ... at a rate within 12% ... */
#define COPA_RATE_SLACK		500	/* ... or 500 bytes/s (4 kbit/s) ... */
#define COPA_LIMIT_MAX_AGE	16	/* ... of one <= 16 rounds before */
#define COPA_HOLD_ROUNDS	48	/* rounds to hold a detected limit */
#define COPA_TRAIN_MIN_PKTS	8	/* slow start's exit: a train of >= 8 */
#define COPA_START_LOSS_DIV	8	/* ... then a round that lost >= 1/8 */
#define COPA_START_ROUNDS	2	/* ... of the next 2 round ends: hold */
#define COPA_IDLE_MIN_US	(200 * COPA_USEC_PER_MSEC) /* idle: > srtt + this */
#define COPA_RATE_MAX_PKTS	0x4000000U /* 2^26 a round: bytes*1e6 fit u64 */
#define COPA_RATE_SHIFT		4	/* stored rates: 16 bytes/s units */
#define COPA_RATE_MAX		((u64)U32_MAX << COPA_RATE_SHIFT) /* 550 Gbit/s */

/*
 * Mechanisms beyond the paper. Building with -DCOPA_ABLATE=MASK compiles
 * those in MASK out, to measure what each earns (Documentation/copa.rst,
 * "Ablation"); the default builds them all.
 */
#define COPA_MECH_LOSS_CLASS	0x01	/* losses classified by the queue */
#define COPA_MECH_RATE_LIMIT	0x02	/* a rate limit detected and held */
#define COPA_MECH_SHORT_BUFFER	0x04	/* a full short buffer is a limit */
#define COPA_MECH_START_TRAIN	0x08	/* slow start's train samples a limit */
#define COPA_MECH_IDLE		0x10	/* window capped, paced 1x after idle */
#ifndef COPA_ABLATE
#define COPA_ABLATE		0
#endif

/* Is @mech built in? A constant, so the compiler drops what is not. */
static inline bool copa_mech(u32 mech)
{
	return !(COPA_ABLATE & mech);
}

/*
 * Operating modes, as reported by the tracepoint and inet_diag:
 * COPA_MODE_SLOW_START ... COPA_MODE_POLICED, from tcp_copa_params.h.
 */
enum copa_mode {
	COPA_MODES(COPA_MODE_ENUM)
};

enum copa_dir {
	COPA_FLAT,
	COPA_UP,
	COPA_DOWN,
};

/*
 * Windowed extreme (min or max) of RTT samples. The window is split in
 * two halves: @cur holds the extreme of the half that started at @start,
 * @prev that of the half before it, so the result always covers between
 * one and two half-windows of history. 0 means "no sample" (samples are
 * at least 1 us).
 */
struct copa_win {
	u32	cur;
	u32	prev;
	u32	start;		/* low 32 bits of the clock, us */
};

/*
 * Per-socket Copa state, in icsk_ca_priv (104 of its 104 bytes). Rates
 * (limit_rate, hold_rate) are stored in units of 2^COPA_RATE_SHIFT
 * bytes/s; copa_rate_load() and copa_rate_store() convert.
 */
struct copa {
	struct copa_win	rtt_min;	/* min RTT, 5-10 s or 10-20 RTTmin */
	struct copa_win	rtt_standing;	/* min RTT over srtt/4 to srtt/2 */
	struct copa_win	rtt_max;	/* max rtt_standing over 4 srtt */
	u32	next_round_delivered;	/* delivered count ending this round */
	u32	round_start_us;		/* clock low bits as this round began */
	u32	round_start_lost;	/* lost count as this round began */
	u32	limit_rate;		/* rate of the last limited round */
	u32	limit_cwnd;		/* its cwnd less queue, packets */
	u32	round_cwnd;		/* cwnd (packets) at round start */
	u32	inv_delta;		/* current 1/delta, COPA_UNIT scale */
	u32	inv_delta0;		/* configured 1/delta, COPA_UNIT scale */
	u32	hold_rate;		/* rate to hold, 0 = Copa decides */
	u32	loss_lost;		/* packets lost in the loss window */
	u32	loss_delivered;		/* packets delivered in the window */
	s32	cwnd_acc;		/* pending cwnd change, see copa_move_cwnd */
	u32	prior_cwnd;		/* cwnd before the last reduction */
	u16	prior_inv_delta;	/* its 1/delta, COPA_UNIT >> 4 scale */
	u16	velocity;		/* v, in packets */
	u8	quiet_rounds;		/* rounds without a nearly empty queue */
	u8	empty_rounds;		/* nearly empty in the last 8 rounds */
	u8	drain_rounds;		/* rounds left to drain slow start's */
	u8	loss_thresh:7,		/* loss reaction threshold, percent */
		prior_held:1;		/* a hold was on before the last reduction */
	u8	limit_rounds;		/* hold: rounds left; else limit age */
	u8	hold_rounds;		/* rounds to hold, 1-255 ... */
	u8	hold_shift:2,		/* ... times 2^hold_shift, at most 255 */
		limit_held:1,		/* limit_rate is the last hold's */
		hold_lossy:1,		/* a round of the hold was limited */
		hold_cut:1,		/* the held rate was cut (copa_cut_hold) */
		probing:1,		/* a hold ended, its limit not forgotten */
		round_slow_start:1,	/* this round began in slow start */
		start_sample:1;		/* limit_rate: slow start's last train */
	u8	limit_loss:7,		/* percent a limited round loses, 1-100 */
		detect:1;		/* rate-limit detection on */
	u8	rate_tol;		/* percent two limited rounds may differ */
	u8	slow_start:1,		/* still in slow start */
		competitive_on:1,	/* competitive mode allowed */
		competitive:1,		/* competing with a buffer-filler */
		round_start:1,		/* this ACK started a new round */
		dir:2,			/* enum copa_dir of the last round */
		same_dir_rounds:2;	/* rounds cwnd moved in @dir, up to 3 */
	u8	round_loss:1,		/* loss or ECN mark seen in this round */
		loss_second:1,		/* second round of the loss window */
		empty_seen:1,		/* queue nearly empty in this round */
		ece:1,			/* the ACK being processed echoes CE */
		calm:1,			/* pace at 1x until the round ends */
		round_ece:1,		/* an ECN echo counted in this round */
		prior_slow_start:1,	/* slow start before the last reduction */
		round_drop:1;		/* a loss with the queue low this round */
	u8	round_idle:1;		/* sending restarted after idle this round */
};

/*
 * One ACK as the glue sees it (tcp_sock and rate_sample in the kernel).
 * @cwnd is both the current window and, after copa_on_ack(), the new one;
 * @pacing_rate and @target are outputs.
 */
struct copa_ack {
	u64	now_us;		/* clock, us (tp->tcp_mstamp) */
	u64	pacing_rate;	/* out: bytes per second */
	u32	srtt_us;	/* smoothed RTT, us; 0 before any sample */
	u32	cwnd;		/* in/out: packets */
	u32	cwnd_clamp;	/* largest cwnd the socket allows, packets */
	u32	mss;		/* bytes */
	u32	delivered;	/* packets delivered so far */
	u32	lost;		/* packets lost so far */
	u32	prior_delivered; /* delivered when the ACKed packet was sent */
	u32	target;		/* out: target cwnd, packets */
	s32	rs_delivered;	/* packets this sample covers, < 0: invalid */
	s32	acked_sacked;	/* packets newly (S)ACKed */
	s32	losses;		/* packets newly marked lost */
	s32	rtt_us;		/* RTT sample, -1 if none */
	u8	cwnd_limited:1,	/* the window, not the sender, limited sending */
		app_limited:1;	/* the sample was application-limited */
};

/* u32 sequence comparison, as the kernel's before(). */
static inline bool copa_before(u32 a, u32 b)
{
	return (s32)(a - b) < 0;
}

/*
 * Has copa_reset() run? The stack zeroes icsk_ca_priv before init, and
 * ssthresh, set_state, undo_cwnd and the start of transmission can come
 * first (a SYN's timeout, a TFO SYN with data): every entry point leaves
 * such a state alone.
 */
static inline bool copa_ready(const struct copa *ca)
{
	return ca->inv_delta0 != 0;
}

static inline u32 copa_cwnd_in(u32 cwnd)
{
	return clamp_t(u32, cwnd, COPA_MIN_CWND, COPA_MAX_CWND);
}

/*
 * Bound what the stack hands in before any arithmetic: a route's
 * initcwnd is clamped only to snd_cwnd_clamp, and the owner of a user
 * namespace sets both. From here on cwnd is in [COPA_MIN_CWND,
 * COPA_MAX_CWND], mss in [1, COPA_MAX_MSS] and every time below
 * COPA_MAX_RTT_US, which bounds each product and divisor below.
 */
static inline void copa_ack_in(struct copa_ack *ack)
{
	ack->cwnd = copa_cwnd_in(ack->cwnd);
	ack->mss = clamp_t(u32, ack->mss, 1, COPA_MAX_MSS);
	ack->srtt_us = min(ack->srtt_us, COPA_MAX_RTT_US);
	ack->rtt_us = min_t(s32, ack->rtt_us, COPA_MAX_RTT_US);
}

static inline u64 copa_rate_load(u32 stored)
{
	return (u64)stored << COPA_RATE_SHIFT;
}

/*
 * Rounded down, never above a limit it measured, but a rate that is not
 * 0 is not stored as 0 ("no hold").
 */
static inline u32 copa_rate_store(u64 rate)
{
	u32 stored = min(rate, COPA_RATE_MAX) >> COPA_RATE_SHIFT;

	return rate && !stored ? 1 : stored;
}

/* ---------------------------------------------------------------------
 * Windowed RTT filters.
 */

static inline u32 copa_win_min(const struct copa_win *w)
{
	if (!w->cur || !w->prev)
		return w->cur ? w->cur : w->prev;
	return min(w->cur, w->prev);
}

static inline u32 copa_win_max(const struct copa_win *w)
{
	return max(w->cur, w->prev);
}

/* Start a new half-window with sample @v if the current one is over. */
static inline bool copa_win_rotate(struct copa_win *w, u32 now, u32 half,
				   u32 v)
{
	u32 age = now - w->start;

	if (w->cur && age <= half)
		return false;
	w->prev = (w->cur && age <= 2 * half) ? w->cur : v;
	w->cur = v;
	w->start = now;
	return true;
}

static inline void copa_win_min_update(struct copa_win *w, u32 now,
				       u32 half, u32 v)
{
	if (!copa_win_rotate(w, now, half, v) && v < w->cur)
		w->cur = v;
}

static inline void copa_win_max_update(struct copa_win *w, u32 now,
				       u32 half, u32 v)
{
	if (!copa_win_rotate(w, now, half, v) && v > w->cur)
		w->cur = v;
}

/* Keep the window's minimum as if it had just been measured. */
static inline void copa_win_restart(struct copa_win *w, u32 now)
{
	w->cur = copa_win_min(w);
	w->prev = w->cur;
	w->start = now;
}

/* Forget a window whose newest half is older than @idle_us allows. */
static inline void copa_win_expire(struct copa_win *w, u64 idle_us, u32 half)
{
	if (idle_us > 2 * (u64)half) {
		w->cur = 0;
		w->prev = 0;
	}
}

/* Queueing delay dq = RTTstanding - RTTmin, in us. */
static inline u32 copa_dq_us(const struct copa *ca)
{
	u32 standing = copa_win_min(&ca->rtt_standing);
	u32 rtt_min = copa_win_min(&ca->rtt_min);

	return standing > rtt_min ? standing - rtt_min : 0;
}

static inline u32 copa_srtt(const struct copa_ack *ack)
{
	return max(ack->srtt_us, 1U);
}

/* A packet's share of the RTT, srtt / cwnd: its time at the window's rate. */
static inline u32 copa_pkt_us(const struct copa_ack *ack)
{
	return copa_srtt(ack) / max(ack->cwnd, 1U);
}

/*
 * The queue Copa itself keeps at 1/delta = @inv (COPA_UNIT scale): @inv
 * packets (at least one) of srtt / cwnd each (Little's law), but at most
 * max(RTTmin / 2, one packet's time). A buffer-filler squeezes Copa's
 * window until srtt / cwnd far exceeds a bottleneck packet's time; the
 * bound keeps the estimate from growing with it. Below a BDP of two
 * packets one packet's time is more than RTTmin / 2, and a lone Copa's one
 * queued packet must still read as its own.
 */
static inline u32 copa_own_queue_us(const struct copa *ca,
				    const struct copa_ack *ack, u32 inv)
{
	u64 own = div64_u64((u64)copa_srtt(ack) * max(inv, COPA_UNIT),
			    (u64)max(ack->cwnd, 1U) << COPA_SHIFT);

	return min_t(u64, own,
		     max(copa_win_min(&ca->rtt_min) / 2, copa_pkt_us(ack)));
}

/*
 * The RTT's recent spread: the highest RTTstanding of the last rounds
 * above RTTmin (rtt_max, see copa_update_rtt()), 0 when rtt_max is
 * below RTTmin: it is emptied after idle while RTTmin is kept.
 */
static inline u32 copa_rtt_spread(const struct copa *ca)
{
	u32 top = copa_win_max(&ca->rtt_max);
	u32 rtt_min = copa_win_min(&ca->rtt_min);

	return top > rtt_min ? top - rtt_min : 0;
}

/* Timer and scheduling jitter: max(RTTmin / 16, COPA_EMPTY_SLACK_US). */
static inline u32 copa_jitter_us(const struct copa *ca)
{
	return max(copa_win_min(&ca->rtt_min) / 16, (u32)COPA_EMPTY_SLACK_US);
}

/*
 * The queue is nearly empty when dq is within a tenth of the recent RTT
 * spread, within the timer jitter (copa_jitter_us()), or within the queue
 * Copa itself keeps at its current 1/delta (the configured one if larger).
 * A lone Copa drains to its own target every cycle, and in competitive mode
 * that target grows with 1/delta: measured against less, its own queue
 * would read as a competitor's and keep the mode going.
 */
static inline bool copa_queue_nearly_empty(const struct copa *ca,
					   const struct copa_ack *ack)
{
	u32 slack = max(copa_rtt_spread(ca) / 10, copa_jitter_us(ca));
	u32 inv = max(ca->inv_delta, ca->inv_delta0);

	return copa_dq_us(ca) <= max(slack, copa_own_queue_us(ca, ack, inv));
}

/*
 * A standing queue: more than twice Copa's own target queue and more than
 * RTTmin / 4, the most a lone Copa keeps (copa_target_inv_delta()). A loss
 * with such a queue is a buffer overflowing; a loss with less is a rate
 * limit without a buffer (a policer, a buffer shorter than Copa's target)
 * or noise.
 */
static inline bool copa_queue_standing(const struct copa *ca,
				       const struct copa_ack *ack)
{
	u32 rtt_min = copa_win_min(&ca->rtt_min);

	return copa_dq_us(ca) > max(2 * copa_own_queue_us(ca, ack,
							    ca->inv_delta0),
				    rtt_min / COPA_STANDING_DIV);
}

/*
 * A sample of a whole number of milliseconds most likely came from the TCP
 * timestamp echo (an ACK of retransmitted data carries no other timing),
 * which reads up to 1 ms short, an error RTTmin would keep for its whole
 * window. Such samples are skipped; a true one costs only itself.
 */
static inline bool copa_rtt_usable(s32 rtt_us)
{
	return rtt_us > 0 && rtt_us % COPA_USEC_PER_MSEC;
}

/*
 * Half the RTTmin window: max(10 s, 20 RTTmin) / 2, as the authors' sender
 * does. On a long path a slow start's overshoot queues for longer than
 * 10 s, and a fixed window would take that queue for propagation delay.
 */
static inline u32 copa_rtt_min_half(const struct copa *ca)
{
	u64 win = (u64)copa_win_min(&ca->rtt_min) * COPA_RTT_MIN_WIN_RTTS;

	return clamp_t(u64, win, COPA_RTT_MIN_WIN_US, U32_MAX / 2) / 2;
}

/*
 * While competitive, RTTmin's half-window is at least 5 minutes: a
 * buffer-filler's queue never drains, so every sample of a fresh 10 s
 * window would be queued and dq would read 0 (LEDBAT's base-delay history,
 * RFC 6817, keeps minutes for the same reason). A base RTT that really grew
 * is adopted after 5 to 10 minutes of competitive mode.
 */
static inline u32 copa_rtt_min_keep_half(const struct copa *ca)
{
	u32 half = copa_rtt_min_half(ca);

	return ca->competitive ? max(half, COPA_RTT_MIN_HOLD_US / 2) : half;
}

static inline void copa_update_rtt(struct copa *ca, const struct copa_ack *ack)
{
	u32 now = (u32)ack->now_us;
	u32 srtt = copa_srtt(ack);
	u32 rtt;

	if (!copa_rtt_usable(ack->rtt_us))
		return;
	rtt = ack->rtt_us;
	copa_win_min_update(&ca->rtt_min, now, copa_rtt_min_keep_half(ca),
			    rtt);
	copa_win_min_update(&ca->rtt_standing, now, srtt / 4, rtt);
	/*
	 * The spread's top is the highest RTTstanding, not the highest
	 * sample: a stalled host or a delayed ACK holds up a few ACKs by
	 * milliseconds, a spread the queue never had.
	 */
	copa_win_max_update(&ca->rtt_max, now, 2 * srtt,
			    copa_win_min(&ca->rtt_standing));
	if (copa_queue_nearly_empty(ca, ack))
		ca->empty_seen = 1;
}

/* ---------------------------------------------------------------------
 * Window bookkeeping.
 */

static inline u32 copa_clamp_cwnd(const struct copa_ack *ack, u64 cwnd)
{
	u32 hi = min(ack->cwnd_clamp, COPA_MAX_CWND);

	return clamp_t(u64, cwnd, COPA_MIN_CWND, max_t(u32, hi, COPA_MIN_CWND));
}

static inline void copa_set_cwnd(struct copa *ca, struct copa_ack *ack,
				 u64 cwnd)
{
	ack->cwnd = copa_clamp_cwnd(ack, cwnd);
	ca->cwnd_acc = 0;
}

/* Velocity starts again from 1 and counts rounds afresh. */
static inline void copa_reset_velocity(struct copa *ca)
{
	ca->velocity = 1;
	ca->same_dir_rounds = 0;
}

static inline void copa_exit_slow_start(struct copa *ca)
{
	ca->slow_start = 0;
	copa_reset_velocity(ca);
}

/*
 * Move cwnd by @num / (COPA_UNIT * cwnd) packets, @num signed. Instead
 * of dividing on every ACK and dropping the remainder, cwnd_acc collects
 * the numerators; cwnd moves by whole packets when |cwnd_acc| reaches
 * COPA_UNIT * cwnd and keeps the remainder, as tcp_cong_avoid_ai() does
 * for Reno. Sub-packet progress is therefore never lost: only the floor
 * COPA_MIN_CWND and the ceiling (copa_clamp_cwnd) discard it.
 * |cwnd_acc| < COPA_UNIT * COPA_MAX_CWND = 2^30 fits in s32.
 */
static inline void copa_move_cwnd(struct copa *ca, struct copa_ack *ack,
				  s64 num)
{
	u64 per_pkt = (u64)COPA_UNIT * max(ack->cwnd, 1U);
	s64 acc = ca->cwnd_acc + num;
	u64 mag = acc < 0 ? -(u64)acc : (u64)acc;
	u64 pkts = div64_u64(mag, per_pkt);
	s64 rem = mag - pkts * per_pkt;
	u64 cwnd = ack->cwnd;

	if (acc >= 0) {
		cwnd += pkts;
	} else if (pkts >= cwnd) {
		cwnd = 0;
	} else {
		cwnd -= pkts;
		rem = -rem;
	}
	if (cwnd < COPA_MIN_CWND || cwnd > copa_clamp_cwnd(ack, cwnd)) {
		copa_set_cwnd(ca, ack, cwnd);
		return;
	}
	ack->cwnd = cwnd;
	ca->cwnd_acc = rem;
}

/* ---------------------------------------------------------------------
 * Once per round: competitive mode, delta, loss reaction, velocity.
 */

/* A round ends when a packet sent after the previous round ended is ACKed. */
static inline void copa_update_round(struct copa *ca,
				     const struct copa_ack *ack)
{
	ca->round_start = !(ack->rs_delivered < 0 ||
			    copa_before(ack->prior_delivered,
					ca->next_round_delivered));
}

/* The next round starts at this ACK. */
static inline void copa_start_round(struct copa *ca,
				    const struct copa_ack *ack)
{
	ca->next_round_delivered = ack->delivered;
	ca->round_start_us = (u32)ack->now_us;
	ca->round_start_lost = ack->lost;
	ca->round_slow_start = ca->slow_start;
}

/*
 * Classify losses, and count them and ECN marks. A loss with a standing
 * queue is congestion: it counts for the loss reaction and for delta. A
 * loss with the queue low only marks the round for rate-limit detection
 * (copa_detect_limit()): random loss must not hold Copa below the link,
 * and a policer never shows the queue Copa waits for. A receiver echoes CE
 * on every ACK until the sender's CWR, about a round of ACKs: the echoes of
 * a round count as one lost packet, as an AQM's one drop would.
 */
static inline void copa_account_loss(struct copa *ca,
				     const struct copa_ack *ack)
{
	if (ack->losses > 0) {
		bool classify = copa_mech(COPA_MECH_LOSS_CLASS);
		bool standing = copa_queue_standing(ca, ack);

		if (standing || !classify) {
			ca->round_loss = 1;
			ca->loss_lost += ack->losses;
		}
		if (!standing || !classify)
			ca->round_drop = 1;
	}
	if (ca->ece && !ca->round_ece) {
		ca->round_loss = 1;
		ca->round_ece = 1;
		ca->loss_lost++;
	}
	ca->ece = 0;
	if (ack->acked_sacked > 0)
		ca->loss_delivered += ack->acked_sacked;
}

/* Was more than loss_thresh / @div % of the loss window so far lost? */
static inline bool copa_window_lost_over(const struct copa *ca, u32 div)
{
	u64 lost = ca->loss_lost;

	return lost * 100 * div >
	       (u64)ca->loss_thresh * (lost + ca->loss_delivered);
}

/*
 * Did more than loss_thresh % of a loss window get lost? The window spans
 * at least two rounds and at least 200 / loss_thresh packets, so that a
 * single loss is never more than half the threshold, however small cwnd.
 */
static inline bool copa_loss_window_exceeded(struct copa *ca)
{
	bool over;

	if (!ca->loss_thresh)
		return false;
	if (!ca->loss_second) {
		ca->loss_second = 1;
		return false;
	}
	if ((u64)ca->loss_lost + ca->loss_delivered < 200U / ca->loss_thresh)
		return false;
	over = copa_window_lost_over(ca, 1);
	ca->loss_second = 0;
	ca->loss_lost = 0;
	ca->loss_delivered = 0;
	return over;
}

/*
 * Competitive mode starts when the queue has not come nearly empty for
 * COPA_EMPTY_ROUNDS rounds, and ends when in the last 8 rounds it came
 * nearly empty in COPA_EMPTY_SPELLS separate spells, or for
 * COPA_EMPTY_ROUNDS rounds in a row. A lone Copa empties its queue every
 * few rounds; a buffer-filler's queue comes down once per sawtooth (tens of
 * rounds for cubic), which must not end the mode. Rounds, not times, are
 * counted, so a mode of any length cannot wrap. When it ends, RTTmin counts
 * as just measured: its window was kept long meanwhile.
 */
static inline bool copa_competitor_gone(u8 empty_rounds)
{
	u8 spells = empty_rounds & ~(empty_rounds >> 1);
	u8 streak = (1U << COPA_EMPTY_ROUNDS) - 1;

	return hweight8(spells) >= COPA_EMPTY_SPELLS ||
	       (empty_rounds & streak) == streak;
}

static inline void copa_update_mode(struct copa *ca, u32 now)
{
	ca->empty_rounds = ca->empty_rounds << 1 | ca->empty_seen;
	if (ca->empty_seen)
		ca->quiet_rounds = 0;
	else if (ca->quiet_rounds < 255)
		ca->quiet_rounds++;
	ca->empty_seen = 0;
	if (!ca->competitive_on) {
		ca->competitive = 0;
	} else if (!ca->competitive) {
		ca->competitive = ca->quiet_rounds >= COPA_EMPTY_ROUNDS;
	} else if (copa_competitor_gone(ca->empty_rounds)) {
		ca->competitive = 0;
		copa_win_restart(&ca->rtt_min, now);
	}
}

/*
 * Did this round lose more than loss_thresh / 4 % of the packets of the
 * loss window so far? Lighter random loss is left to the delay rule, as
 * in the paper; an overflowing buffer or a policer loses more.
 */
static inline bool copa_round_lossy(const struct copa *ca)
{
	return ca->round_loss && copa_window_lost_over(ca, COPA_LIGHT_LOSS_DIV);
}

/*
 * AIMD on 1/delta, once per round. In competitive mode 1/delta is never
 * below the configured value (the paper's rule: backing off further
 * exactly when the competitor overflows the buffer would hand it the
 * link, and a loss reaction or a hold's end before the mode began must
 * not carry into it); a round with a loss or an ECN mark halves it down
 * to that value, and a clean round adds 1. Otherwise,
 * with the loss reaction on, a lossy round (copa_round_lossy()) halves it
 * down to 1 (delta = 1), so that Copa's queue fits a buffer shorter than
 * 1/delta packets; a clean round regrows it by 1/32 towards the configured
 * value, which it never exceeds.
 */
static inline u32 copa_next_inv_delta(const struct copa *ca)
{
	u32 inv = ca->inv_delta;

	if (ca->competitive) {
		inv = max(inv, ca->inv_delta0);
		return ca->round_loss ? max(inv / 2, ca->inv_delta0) :
					min(inv + COPA_UNIT, COPA_INV_DELTA_MAX);
	}
	if (ca->loss_thresh && copa_round_lossy(ca))
		return max(inv / 2, COPA_INV_DELTA_MIN);
	if (ca->round_loss)
		return min(inv, ca->inv_delta0);
	return min(inv + COPA_INV_DELTA_REGROW, ca->inv_delta0);
}

/* Is 1/delta still regrowing after a loss reaction? */
static inline bool copa_regrowing(const struct copa *ca)
{
	return ca->inv_delta < ca->inv_delta0;
}

/* Largest v that moves cwnd by at most @room / 2 packets per round. */
static inline u32 copa_velocity_cap(const struct copa *ca, u32 room)
{
	u32 inv = max(ca->inv_delta, COPA_INV_DELTA_MIN);
	u64 cap = div_u64((u64)room << COPA_SHIFT, 2 * inv);

	return clamp_t(u64, cap, 1, COPA_MAX_VELOCITY);
}

/*
 * v doubles each round once cwnd has moved the same way for
 * COPA_VELOCITY_ROUNDS rounds, up to half a window per round. While 1/delta
 * regrows after a loss reaction, v grows only while cwnd is below the
 * window the loss cut, by at most half the distance per round: the path
 * carried that window a few rounds ago, and passing it would overflow the
 * buffer again.
 */
static inline void copa_update_velocity(struct copa *ca, u32 cwnd)
{
	enum copa_dir dir = COPA_FLAT;
	u32 cap;

	if (cwnd > ca->round_cwnd)
		dir = COPA_UP;
	else if (cwnd < ca->round_cwnd)
		dir = COPA_DOWN;
	ca->round_cwnd = cwnd;

	if (dir == COPA_FLAT || dir != ca->dir) {
		ca->dir = dir;
		ca->same_dir_rounds = 1;
		ca->velocity = 1;
		return;
	}
	if (ca->same_dir_rounds < COPA_VELOCITY_ROUNDS)
		ca->same_dir_rounds++;
	if (ca->same_dir_rounds < COPA_VELOCITY_ROUNDS)
		return;
	cap = copa_velocity_cap(ca, cwnd);
	if (copa_regrowing(ca))
		cap = dir == COPA_UP && cwnd < ca->prior_cwnd ?
		      min(cap, copa_velocity_cap(ca, ca->prior_cwnd - cwnd)) : 1;
	ca->velocity = min(2U * ca->velocity, cap);
}

/* The loss reaction's cut: cwnd *= 7/10. */
static inline void copa_cut_cwnd(struct copa *ca, struct copa_ack *ack)
{
	copa_set_cwnd(ca, ack, (u64)ack->cwnd * COPA_LOSS_CUT_NUM /
			       COPA_LOSS_CUT_DEN);
	copa_exit_slow_start(ca);
}

/* ---------------------------------------------------------------------
 * Rate limits: a policer, or a buffer shorter than Copa's target queue.
 */

/*
 * Whole packets in @us at @rate bytes/s. @rate <= COPA_RATE_MAX < 2^36
 * and @us is at most COPA_MAX_RTT_US (2^28): the product fits u64.
 */
static inline u64 copa_pkts_in(const struct copa_ack *ack, u64 rate, u32 us)
{
	return div64_u64(min(rate, COPA_RATE_MAX) * min(us, COPA_MAX_RTT_US),
			 (u64)COPA_USEC_PER_SEC * max(ack->mss, 1U));
}

/* Packets in @rtt_us at @rate bytes/s (at least one). */
static inline u64 copa_rate_pkts(const struct copa_ack *ack, u64 rate,
				 u32 rtt_us)
{
	return max_t(u64, copa_pkts_in(ack, rate, rtt_us), 1);
}

/* Packets in one RTTmin at @rate bytes/s (at least one). */
static inline u64 copa_rate_bdp(const struct copa *ca,
				const struct copa_ack *ack, u64 rate)
{
	return copa_rate_pkts(ack, rate, copa_win_min(&ca->rtt_min));
}

/* Delivery rate of the round ending now, bytes/s, at most COPA_RATE_MAX. */
static inline u64 copa_round_rate(const struct copa *ca,
				  const struct copa_ack *ack)
{
	u32 pkts = min(ack->delivered - ca->next_round_delivered,
		       COPA_RATE_MAX_PKTS);
	u64 bytes = (u64)pkts * ack->mss;
	u32 elapsed = max((u32)ack->now_us - ca->round_start_us, 1U);

	return min(div_u64(bytes * COPA_USEC_PER_SEC, elapsed), COPA_RATE_MAX);
}

/*
 * Does the round ending now measure the path? Not if the application
 * limited it (the rate sample says so) or if sending restarted after an
 * idle period during it (copa_on_tx_start()): its start time is then from
 * before the silence, and its rate what the application sent.
 */
static inline bool copa_round_measured(const struct copa *ca,
				       const struct copa_ack *ack)
{
	return !ack->app_limited && !ca->round_idle;
}

/* Packets marked lost since the round ending now began. */
static inline u32 copa_round_lost(const struct copa *ca,
				  const struct copa_ack *ack)
{
	return ack->lost - ca->round_start_lost;
}

/* Packets the round ending now delivered or lost: what its window sent. */
static inline u64 copa_round_sent(const struct copa *ca,
				  const struct copa_ack *ack)
{
	return (u64)(ack->delivered - ca->next_round_delivered) +
	       copa_round_lost(ca, ack);
}

/* Did the round ending now lose limit_loss % of its packets, queue low? */
static inline bool copa_round_limited(const struct copa *ca,
				      const struct copa_ack *ack)
{
	return ca->round_drop &&
	       (u64)copa_round_lost(ca, ack) * 100 >=
	       copa_round_sent(ca, ack) * ca->limit_loss;
}

/* Does @rate agree with the limited round before, within rate_tol %? */
static inline bool copa_rates_agree(const struct copa *ca, u64 rate)
{
	u64 limit = copa_rate_load(ca->limit_rate);
	u64 diff = max(rate, limit) - min(rate, limit);

	return diff <= COPA_RATE_SLACK || diff * 100 <= limit * ca->rate_tol;
}

/*
 * The part of @cwnd the queue does not hold: cwnd less dq's worth of
 * packets at @rate (at least one packet). Past a link's rate a FIFO or an
 * AQM queues what a larger window adds while a policer drops it, so only
 * behind a policer does this grow with cwnd; counting the whole window, a
 * full link with random loss would read as a limit.
 */
static inline u32 copa_unqueued_cwnd(const struct copa *ca,
				     const struct copa_ack *ack, u32 cwnd,
				     u64 rate)
{
	u64 queued = copa_pkts_in(ack, rate, copa_dq_us(ca));

	return cwnd - min_t(u64, queued, max(cwnd, 1U) - 1);
}

/*
 * Is the queue a full buffer shorter than Copa's target? Its trough this
 * round, dq, is at least 3/4 of the spread (the buffer stayed full; ACK
 * jitter blurs the top), more than two packets' time (a delayed ACK waits
 * for a second packet) and COPA_EMPTY_SLACK_US, and below the queue Copa
 * aims at with its configured delta. Such a buffer drops Copa's excess
 * every round while dq stays under the standing threshold, so the losses
 * would otherwise never count as congestion nor as a limit.
 */
static inline bool copa_short_buffer_full(const struct copa *ca,
					  const struct copa_ack *ack)
{
	u32 dq = copa_dq_us(ca);

	return copa_mech(COPA_MECH_SHORT_BUFFER) &&
	       dq > max(2 * copa_pkt_us(ack), (u32)COPA_EMPTY_SLACK_US) &&
	       (u64)dq * 4 >= (u64)copa_rtt_spread(ca) * 3 &&
	       dq < copa_own_queue_us(ca, ack, ca->inv_delta0);
}

/*
 * With a short buffer full (copa_short_buffer_full()), did the window that
 * sent the round ending now, @cwnd, exceed what @rate fills in RTTstanding
 * by more than rate_tol %? The excess is what the buffer drops each round.
 */
static inline bool copa_short_buffer_over(const struct copa *ca,
					  const struct copa_ack *ack, u32 cwnd,
					  u64 rate)
{
	u64 carried = copa_rate_pkts(ack, rate,
				     copa_win_min(&ca->rtt_standing));

	return copa_short_buffer_full(ca, ack) &&
	       (u64)cwnd * 100 > (u64)(100 + ca->rate_tol) * carried;
}

/*
 * Did the window that sent the round ending now, @cwnd, grow past what the
 * path carries? Either its unqueued part grew by more than twice rate_tol %
 * over the previous limited round's (a plateau of the delivery rate over
 * rounds), or it exceeds what @rate fills in RTTstanding by more than four
 * times rate_tol % (one round that lost far more than random loss does, as
 * a slow start's overshoot past a policer), or a short buffer overflows
 * (copa_short_buffer_over()). Against the last hold's rate, which a limit
 * already confirmed, half the tolerance suffices.
 */
static inline bool copa_cwnd_beyond(const struct copa *ca,
				    const struct copa_ack *ack, u32 cwnd,
				    u64 rate)
{
	u32 tol = ca->limit_held ? ca->rate_tol : 2 * ca->rate_tol;
	u64 carried = copa_rate_pkts(ack, rate,
				     copa_win_min(&ca->rtt_standing));

	return (u64)copa_unqueued_cwnd(ca, ack, cwnd, rate) * 100 >
	       (u64)(100 + tol) * ca->limit_cwnd ||
	       (u64)cwnd * 100 > (u64)(100 + 2 * tol) * carried ||
	       copa_short_buffer_over(ca, ack, cwnd, rate);
}

/*
 * Policed: pace at hold_rate with a window of 1.5 times its BDP, and at
 * least two packets more than the BDP (a delayed ACK holds back one), room
 * enough for pacing, not cwnd, to set the rate.
 */
static inline u64 copa_hold_cwnd(const struct copa *ca,
				 const struct copa_ack *ack)
{
	u64 bdp = copa_rate_bdp(ca, ack, copa_rate_load(ca->hold_rate));

	return max(3 * bdp / 2, bdp + 2);
}

static inline void copa_apply_hold(struct copa *ca, struct copa_ack *ack)
{
	copa_set_cwnd(ca, ack, copa_hold_cwnd(ca, ack));
	ack->pacing_rate = copa_rate_load(ca->hold_rate);
}

/* Rounds a hold lasts: hold_rounds << hold_shift, at most 255. */
static inline u32 copa_hold_len(const struct copa *ca)
{
	return min_t(u32, (u32)ca->hold_rounds << ca->hold_shift, 255);
}

/*
 * Hold at @rate bytes/s from this ACK on, for hold_rounds rounds, twice as
 * long as the previous hold (up to 8 times, at most 255 rounds) when the
 * probe after it met a limit again: each probe costs one overshoot's
 * losses, so a persistent limit is probed ever less often.
 */
static inline void copa_hold(struct copa *ca, struct copa_ack *ack, u64 rate)
{
	if (!ca->probing)
		ca->hold_shift = 0;
	else if (ca->hold_shift < 3)
		ca->hold_shift++;
	ca->hold_rate = copa_rate_store(rate);
	ca->hold_lossy = 0;
	ca->hold_cut = 0;
	ca->limit_rounds = copa_hold_len(ca);
	ca->slow_start = 0;
	copa_apply_hold(ca, ack);
}

/*
 * Leave a hold: one BDP of the held rate, in congestion avoidance, probing
 * above it as after a loss reaction (copa_update_velocity()): half the
 * configured 1/delta regrowing (competitive mode keeps its own, never
 * below the configured one), paced at 1x. The held rate stays the last
 * limit seen, so a probe that meets it again holds again at its first
 * limited round.
 */
static inline void copa_end_hold(struct copa *ca, struct copa_ack *ack)
{
	u64 rate = copa_rate_load(ca->hold_rate);

	copa_set_cwnd(ca, ack, copa_rate_bdp(ca, ack, rate));
	ack->pacing_rate = rate;
	ca->limit_rate = ca->hold_rate;
	ca->limit_cwnd = ack->cwnd;
	ca->limit_rounds = 0;
	ca->limit_held = 1;
	ca->probing = 1;
	ca->hold_rate = 0;
	if (!ca->competitive)
		ca->inv_delta = max(ca->inv_delta0 / 2, COPA_INV_DELTA_MIN);
	ca->prior_cwnd = ack->cwnd;
	ca->round_cwnd = ack->cwnd;
	ca->dir = COPA_FLAT;
	copa_exit_slow_start(ca);
}

/*
 * The rate to hold when a limited round's @rate agrees with the sample: the
 * lower of the two at a first detection (a lossy round may still carry a
 * token bucket's burst), their mean when the sample is the last hold's
 * rate, so that repeated holds settle on the limit instead of ratcheting
 * down with the noise of single rounds.
 */
static inline u64 copa_hold_rate(const struct copa *ca, u64 rate)
{
	u64 limit = copa_rate_load(ca->limit_rate);

	if (ca->limit_held)
		return rate / 2 + limit / 2;
	return min(rate, limit);
}

/* No limited round to compare with; the next hold is a first one. */
static inline void copa_forget_limit(struct copa *ca)
{
	ca->limit_rate = 0;
	ca->probing = 0;
	ca->start_sample = 0;
}

/* No hold, and no limit to hold at: Copa's delay rule decides. */
static inline void copa_forget_hold(struct copa *ca)
{
	ca->hold_rate = 0;
	ca->limit_rounds = 0;
	copa_forget_limit(ca);
}

/*
 * Did the ACK train that ended slow start on a loss meet a bottleneck? Its
 * rate (this round's delivery so far, from at least COPA_TRAIN_MIN_PKTS
 * packets) carries less than 4/5 of cwnd in RTTstanding, with the queue
 * low. A train below every bottleneck arrives about as fast as slow start
 * sent it; one that met a link, a short buffer or an emptied token bucket
 * arrives at that rate.
 */
static inline bool copa_train_limited(const struct copa *ca,
				      const struct copa_ack *ack, u64 rate)
{
	u32 pkts = ack->delivered - ca->next_round_delivered;
	u32 standing = copa_win_min(&ca->rtt_standing);

	return ca->detect && pkts >= COPA_TRAIN_MIN_PKTS &&
	       !copa_queue_standing(ca, ack) &&
	       (u64)ack->cwnd * 4 > 5 * copa_rate_pkts(ack, rate, standing);
}

/* Slow start ends on a loss: keep its train's rate if it met a limit. */
static inline void copa_sample_start(struct copa *ca,
				     const struct copa_ack *ack)
{
	u64 rate = copa_round_rate(ca, ack);

	if (!copa_mech(COPA_MECH_START_TRAIN) ||
	    !copa_round_measured(ca, ack) ||
	    !copa_train_limited(ca, ack, rate))
		return;
	ca->limit_rate = copa_rate_store(rate);
	ca->limit_rounds = 0;
	ca->limit_held = 0;
	ca->start_sample = 1;
}

/*
 * A round has ended since slow start ended on a loss whose train met a
 * limit (copa_sample_start()). If it lost an eighth of what it sent or
 * more, the limit is not noise: hold at once, at the train's rate within
 * the round's delivery rate and a quarter above it (Copa grows a window by
 * at most a quarter a round). The overshoot's losses land in the round
 * under way at the first loss or in the next, so COPA_START_ROUNDS round
 * ends decide; then the sample is forgotten.
 */
static inline void copa_hold_start(struct copa *ca, struct copa_ack *ack)
{
	u64 rate = copa_round_rate(ca, ack);
	u64 cap = rate + rate / COPA_ROUND_STEP_DIV;

	if (rate && (u64)copa_round_lost(ca, ack) * COPA_START_LOSS_DIV >=
		    copa_round_sent(ca, ack)) {
		ca->start_sample = 0;
		copa_hold(ca, ack, clamp_t(u64, copa_rate_load(ca->limit_rate),
					   rate, cap));
	} else if (ca->limit_rounds >= COPA_START_ROUNDS) {
		copa_forget_limit(ca);
	}
}

/*
 * Take the limited round ending now, its window @cwnd and its delivery
 * @rate, as the sample the next limited round is compared with.
 */
static inline void copa_sample_limit(struct copa *ca,
				     const struct copa_ack *ack, u32 cwnd,
				     u64 rate)
{
	u32 sent = min_t(u64, copa_round_sent(ca, ack), U32_MAX);

	ca->limit_rate = copa_rate_store(rate);
	ca->limit_cwnd = copa_unqueued_cwnd(ca, ack, max(cwnd, sent), rate);
	ca->limit_rounds = 0;
	ca->limit_held = 0;
}

/*
 * A limited round (losses with the queue low) whose delivery rate agrees
 * with that of another limited round at most COPA_LIMIT_MAX_AGE rounds
 * before, while the window grew past what that rate carries
 * (copa_cwnd_beyond()): the path delivers no more however much more is
 * sent, and does not queue the rest. A token-bucket policer does that, and
 * so does a buffer shorter than Copa's target queue: Copa holds a rate
 * (copa_hold_rate()). With random loss the rate grows with the window, so
 * two rounds agree only once the link is full, where a hold costs nothing.
 * Rounds that do not measure the path (copa_round_measured()) clear the
 * sample; a round that began in slow start is not sampled (its window
 * doubled during it); a sample's window is at least what its round sent. A
 * limited round at a rate that disagrees with the sample becomes the new
 * sample. With a short buffer full and the window past what the round
 * carried (copa_short_buffer_over()), one round suffices: what a full
 * buffer delivers is the link's rate.
 */
static inline void copa_detect_limit(struct copa *ca, struct copa_ack *ack,
				     u32 cwnd)
{
	u64 rate;

	if (!ca->detect)
		return;
	if (!copa_round_measured(ca, ack)) {
		copa_forget_limit(ca);
		return;
	}
	if (ca->limit_rate && ++ca->limit_rounds > COPA_LIMIT_MAX_AGE)
		copa_forget_limit(ca);
	if (ca->start_sample) {
		copa_hold_start(ca, ack);
		return;
	}
	if (ca->round_slow_start || !copa_round_limited(ca, ack))
		return;
	rate = copa_round_rate(ca, ack);
	if (!rate)
		return;
	if (ca->limit_rate && copa_rates_agree(ca, rate)) {
		if (copa_cwnd_beyond(ca, ack, cwnd, rate))
			copa_hold(ca, ack, copa_hold_rate(ca, rate));
		else
			ca->limit_rounds = 0;
		return;
	}
	if (copa_short_buffer_over(ca, ack, cwnd, rate)) {
		copa_hold(ca, ack, rate);
		return;
	}
	copa_sample_limit(ca, ack, cwnd, rate);
}

/*
 * A hold that lost in two rounds (copa_count_hold()) holds on, once, at the
 * rate the second of them delivered: a token bucket let that through while
 * it was empty, so a hold above a policer's rate steps down onto it instead
 * of ending and probing again above it. Random loss goes on losing at the
 * lower rate, and ends the hold.
 */
static inline void copa_cut_hold(struct copa *ca, struct copa_ack *ack)
{
	u32 rate = copa_rate_store(copa_round_rate(ca, ack));

	if (rate)
		ca->hold_rate = min(ca->hold_rate, rate);
	ca->hold_cut = 1;
	ca->hold_lossy = 0;
	copa_apply_hold(ca, ack);
}

/*
 * A hold paced above a link fills a short buffer in front of it, then
 * loses its excess, too little a round to count as limited. With the
 * buffer full, what a lossy round delivered is the link's rate: pace at
 * that if it is lower. Rounds without losses are left alone: delayed ACKs
 * make their rates read low.
 */
static inline void copa_trim_hold(struct copa *ca, struct copa_ack *ack)
{
	u32 rate = copa_rate_store(copa_round_rate(ca, ack));

	if (rate && rate < ca->hold_rate) {
		ca->hold_rate = rate;
		copa_apply_hold(ca, ack);
	}
}

/*
 * Count down a hold. It ends early if a standing queue builds (the limit
 * queues, so it is not a policer, or the path changed), and at its second
 * limited round once the held rate was cut: a rate under a limit loses
 * nothing, so either the rate is above the limit and the next detection
 * averages it with a lower sample, or the loss is random and the delay
 * rule serves the path better. Its first two rounds are not counted (a
 * loss shows up to a round after it happened, so they report what was sent
 * before the hold), nor are rounds that do not measure the path
 * (copa_round_measured()). A lossy round with a short buffer full trims
 * the held rate (copa_trim_hold()).
 */
static inline void copa_count_hold(struct copa *ca, struct copa_ack *ack)
{
	bool measured = copa_round_measured(ca, ack);
	bool limited = measured &&
		       (u32)ca->limit_rounds + 1 < copa_hold_len(ca) &&
		       copa_round_limited(ca, ack);
	bool lost_twice = limited && ca->hold_lossy;

	if (copa_queue_standing(ca, ack) || !--ca->limit_rounds ||
	    (lost_twice && ca->hold_cut))
		copa_end_hold(ca, ack);
	else if (lost_twice)
		copa_cut_hold(ca, ack);
	else
		ca->hold_lossy |= limited;
	if (ca->hold_rate && measured && copa_round_lost(ca, ack) &&
	    copa_short_buffer_full(ca, ack))
		copa_trim_hold(ca, ack);
}

static inline void copa_on_round(struct copa *ca, struct copa_ack *ack)
{
	u32 round_cwnd = ca->round_cwnd;

	copa_update_mode(ca, (u32)ack->now_us);
	if (ca->drain_rounds)
		ca->drain_rounds--;
	ca->inv_delta = copa_next_inv_delta(ca);
	if (copa_loss_window_exceeded(ca))
		copa_cut_cwnd(ca, ack);
	copa_update_velocity(ca, ack->cwnd);
	ca->calm = 0;
	if (ca->hold_rate)
		copa_count_hold(ca, ack);
	else
		copa_detect_limit(ca, ack, round_cwnd);
	ca->round_loss = 0;
	ca->round_ece = 0;
	ca->round_drop = 0;
	ca->round_idle = 0;
	copa_start_round(ca, ack);
}

/* ---------------------------------------------------------------------
 * Per ACK: move cwnd towards the target, pace.
 */

/*
 * 1/delta for the target, COPA_UNIT scale. Copa's standing queue is about
 * 1/delta packets; on a path of a few packets' BDP that adds most of an RTT
 * again. Outside competitive mode the queue aimed at is therefore also at
 * most BDP / COPA_QUEUE_BDP_DIV packets (the BDP estimated as cwnd * RTTmin
 * / RTTstanding), but at least COPA_QUEUE_MIN (below one packet the link
 * idles between ACKs) and at least COPA_EMPTY_SLACK_US of sending (a
 * shorter queue cannot be told from timer jitter): delta may exceed 1
 * there. Where 1/delta packets are below BDP / 4, nothing changes.
 * Competitive mode keeps its 1/delta: it must queue like its competitor.
 */
static inline u64 copa_target_inv_delta(const struct copa *ca, u32 cwnd)
{
	u32 rtt_min = copa_win_min(&ca->rtt_min);
	u32 standing = copa_win_min(&ca->rtt_standing);
	u64 cwnd_fp = (u64)cwnd << COPA_SHIFT;
	u64 bdp_fp, jitter_fp;

	if (ca->competitive || !standing)
		return ca->inv_delta;
	bdp_fp = div_u64(cwnd_fp * rtt_min, standing);
	jitter_fp = div_u64(cwnd_fp * COPA_EMPTY_SLACK_US, standing);
	return min_t(u64, ca->inv_delta,
		     max3(bdp_fp / COPA_QUEUE_BDP_DIV, jitter_fp,
			  (u64)COPA_QUEUE_MIN));
}

/* Target window RTTstanding / (delta * dq), COPA_UNIT scale. */
static inline u64 copa_target_cwnd(const struct copa *ca, u32 cwnd)
{
	u64 standing = copa_win_min(&ca->rtt_standing);
	u32 dq = copa_dq_us(ca);

	if (!dq)
		return U64_MAX;
	return div_u64(standing * copa_target_inv_delta(ca, cwnd), dq);
}

/*
 * The first loss ends slow start at once, whatever the loss reaction: a
 * slow start doubles past any limit, queue or none. cwnd goes back to what
 * the path delivered in the round trip this ACK closes (the rate sample's
 * delivered count), at most half of cwnd, because the previous round's
 * window was often past the limit already. An ACK without a valid sample
 * (rs->delivered < 0: a NewReno dupack, SACK reneging) leaves half.
 */
static inline void copa_end_slow_start_on_loss(struct copa *ca,
					       struct copa_ack *ack)
{
	u32 cwnd = ack->cwnd / 2;

	if (!ca->slow_start || ack->losses <= 0)
		return;
	if (ack->rs_delivered >= 0)
		cwnd = min_t(u32, cwnd, ack->rs_delivered);
	copa_sample_start(ca, ack);
	copa_set_cwnd(ca, ack, cwnd);
	copa_exit_slow_start(ca);
}

/*
 * How far a round of ACKs moves cwnd, COPA_UNIT scale: v / delta packets,
 * within two bounds that keep velocity from overshooting while the delay
 * signal is a round late. Up, at most cwnd / COPA_ROUND_STEP_DIV: with the
 * queue empty the target gives no distance to go. Down, at most 3/4 of the
 * queue measured now (cwnd * dq / RTTstanding packets), so that the queue
 * drains geometrically instead of the link emptying. While slow start's
 * overshoot drains (drain_rounds), a decrease moves by that bound itself.
 */
static inline u64 copa_round_step(const struct copa *ca, u32 cwnd,
				  bool increase)
{
	u64 step = (u64)ca->velocity * ca->inv_delta;
	u32 standing = copa_win_min(&ca->rtt_standing);
	u64 cap;

	if (increase)
		cap = ((u64)cwnd << COPA_SHIFT) / COPA_ROUND_STEP_DIV;
	else
		cap = div64_u64(((u64)cwnd << COPA_SHIFT) * copa_dq_us(ca) *
				COPA_DRAIN_NUM,
				(u64)COPA_DRAIN_DEN * max(standing, 1U));
	cap = max_t(u64, cap, 1);
	return ca->drain_rounds && !increase ? cap : min(step, cap);
}

/*
 * Slow start ends at its first "decrease" decision, a round after the
 * queue appeared: by then the window has grown by up to another BDP, most
 * of it on its way into the queue. For COPA_DRAIN_ROUNDS more round starts
 * a decrease goes at its bound, 3/4 of the measured queue per round
 * (copa_round_step()), so the overshoot drains as it lands, before it can
 * start competitive mode, and no more than the queue holds goes.
 */
static inline void copa_end_slow_start_on_queue(struct copa *ca)
{
	copa_exit_slow_start(ca);
	ca->drain_rounds = COPA_DRAIN_ROUNDS;
}

/*
 * Move cwnd towards the target for acked packets: v / (delta * cwnd)
 * packets per packet, that is acked * v * (1/delta in COPA_UNIT scale)
 * over COPA_UNIT * cwnd. Slow start adds one packet per packet instead.
 * A window that did not limit sending does not grow.
 */
static inline void copa_update_cwnd(struct copa *ca, struct copa_ack *ack)
{
	u64 target = copa_target_cwnd(ca, ack->cwnd);
	bool increase = ((u64)ack->cwnd << COPA_SHIFT) < target;
	u32 acked = min_t(u32, max(ack->acked_sacked, 0), COPA_MAX_CWND);
	s64 num;

	ack->target = min_t(u64, target >> COPA_SHIFT, U32_MAX);
	if (!acked || !copa_win_min(&ca->rtt_standing))
		return;
	if ((increase && ca->dir == COPA_DOWN) ||
	    (!increase && ca->dir == COPA_UP))
		copa_reset_velocity(ca);
	if (ca->slow_start && !increase)
		copa_end_slow_start_on_queue(ca);
	if (increase && !ack->cwnd_limited)
		return;
	if (ca->slow_start) {
		copa_set_cwnd(ca, ack, (u64)ack->cwnd + acked);
		return;
	}
	num = (s64)acked * copa_round_step(ca, ack->cwnd, increase);
	copa_move_cwnd(ca, ack, increase ? num : -num);
}

/*
 * Pace at 2 * cwnd / RTTstanding (srtt, or 1 ms, before any sample). Pace
 * at cwnd / RTTstanding ("calm") while 1/delta regrows after a loss
 * reaction, and for the first round after an idle period or a policer
 * hold: the path may not absorb a burst sent faster than the window
 * drains. Since RTTstanding <= srtt, this still lets the whole window
 * out within one round.
 */
static inline u64 copa_pacing_rate(const struct copa *ca,
				   const struct copa_ack *ack)
{
	u32 rtt = copa_win_min(&ca->rtt_standing);
	u32 pct = copa_regrowing(ca) || ca->calm ? COPA_PACE_CALM_PCT :
						   COPA_PACE_PCT;
	u64 bytes = (u64)pct * ack->cwnd * ack->mss * (COPA_USEC_PER_SEC / 100);

	if (!rtt)
		rtt = ack->srtt_us ? ack->srtt_us : COPA_USEC_PER_MSEC;
	return div_u64(bytes, rtt);
}

/* The rate a hold paces at, bytes/s; 0 when Copa is not holding one. */
static inline u64 copa_held_rate(const struct copa *ca)
{
	return copa_rate_load(ca->hold_rate);
}

static inline enum copa_mode copa_mode(const struct copa *ca)
{
	if (ca->hold_rate)
		return COPA_MODE_POLICED;
	if (ca->slow_start)
		return COPA_MODE_SLOW_START;
	return ca->competitive ? COPA_MODE_COMPETITIVE : COPA_MODE_DEFAULT;
}

/*
 * Process one ACK: @ack->cwnd and @ack->pacing_rate are the result.
 * False if Copa has no state yet (the SYN-ACK can reach cong_control
 * before init on 7.x): then leave the socket alone.
 */
static inline bool copa_on_ack(struct copa *ca, struct copa_ack *ack)
{
	if (!copa_ready(ca))
		return false;
	copa_ack_in(ack);
	ack->target = 0;
	copa_update_rtt(ca, ack);
	copa_account_loss(ca, ack);
	copa_end_slow_start_on_loss(ca, ack);
	copa_update_round(ca, ack);
	if (ca->round_start)
		copa_on_round(ca, ack);

	if (ca->hold_rate) {
		copa_apply_hold(ca, ack);
		return true;
	}
	copa_update_cwnd(ca, ack);
	ack->pacing_rate = copa_pacing_rate(ca, ack);
	return true;
}

/*
 * The pacing rate for window @cwnd between ACKs (at init, after idle), or
 * 0 to leave the socket's: a hold paces at its own rate, and a state
 * before init has none.
 */
static inline u64 copa_window_pacing_rate(const struct copa *ca, u32 cwnd,
					  u32 mss, u32 srtt_us)
{
	struct copa_ack ack = {
		.cwnd		= cwnd,
		.mss		= mss,
		.srtt_us	= srtt_us,
	};

	if (!copa_ready(ca) || ca->hold_rate)
		return 0;
	copa_ack_in(&ack);
	return copa_pacing_rate(ca, &ack);
}

/* ---------------------------------------------------------------------
 * Connection events.
 */

/* (Re)start from slow start with the configured delta; RTTmin is kept. */
static inline void copa_restart(struct copa *ca, u32 cwnd, u32 delivered)
{
	if (!copa_ready(ca))
		return;
	ca->slow_start = 1;
	ca->round_slow_start = 1;
	ca->competitive = 0;
	ca->round_loss = 0;
	ca->loss_second = 0;
	ca->empty_seen = 0;
	ca->calm = 0;
	ca->quiet_rounds = 0;
	ca->empty_rounds = 0;
	ca->drain_rounds = 0;
	ca->dir = COPA_FLAT;
	copa_reset_velocity(ca);
	ca->cwnd_acc = 0;
	copa_forget_hold(ca);
	ca->limit_held = 0;
	ca->round_drop = 0;
	ca->loss_lost = 0;
	ca->loss_delivered = 0;
	ca->inv_delta = ca->inv_delta0;
	ca->round_cwnd = copa_cwnd_in(cwnd);
	ca->next_round_delivered = delivered;
}

/*
 * A new connection: @delta_milli is delta in thousandths (1 to 1000),
 * @loss_thresh the loss reaction in percent (0 to 100).
 */
static inline void copa_reset(struct copa *ca, u32 delta_milli,
			      bool competitive, u32 loss_thresh, u32 cwnd,
			      u32 delivered)
{
	*ca = (struct copa){};
	ca->inv_delta0 = (1000U << COPA_SHIFT) / clamp_t(u32, delta_milli, 1, 1000);
	ca->competitive_on = competitive;
	ca->loss_thresh = min(loss_thresh, 100U);
	ca->detect = copa_mech(COPA_MECH_RATE_LIMIT);
	ca->limit_loss = COPA_LIMIT_LOSS_PCT;
	ca->rate_tol = COPA_RATE_TOL_PCT;
	ca->hold_rounds = COPA_HOLD_ROUNDS;
	copa_restart(ca, cwnd, delivered);
	ca->prior_cwnd = copa_cwnd_in(cwnd);
	ca->prior_inv_delta = ca->inv_delta0 >> COPA_PRIOR_SHIFT;
	ca->prior_slow_start = 1;
}

/*
 * The stack is about to reduce the window (recovery, timeout, ECN): keep
 * what an undo must restore.
 */
static inline void copa_save_prior(struct copa *ca, u32 cwnd)
{
	if (!copa_ready(ca))
		return;
	ca->prior_cwnd = copa_cwnd_in(cwnd);
	ca->prior_inv_delta = ca->inv_delta >> COPA_PRIOR_SHIFT;
	ca->prior_slow_start = ca->slow_start;
	ca->prior_held = !!ca->hold_rate;
}

/*
 * The losses of a reduction the stack undid were not losses, and neither
 * were the limited rounds they made: forget those, this round's losses,
 * and a hold that began since the reduction (reordering past RACK's window
 * does this). A hold that was on before the reduction stays, and so does
 * the limit a probe after a hold tests: a policer's drops are never undone.
 */
static inline void copa_undo_limit(struct copa *ca)
{
	ca->round_drop = 0;
	ca->round_loss = ca->round_ece;
	if (!ca->prior_held && !ca->probing)
		copa_forget_hold(ca);
}

/*
 * The reduction was spurious (DSACK, F-RTO, timestamps): restore the
 * window, 1/delta and the phase saved before it, forget what its losses
 * made the detector see; return the window.
 */
static inline u32 copa_undo(struct copa *ca, u32 cwnd)
{
	u32 inv = (u32)ca->prior_inv_delta << COPA_PRIOR_SHIFT;

	if (!copa_ready(ca))
		return cwnd;
	copa_undo_limit(ca);
	ca->inv_delta = clamp_t(u32, max(ca->inv_delta, inv),
				COPA_INV_DELTA_MIN, COPA_INV_DELTA_MAX);
	if (!ca->prior_slow_start)
		ca->slow_start = 0;
	copa_reset_velocity(ca);
	ca->cwnd_acc = 0;
	ca->loss_second = 0;
	ca->loss_lost = 0;
	ca->loss_delivered = 0;
	return clamp_t(u32, max(cwnd, ca->prior_cwnd), COPA_MIN_CWND,
		       COPA_MAX_CWND);
}

/*
 * Every ACK the stack processes comes here first, @ece if it echoes CE.
 * Not every one reaches cong_control (an ACK with nothing in flight does
 * not), so the flag is set or cleared on each: only the echo of the ACK
 * that cong_control processes next counts.
 */
static inline void copa_on_ack_event(struct copa *ca, bool ece)
{
	if (copa_ready(ca))
		ca->ece = ece;
}

/*
 * Sending restarts with nothing in flight after @idle_us of silence. Idle
 * means longer than srtt + COPA_IDLE_MIN_US (TCP_RTO_MIN, what an RTO adds
 * at least): a window of two packets with delayed ACKs empties every
 * round, and that is not idle. After an idle period the round under way no
 * longer measures the path (round_idle), the first round is paced at 1x,
 * RTT history older than the filters' windows is forgotten, and the window
 * is at most what the last rate sample (@rate_delivered packets in
 * @rate_interval_us; 0: none) delivers in an srtt, but not below the
 * initial window (as tcp_cwnd_restart()): a window grown past the path's
 * rate must not leave faster than it last did. In slow start every round
 * that drains the window is capped so: a window that doubles each round
 * overshoots a long path by most of a BDP before the delay shows. Returns
 * the window.
 */
static inline u32 copa_on_tx_start(struct copa *ca, u64 idle_us, u32 srtt_us,
				   u32 cwnd, u32 rate_delivered,
				   u32 rate_interval_us)
{
	u32 srtt = clamp_t(u32, srtt_us, 1, COPA_MAX_RTT_US);
	u32 restart_cwnd = min_t(u32, copa_cwnd_in(cwnd), COPA_INIT_CWND);
	bool idle = idle_us > (u64)srtt + COPA_IDLE_MIN_US;
	u64 rate_cwnd;

	if (!copa_ready(ca))
		return cwnd;
	cwnd = copa_cwnd_in(cwnd);
	if (!ca->slow_start && !idle)
		return cwnd;
	ca->round_idle |= idle;
	ca->calm = copa_mech(COPA_MECH_IDLE);
	if (copa_mech(COPA_MECH_IDLE) && rate_interval_us && !ca->hold_rate) {
		rate_cwnd = div_u64((u64)rate_delivered * srtt, rate_interval_us);
		cwnd = min_t(u64, cwnd, max_t(u64, rate_cwnd, restart_cwnd));
	}
	ca->cwnd_acc = 0;
	copa_win_expire(&ca->rtt_min, idle_us, copa_rtt_min_half(ca));
	copa_win_expire(&ca->rtt_standing, idle_us, srtt / 4);
	copa_win_expire(&ca->rtt_max, idle_us, 2 * srtt);
	return cwnd;
}

/*
 * Rate-limit detection's tunables (tcp_copa_policer), after copa_reset():
 * @detect on or off, @limit_loss the percent a round must lose to count
 * (1-100), @rate_tol the percent two rounds' rates may differ (1-100),
 * @hold_rounds how long a hold lasts (1-255).
 */
static inline void copa_set_detector(struct copa *ca, bool detect,
				     u32 limit_loss, u32 rate_tol,
				     u32 hold_rounds)
{
	ca->detect = detect && copa_mech(COPA_MECH_RATE_LIMIT);
	ca->limit_loss = clamp_t(u32, limit_loss, 1, 100);
	ca->rate_tol = clamp_t(u32, rate_tol, 1, 100);
	ca->hold_rounds = clamp_t(u32, hold_rounds, 1, 255);
}

#endif /* _TCP_COPA_ALGO_H */
