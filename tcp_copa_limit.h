/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Copa's rate-limit detector, a mechanism beyond the paper
 * (COPA_MECH_RATE_LIMIT): a token-bucket policer, or a buffer shorter than
 * Copa's target queue, drops what a window adds past its rate without
 * queueing it, so Copa's delay rule never sees it and keeps growing into
 * the losses. As BBRv1's lt_bw does, the detector compares the delivery
 * rates of rounds that lost limit_loss % or more with the queue low
 * (copa_detect_limit()); two such rounds at most COPA_LIMIT_MAX_AGE rounds
 * apart whose rates agree within rate_tol %, while the window grew past
 * what that rate carries, are a limit. Slow start's last train and a full
 * short buffer are quicker evidence of one. Copa then holds the limit's
 * rate (COPA_MODE_POLICED): paced at it, with a window of about 1.5 times
 * its BDP, for hold_rounds rounds, longer when the probe after a hold
 * meets the limit again (copa_hold()).
 *
 * Invariants:
 *  - hold_rate != 0 exactly while a hold is on. Then limit_rounds counts
 *    the rounds left, 1 to copa_hold_len(), and every ACK's window and
 *    pacing rate are copa_apply_hold()'s, the window less what slow
 *    start's overshoot lost (copa_conserve()). Otherwise, while limit_rate
 *    holds a sample (not 0), limit_rounds is its age in rounds.
 *  - Rates are stored in units of 2^COPA_RATE_SHIFT bytes/s
 *    (copa_rate_load(), copa_rate_store()), rounded down, and a rate that
 *    is not 0 is never stored as 0.
 *  - With detect off (or COPA_MECH_RATE_LIMIT compiled out) no hold
 *    begins; limit_loss and rate_tol are 1 to 100, hold_rounds 1 to 255
 *    (copa_set_detector()).
 *  - Only round ends (copa_on_round()) and slow start's end on a loss
 *    (copa_sample_start()) feed the detector; an undone reduction forgets
 *    what its losses fed it (copa_undo_limit()).
 *
 * The state is the "rate-limit detector" block of struct copa. This file
 * is part of tcp_copa_algo.h, which includes it after the helpers it uses
 * (the RTT filters, the queue estimates, copa_set_cwnd()) and before the
 * round processing that calls it; it is not to be included on its own.
 */
#ifndef _TCP_COPA_LIMIT_H
#define _TCP_COPA_LIMIT_H

#ifndef _TCP_COPA_ALGO_H
#error "include tcp_copa_algo.h, not this file"
#endif

#define COPA_LIMIT_LOSS_PCT	1	/* a limited round loses >= 1% ... */
#define COPA_RATE_TOL_PCT	12	/* ... at a rate within 12% ... */
#define COPA_RATE_SLACK		500	/* ... or 500 bytes/s (4 kbit/s) ... */
#define COPA_LIMIT_MAX_AGE	16	/* ... of one <= 16 rounds before */
#define COPA_LIMIT_SLACK_PKTS	4	/* a window beyond a rate: and by 4 */
#define COPA_HOLD_ROUNDS	48	/* rounds to hold a detected limit */
#define COPA_TRAIN_MIN_PKTS	8	/* slow start's exit: a train of >= 8 */
#define COPA_START_LOSS_DIV	8	/* ... then a round that lost >= 1/8, */
#define COPA_BURST_LOSS_DIV	4	/* >= 1/4 if a burst carried the train, */
#define COPA_START_ROUNDS	2	/* ... of the next 2 round ends: hold */
#define COPA_RATE_MAX_PKTS	0x4000000U /* 2^26 a round: bytes*1e6 fit u64 */
#define COPA_RATE_SHIFT		4	/* stored rates: 16 bytes/s units */
#define COPA_RATE_MAX		((u64)U32_MAX << COPA_RATE_SHIFT) /* 550 Gbit/s */

/* ---------------------------------------------------------------------
 * Stored rates.
 */

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

/* How long the round ending now lasted, us (a u32 difference: wraps). */
static inline u32 copa_round_us(const struct copa *ca,
				const struct copa_ack *ack)
{
	return (u32)ack->now_us - ca->round_start_us;
}

/* Delivery rate of the round ending now, bytes/s, at most COPA_RATE_MAX. */
static inline u64 copa_round_rate(const struct copa *ca,
				  const struct copa_ack *ack)
{
	u32 pkts = min(ack->delivered - ca->next_round_delivered,
		       COPA_RATE_MAX_PKTS);
	u64 bytes = (u64)pkts * ack->mss;
	u32 elapsed = max(copa_round_us(ca, ack), 1U);

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

/*
 * Did the round ending now lose at least 1/@div of what it sent? Past slow
 * start, an eighth is a limit's loss, not noise.
 */
static inline bool copa_round_lost_share(const struct copa *ca,
					 const struct copa_ack *ack, u32 div)
{
	return (u64)copa_round_lost(ca, ack) * div >= copa_round_sent(ca, ack);
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
 * a slow start's overshoot past a policer), each by more than
 * COPA_LIMIT_SLACK_PKTS packets as well, or a short buffer overflows
 * (copa_short_buffer_over()). Against the last hold's rate, which a limit
 * already confirmed, half the tolerance suffices. The packets: a delayed
 * ACK holds one back, what a rate carries is rounded down, and at windows
 * of a few packets either is more than the percentages, so two rounds that
 * each lost one packet to random loss read as a limit.
 */
static inline bool copa_cwnd_beyond(const struct copa *ca,
				    const struct copa_ack *ack, u32 cwnd,
				    u64 rate)
{
	u32 tol = ca->limit_held ? ca->rate_tol : 2 * ca->rate_tol;
	u64 carried = copa_rate_pkts(ack, rate,
				     copa_win_min(&ca->rtt_standing));

	u32 unqueued = copa_unqueued_cwnd(ca, ack, cwnd, rate);

	return ((u64)unqueued * 100 > (u64)(100 + tol) * ca->limit_cwnd &&
		unqueued > ca->limit_cwnd + COPA_LIMIT_SLACK_PKTS) ||
	       ((u64)cwnd * 100 > (u64)(100 + 2 * tol) * carried &&
		cwnd > carried + COPA_LIMIT_SLACK_PKTS) ||
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
 * rate (this round's delivery so far) carries less than 4/5 of cwnd in
 * RTTstanding. A train below every bottleneck arrives about as fast as
 * slow start sent it; one that met a link, a short buffer or an emptied
 * token bucket arrives at that rate.
 */
static inline bool copa_train_limited(const struct copa *ca,
				      const struct copa_ack *ack, u64 rate)
{
	u32 standing = copa_win_min(&ca->rtt_standing);

	return (u64)ack->cwnd * 4 > 5 * copa_rate_pkts(ack, rate, standing);
}

/*
 * Slow start ends on a loss with the queue low: keep its train's rate (at
 * least COPA_TRAIN_MIN_PKTS packets) for copa_hold_start(), and whether
 * the train met a limit. One that did not may still have: a token bucket
 * passes its burst at the link's rate and drops what follows it, so the
 * first loss can come while the train still arrives as fast as it was
 * sent.
 */
static inline void copa_sample_start(struct copa *ca,
				     const struct copa_ack *ack)
{
	u64 rate = copa_round_rate(ca, ack);
	u32 pkts = ack->delivered - ca->next_round_delivered;

	if (!copa_mech(COPA_MECH_START_TRAIN) || !ca->detect ||
	    !copa_round_measured(ca, ack) || pkts < COPA_TRAIN_MIN_PKTS ||
	    copa_queue_standing(ca, ack))
		return;
	ca->limit_rate = copa_rate_store(rate);
	ca->limit_rounds = 0;
	ca->limit_held = 0;
	ca->start_sample = 1;
	ca->train_limited = copa_train_limited(ca, ack, rate);
}

/*
 * A round has ended since slow start ended on a loss with the queue low
 * (copa_sample_start()). If it lost an eighth of what it sent or more
 * after a train that met a limit, a quarter after one a burst may have
 * carried, the limit is not noise: random loss of 5 % loses an eighth of
 * a small round now and then, but seldom a quarter. Hold at once, at the
 * train's rate within the round's delivery rate and a quarter above it
 * (Copa grows a window by at most a quarter a round). The overshoot's
 * losses land in the round under way at the first loss or in the next, so
 * COPA_START_ROUNDS round ends decide; then the sample is forgotten.
 */
static inline void copa_hold_start(struct copa *ca, struct copa_ack *ack)
{
	u64 rate = copa_round_rate(ca, ack);
	u64 cap = rate + rate / COPA_ROUND_STEP_DIV;
	u32 div = ca->train_limited ? COPA_START_LOSS_DIV : COPA_BURST_LOSS_DIV;

	if (rate && copa_round_lost_share(ca, ack, div)) {
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
 * Did the round ending now send at the held rate? Paced at it, a round
 * sends (delivers or loses) that rate's worth of its duration. One that
 * sent under 3/4 of that, less two packets (a delayed ACK's and the
 * rounding's), ran out of data: the last round of an application's write
 * does, and its rate sample is not marked application-limited (only a
 * write marks one). What it delivered measures the application, not the
 * path.
 */
static inline bool copa_round_sent_held(const struct copa *ca,
					const struct copa_ack *ack)
{
	u64 due = copa_pkts_in(ack, copa_rate_load(ca->hold_rate),
			       copa_round_us(ca, ack));

	return (copa_round_sent(ca, ack) + 2) * 4 >= due * 3;
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
 * (copa_round_measured()) or ran out of data (copa_round_sent_held()). A
 * lossy round with a short buffer full trims the held rate
 * (copa_trim_hold()).
 */
static inline void copa_count_hold(struct copa *ca, struct copa_ack *ack)
{
	bool measured = copa_round_measured(ca, ack) &&
			copa_round_sent_held(ca, ack);
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

/* The rate a hold paces at, bytes/s; 0 when Copa is not holding one. */
static inline u64 copa_held_rate(const struct copa *ca)
{
	return copa_rate_load(ca->hold_rate);
}

/*
 * The losses of a reduction the stack undid were not losses, and neither
 * were the limited rounds they made: forget this round's drops and a hold
 * that began since the reduction (reordering past RACK's window does
 * this). A hold that was on before the reduction stays, and so does the
 * limit a probe after a hold tests: a policer's drops are never undone.
 */
static inline void copa_undo_limit(struct copa *ca)
{
	ca->round_drop = 0;
	if (!ca->prior_held && !ca->probing)
		copa_forget_hold(ca);
}

/*
 * Rate-limit detection's tunables: the defaults from copa_reset(), then
 * tcp_copa_policer's. @detect on or off, @limit_loss the percent a round
 * must lose to count (1-100), @rate_tol the percent two rounds' rates may
 * differ (1-100), @hold_rounds how long a hold lasts (1-255).
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

#endif /* _TCP_COPA_LIMIT_H */
