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
 * packet ("COPA_UNIT scale"); stored rates in 2^COPA_RATE_SHIFT bytes/s
 * (tcp_copa_limit.h).
 * Times are microseconds; windowed filters keep the low 32 bits of the
 * 64-bit clock and compare them by u32 subtraction, which is exact for
 * ages below 2^32 us (71 minutes); an idle period long enough to matter
 * clears them (copa_on_tx_start()).
 *
 * The rate-limit detector, which the paper does not have, is
 * tcp_copa_limit.h, included below where its helpers are defined.
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
#define COPA_QUIET_MAX		7	/* quiet_rounds:3 saturates here */
#define COPA_EMPTY_SPELLS	2	/* empty spells in 8 rounds: stop */
#define COPA_EMPTY_SLACK_US	100	/* "nearly empty" floor, us */
#define COPA_NOISE_MAX_US	255	/* timing noise Copa allows for, us */
#define COPA_NOISE_GAIN		2	/* queue aimed at >= 2 x the noise */
#define COPA_TSO_BURST_US	1000	/* a TSO burst: 1 ms of pacing ... */
#define COPA_TSO_MAX_BYTES	65536	/* ... at most GSO_LEGACY_MAX_SIZE */
#define COPA_TSO_WIN_NUM	3	/* the window holds 3/2 bursts */
#define COPA_TSO_WIN_DEN	2
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
#define COPA_IDLE_MIN_US	(200 * COPA_USEC_PER_MSEC) /* idle: > srtt + this */

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
#define COPA_MECH_CONSERVE	0x20	/* slow start's losses leave cwnd */
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
 * Per-socket Copa state, in icsk_ca_priv (104 of its 104 bytes): the
 * paper's algorithm, then the rate-limit detector's block.
 */
struct copa {
	struct copa_win	rtt_min;	/* min RTT, 5-10 s or 10-20 RTTmin */
	struct copa_win	rtt_standing;	/* min RTT over srtt/4 to srtt/2 */
	struct copa_win	rtt_max;	/* max rtt_standing over 4 srtt */
	u32	next_round_delivered;	/* delivered count ending this round */
	u32	round_start_us;		/* clock low bits as this round began */
	u32	round_start_lost;	/* lost count as this round began */
	u32	round_cwnd;		/* cwnd (packets) at round start */
	u32	inv_delta;		/* current 1/delta, COPA_UNIT scale */
	u32	inv_delta0;		/* configured 1/delta, COPA_UNIT scale */
	u32	loss_lost;		/* packets lost in the loss window */
	u32	loss_delivered;		/* packets delivered in the window */
	s32	cwnd_acc;		/* pending cwnd change, see copa_move_cwnd */
	u32	prior_cwnd;		/* cwnd before the last reduction */
	u16	prior_inv_delta;	/* its 1/delta, COPA_UNIT >> 4 scale */
	u16	velocity;		/* v, in packets */
	u8	noise_us;		/* the RTT's noise, us: copa_update_noise() */
	u8	round_noise_us;		/* this round's top rise, us */
	u8	empty_rounds;		/* nearly empty in the last 8 rounds */
	u8	loss_thresh:7,		/* loss reaction threshold, percent */
		prior_slow_start:1;	/* slow start before the last reduction */
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
		drain_rounds:2;		/* rounds left to drain slow start's */

	/*
	 * The rate-limit detector (tcp_copa_limit.h). The round_* bits are
	 * what the round and loss bookkeeping above record for it; rates are
	 * in units of 2^COPA_RATE_SHIFT bytes/s (copa_rate_load(),
	 * copa_rate_store()).
	 */
	u8	limit_rounds;		/* hold: rounds left; else limit age */
	u8	hold_rounds;		/* rounds to hold, 1-255 ... */
	u8	hold_shift:2,		/* ... times 2^hold_shift, at most 255 */
		limit_held:1,		/* limit_rate is the last hold's */
		hold_lossy:1,		/* a round of the hold was limited */
		hold_cut:1,		/* the held rate was cut (copa_cut_hold) */
		probing:1,		/* a hold ended, its limit not forgotten */
		start_sample:1,		/* limit_rate: slow start's last train */
		detect:1;		/* rate-limit detection on */
	u8	limit_loss:7,		/* percent a limited round loses, 1-100 */
		prior_held:1;		/* a hold was on before the last reduction */
	u8	rate_tol:7,		/* percent two limited rounds may differ */
		train_limited:1;	/* start_sample's train met the limit */
	u8	round_slow_start:1,	/* this round began in slow start */
		round_drop:1,		/* a loss with the queue low this round */
		round_idle:1,		/* sending restarted after idle this round */
		round_sampled:1,	/* an RTT sample was taken this round */
		quiet_rounds:3,		/* rounds not nearly empty, <= 7 */
		overshoot:1;		/* slow start's overshoot: copa_conserve() */
	u32	limit_rate;		/* rate of the last limited round */
	u32	limit_cwnd;		/* its cwnd less queue, packets */
	u32	hold_rate;		/* rate to hold, 0 = Copa decides */
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
	u32	in_flight;	/* packets in flight after this ACK */
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
 * The queue that lets window @cwnd of @mss bytes hold COPA_TSO_WIN_NUM /
 * COPA_TSO_WIN_DEN of the bursts the stack sends, us; 0 where RTTmin
 * alone holds them. tcp_tso_autosize() makes a burst 1 ms of the pacing
 * rate (sk_pacing_shift 10), at most 64 KB, as bbr_tso_segs_goal() counts
 * it, and a window-limited sender sends about half its window per burst:
 * below two bursts each skb and its ACK cost the host as much as a full
 * one, for less data (Documentation/copa.rst, "Bursts"). At 3/2 they are
 * 3/4 full. The window asked is at most 3 ms of sending: 0 on any path
 * whose RTTmin is 3 ms or more.
 */
static inline u32 copa_burst_queue_us(const struct copa *ca, u32 cwnd,
				      u32 mss)
{
	/* a burst's time at cwnd * mss / RTTstanding: 1 ms at the pacing gain */
	const u64 burst_us = COPA_TSO_BURST_US * COPA_PACE_PCT / 100;
	u32 rtt_min = copa_win_min(&ca->rtt_min);
	u64 standing, max_us;
	u32 win_us;

	/* At most 3/2 of burst_us is asked: no division on longer paths. */
	if (rtt_min >= burst_us * COPA_TSO_WIN_NUM / COPA_TSO_WIN_DEN)
		return 0;
	standing = copa_win_min(&ca->rtt_standing);
	/* 64 KB's: <= 2^16 * 2^28 (COPA_MAX_RTT_US) / 1 */
	max_us = div64_u64(COPA_TSO_MAX_BYTES * standing,
			   (u64)max(cwnd, 1U) * max(mss, 1U));
	win_us = min(burst_us, max_us) * COPA_TSO_WIN_NUM / COPA_TSO_WIN_DEN;

	return win_us > rtt_min ? win_us - rtt_min : 0;
}

/*
 * The shortest queue Copa aims at with window @cwnd of @mss bytes, us:
 * COPA_NOISE_GAIN times the RTT's noise (copa_update_noise()), and at least
 * COPA_EMPTY_SLACK_US, below which copa_queue_nearly_empty() calls any
 * queue empty. A shorter one cannot be told from the noise, or from the
 * offset an idle moment's RTTmin leaves (Documentation/copa.rst, "Timing
 * noise"), and aiming below it reads "above target" on an empty link. At
 * least the queue the stack's bursts need, too (copa_burst_queue_us()).
 */
static inline u32 copa_floor_queue_us(const struct copa *ca, u32 cwnd,
				      u32 mss)
{
	u32 noise = max_t(u32, COPA_NOISE_GAIN * ca->noise_us,
			  COPA_EMPTY_SLACK_US);

	return max(noise, copa_burst_queue_us(ca, cwnd, mss));
}

/*
 * The queue is nearly empty when dq is within a tenth of the recent RTT
 * spread, within the timer jitter (copa_jitter_us()), or within the queue
 * Copa itself keeps at its current 1/delta (the configured one if larger)
 * or the floor under it (copa_floor_queue_us()).
 * A lone Copa drains to its own target every cycle, and in competitive mode
 * that target grows with 1/delta: measured against less, its own queue
 * would read as a competitor's and keep the mode going.
 */
static inline bool copa_queue_nearly_empty(const struct copa *ca,
					   const struct copa_ack *ack)
{
	u32 slack = max(copa_rtt_spread(ca) / 10, copa_jitter_us(ca));
	u32 inv = max(ca->inv_delta, ca->inv_delta0);
	u32 own = max(copa_own_queue_us(ca, ack, inv),
		      copa_floor_queue_us(ca, ack->cwnd, ack->mss));

	return copa_dq_us(ca) <= max(slack, own);
}

/*
 * A standing queue: more than twice Copa's own target queue (1/delta
 * packets, or copa_floor_queue_us() if longer) and more than
 * RTTmin / 4, the most a lone Copa keeps (copa_target_inv_delta()). A loss
 * with such a queue is a buffer overflowing; a loss with less is a rate
 * limit without a buffer (a policer, a buffer shorter than Copa's target)
 * or noise.
 */
static inline bool copa_queue_standing(const struct copa *ca,
				       const struct copa_ack *ack)
{
	u32 rtt_min = copa_win_min(&ca->rtt_min);

	u32 own = max(copa_own_queue_us(ca, ack, ca->inv_delta0),
		      copa_floor_queue_us(ca, ack->cwnd, ack->mss));

	return copa_dq_us(ca) > max(2 * own, rtt_min / COPA_STANDING_DIV);
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
	u32 rtt, standing;

	if (!copa_rtt_usable(ack->rtt_us))
		return;
	rtt = ack->rtt_us;
	standing = copa_win_min(&ca->rtt_standing);
	if (standing && rtt > standing)
		ca->round_noise_us = max_t(u32, ca->round_noise_us,
					   min(rtt - standing,
					       (u32)COPA_NOISE_MAX_US));
	ca->round_sampled = 1;
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

/*
 * The RTT's short-term noise, once per round: the median, over rounds, of
 * the most a round's RTT samples rose above RTTstanding as it stood before
 * each (the minimum of the samples of the last srtt/4 to srtt/2; with a
 * window of a few packets, often the previous sample alone, which the
 * sample itself would hide). noise_us steps 1 us a round towards each
 * round's value, so it settles where half the rounds read more and half
 * less, however few samples a round has. ACK aggregation, interrupt
 * coalescing and a busy host's scheduling delay each sample by up to
 * tens of microseconds, so RTTstanding, a minimum over a few of them,
 * reads up to that much above RTTmin, which keeps the luckiest of 10 s,
 * with no queue at all. A queue lifts every sample alike and does not
 * count, only its growth since the samples before does: Copa's own queue
 * never raises the floor it aims above, as a floor under dq itself would.
 * Slow start's rounds, whose queue doubles, and rounds without an RTT
 * sample do not count. At most COPA_NOISE_MAX_US (u8).
 */
static inline void copa_update_noise(struct copa *ca)
{
	if (ca->round_sampled && !ca->round_slow_start) {
		if (ca->round_noise_us > ca->noise_us)
			ca->noise_us++;
		else if (ca->round_noise_us < ca->noise_us)
			ca->noise_us--;
	}
	ca->round_noise_us = 0;
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
	else if (ca->quiet_rounds < COPA_QUIET_MAX)
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
 * COPA_VELOCITY_ROUNDS rounds, up to half a window per round. A round
 * without an RTT sample moved cwnd on an older round's dq, which may be
 * long out of date: v starts again at 1. While 1/delta
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

	if (dir == COPA_FLAT || dir != ca->dir || !ca->round_sampled) {
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
 * Rate limits, detected and held: a mechanism of its own, with its
 * state's invariants, in tcp_copa_limit.h.
 */

#include "tcp_copa_limit.h"

/* A round ended: the updates above, then detect a limit or count a hold. */
static inline void copa_on_round(struct copa *ca, struct copa_ack *ack)
{
	u32 round_cwnd = ca->round_cwnd;

	if (!ca->round_slow_start &&
	    !copa_round_lost_share(ca, ack, COPA_START_LOSS_DIV))
		ca->overshoot = 0;
	copa_update_mode(ca, (u32)ack->now_us);
	copa_update_noise(ca);
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
	ca->round_sampled = 0;
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
 * idles between ACKs): delta may exceed 1 there. Competitive mode keeps
 * its 1/delta: it must queue like its competitor. In every mode the queue
 * aimed at is at least copa_floor_queue_us() of sending (cwnd times that
 * over RTTstanding packets). Where 1/delta packets take longer, nothing
 * changes.
 */
static inline u64 copa_target_inv_delta(const struct copa *ca, u32 cwnd,
					u32 mss)
{
	u32 rtt_min = copa_win_min(&ca->rtt_min);
	u32 standing = copa_win_min(&ca->rtt_standing);
	u64 cwnd_fp = (u64)cwnd << COPA_SHIFT;	/* <= 2^30 (COPA_MAX_CWND) */
	u64 inv = ca->inv_delta;

	if (!standing)
		return inv;
	if (!ca->competitive)
		inv = min(inv, max(div_u64(cwnd_fp * rtt_min, standing) /
				   COPA_QUEUE_BDP_DIV, (u64)COPA_QUEUE_MIN));
	/* <= 2^30 * 3000 (copa_burst_queue_us()) < 2^42 */
	return max(inv, div_u64(cwnd_fp * copa_floor_queue_us(ca, cwnd, mss),
				standing));
}

/* Target window RTTstanding / (delta * dq), COPA_UNIT scale. */
static inline u64 copa_target_cwnd(const struct copa *ca, u32 cwnd, u32 mss)
{
	u64 standing = copa_win_min(&ca->rtt_standing);
	u32 dq = copa_dq_us(ca);

	if (!dq)
		return U64_MAX;
	return div_u64(standing * copa_target_inv_delta(ca, cwnd, mss), dq);
}

/*
 * The first loss ends slow start at once, whatever the loss reaction: a
 * slow start doubles past any limit, queue or none. cwnd goes back to what
 * the path delivered in the round trip this ACK closes (the rate sample's
 * delivered count), at most half of cwnd, because the previous round's
 * window was often past the limit already. Not below the initial window,
 * though: in the first rounds the sample counts what was delivered since
 * the handshake, a measure of the sender's small window, not of the path.
 * An ACK without a valid sample (rs->delivered < 0: a NewReno dupack, SACK
 * reneging) leaves half.
 */
static inline void copa_end_slow_start_on_loss(struct copa *ca,
					       struct copa_ack *ack)
{
	u32 cwnd = ack->cwnd / 2;

	if (!ca->slow_start || ack->losses <= 0)
		return;
	if (ack->rs_delivered >= 0)
		cwnd = min_t(u32, cwnd,
			     max_t(u32, ack->rs_delivered, COPA_INIT_CWND));
	copa_sample_start(ca, ack);
	copa_set_cwnd(ca, ack, cwnd);
	copa_exit_slow_start(ca);
	ca->overshoot = 1;
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
	ca->overshoot = 1;
}

/*
 * Move cwnd towards the target for acked packets: v / (delta * cwnd)
 * packets per packet, that is acked * v * (1/delta in COPA_UNIT scale)
 * over COPA_UNIT * cwnd. Slow start adds one packet per packet instead.
 * A window that did not limit sending does not grow. One ACK counts for
 * at most a window: a stretch ACK (NewReno's after a timeout acks all the
 * receiver held) carries one RTT sample, not several rounds of them.
 */
static inline void copa_update_cwnd(struct copa *ca, struct copa_ack *ack)
{
	u64 target = copa_target_cwnd(ca, ack->cwnd, ack->mss);
	bool increase = ((u64)ack->cwnd << COPA_SHIFT) < target;
	u32 acked = min_t(u32, max(ack->acked_sacked, 0), ack->cwnd);
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
 * Slow start's overshoot: from slow start's end until a round that began
 * after it loses less than an eighth of what it sent (ca->overshoot;
 * copa_round_lost_share(), as copa_hold_start() tells a limit's loss),
 * the packets a round loses leave the window it began with, as PRR would
 * take them out (the stack runs no PRR for a cong_control), but not below
 * what the path carried in the rate sample's round trip (without a valid
 * sample, what is in flight plus what this ACK delivered: BBR's packet
 * conservation). Slow start doubled the window past the limit that
 * stopped it, and its losses show up to a round after it ended. Behind a
 * policer nothing queues the excess: sending that window on through
 * recovery loses the retransmissions too, and so does a hold begun on
 * slow start's train (copa_hold_start()), whose rate a deep bucket's
 * burst inflates. The round's lost count, unlike the ACK's, has what
 * RACK's timer marked (and the stack retransmitted) between ACKs. Later
 * losses are the delay rule's and the rate-limit detector's.
 */
static inline void copa_conserve(struct copa *ca, struct copa_ack *ack)
{
	u32 lost = copa_round_lost(ca, ack);
	u64 floor = ack->rs_delivered >= 0 ? (u64)ack->rs_delivered :
		    (u64)ack->in_flight + max(ack->acked_sacked, 0);
	u64 cap = ca->round_cwnd - min(lost, ca->round_cwnd);

	if (copa_mech(COPA_MECH_CONSERVE) && ca->overshoot && lost &&
	    ack->cwnd > max(cap, floor))
		copa_set_cwnd(ca, ack, max(cap, floor));
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
		copa_conserve(ca, ack);
		return true;
	}
	copa_update_cwnd(ca, ack);
	copa_conserve(ca, ack);
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
	copa_set_detector(ca, true, COPA_LIMIT_LOSS_PCT, COPA_RATE_TOL_PCT,
			  COPA_HOLD_ROUNDS);
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
 * The reduction was spurious (DSACK, F-RTO, timestamps): restore the
 * window, 1/delta and the phase saved before it, forget this round's
 * losses and what they made the detector see; return the window.
 */
static inline u32 copa_undo(struct copa *ca, u32 cwnd)
{
	u32 inv = (u32)ca->prior_inv_delta << COPA_PRIOR_SHIFT;

	if (!copa_ready(ca))
		return cwnd;
	ca->round_loss = ca->round_ece;
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

#endif /* _TCP_COPA_ALGO_H */
