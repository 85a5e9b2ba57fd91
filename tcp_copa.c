// SPDX-License-Identifier: GPL-2.0
/*
 * Copa: practical delay-based congestion control (Arun and Balakrishnan,
 * NSDI 2018).
 *
 * Copa aims at a sending rate of 1/(delta * dq) packets per second, where
 * dq is the queueing delay: dq = RTTstanding - RTTmin. RTTmin is the
 * minimum RTT over 10 s (the propagation delay); RTTstanding is the minimum
 * RTT over the last srtt/2, which filters ACK jitter and delayed ACKs. In
 * window terms the target is RTTstanding / (delta * dq) packets. On every
 * ACK the window moves towards the target by v / (delta * cwnd) per packet
 * acknowledged. The velocity v is 1 until cwnd has moved the same way for
 * three rounds; it then doubles every round, and falls back to 1 when the
 * direction flips. Slow start doubles cwnd per round until the first
 * "decrease" decision. Packets are paced at 2 * cwnd / RTTstanding.
 *
 * A single flow keeps about 1/delta packets queued, and its queue empties
 * about once every five rounds. When the queue has not nearly emptied for
 * five rounds, a buffer-filler shares the bottleneck: competitive mode then
 * grows 1/delta by one per round and halves it on a lossy round, never
 * letting delta exceed the configured value. The optional loss reaction
 * ends slow start at the first loss, halving cwnd, and halves 1/delta on
 * every round that lost more than loss_reaction / 4 percent, so that
 * Copa's standing queue fits a buffer shorter than 1/delta packets.
 * 1/delta regrows by 1/32 per clean round, with v held at 1 and pacing at
 * 1 * cwnd / RTTstanding meanwhile; when more than loss_reaction percent
 * of a two-round window was lost, it also cuts cwnd by 30%.
 */

/* <net/tcp.h> first: 5.10's generic.h and inet_diag.h need struct net. */
#include <net/tcp.h>
#include <linux/ctype.h>
#include <linux/inet_diag.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <net/netns/generic.h>

#include "tcp_copa.h"

#define CREATE_TRACE_POINTS
#include "tcp_copa_trace.h"

#define COPA_RTT_MIN_WIN_US	(10 * USEC_PER_SEC)	/* RTTmin window */
#define COPA_EMPTY_ROUNDS	5	/* queue not empty this long: compete */
#define COPA_EMPTY_SLACK_US	100	/* "nearly empty" floor, us */
#define COPA_VELOCITY_ROUNDS	3	/* same-direction rounds before v grows */
#define COPA_MAX_VELOCITY	BIT(14)
#define COPA_MIN_CWND		2	/* packets */
#define COPA_INV_DELTA_MIN	COPA_UNIT		/* delta <= 1 */
#define COPA_INV_DELTA_MAX	(1000U << COPA_SHIFT)	/* delta >= 0.001 */
#define COPA_INV_DELTA_REGROW	(COPA_UNIT / 32)	/* per loss-free round */
#define COPA_LIGHT_LOSS_DIV	4	/* halve 1/delta above thresh/4 % */
#define COPA_LOSS_CUT_NUM	7	/* loss reaction: cwnd *= 7/10 */
#define COPA_LOSS_CUT_DEN	10
#define COPA_PACE_PCT		200	/* pacing gain, percent of cwnd/RTT */
#define COPA_PACE_LOSS_PCT	100	/* ... while 1/delta regrows */

enum copa_dir {
	COPA_FLAT,
	COPA_UP,
	COPA_DOWN,
};

enum copa_tunable_id {
	COPA_T_DELTA,
	COPA_T_COMPETITIVE,
	COPA_T_LOSS_REACTION,
	COPA_T_NR,
};

static struct copa_tunable copa_tunables[COPA_T_NR] = {
	[COPA_T_DELTA]		= { "delta", 1, 1000, true, 500 },
	[COPA_T_COMPETITIVE]	= { "competitive", 0, 1, false, 1 },
	[COPA_T_LOSS_REACTION]	= { "loss_reaction", 0, 100, false, 5 },
};

static struct copa_params copa_params = {
	.path	= "net/ipv4/tcp_copa",
	.tun	= copa_tunables,
	.n	= COPA_T_NR,
};

/* ---------------------------------------------------------------------
 * Windowed RTT filters.
 */

/* Start a new half-window with sample @v if the current one is over. */
static bool copa_win_rotate(struct copa_win *w, u32 now, u32 half, u32 v)
{
	u32 age = now - w->start;

	if (w->cur && age <= half)
		return false;
	w->prev = (w->cur && age <= 2 * half) ? w->cur : v;
	w->cur = v;
	w->start = now;
	return true;
}

static void copa_win_min_update(struct copa_win *w, u32 now, u32 half, u32 v)
{
	if (!copa_win_rotate(w, now, half, v) && v < w->cur)
		w->cur = v;
}

static void copa_win_max_update(struct copa_win *w, u32 now, u32 half, u32 v)
{
	if (!copa_win_rotate(w, now, half, v) && v > w->cur)
		w->cur = v;
}

static u32 copa_win_max(const struct copa_win *w)
{
	return max(w->cur, w->prev);
}

static u32 copa_srtt_us(const struct tcp_sock *tp)
{
	return max(tp->srtt_us >> 3, 1U);
}

/*
 * The queue is nearly empty when dq is within a tenth of the recent RTT
 * spread, or within max(100 us, RTTmin / 16) to absorb timer jitter.
 */
static bool copa_queue_nearly_empty(const struct copa *ca)
{
	u32 rtt_min = copa_win_min(&ca->rtt_min);
	u32 spread = copa_win_max(&ca->rtt_max) - rtt_min;
	u32 slack = max3(spread / 10, rtt_min / 16, (u32)COPA_EMPTY_SLACK_US);

	return copa_dq_us(ca) <= slack;
}

static void copa_update_rtt(struct sock *sk, struct copa *ca,
			    const struct rate_sample *rs)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 now = (u32)tp->tcp_mstamp;
	u32 srtt = copa_srtt_us(tp);
	u32 rtt;

	if (rs->rtt_us < 0)
		return;
	rtt = clamp_t(long, rs->rtt_us, 1, U32_MAX);
	copa_win_min_update(&ca->rtt_min, now, COPA_RTT_MIN_WIN_US / 2, rtt);
	copa_win_min_update(&ca->rtt_standing, now, srtt / 4, rtt);
	/* Delayed ACKs inflate samples: keep them out of the spread. */
	if (!rs->is_ack_delayed)
		copa_win_max_update(&ca->rtt_max, now, 2 * srtt, rtt);
	if (copa_queue_nearly_empty(ca))
		ca->last_empty_us = now;
}

/* ---------------------------------------------------------------------
 * Once per round: competitive mode, delta, loss reaction, velocity.
 */

/* A round ends when a packet sent after the previous round ended is ACKed. */
static void copa_update_round(struct sock *sk, struct copa *ca,
			      const struct rate_sample *rs)
{
	ca->round_start = 0;
	if (rs->delivered < 0 ||
	    before(rs->prior_delivered, ca->next_round_delivered))
		return;
	ca->next_round_delivered = tcp_sk(sk)->delivered;
	ca->round_start = 1;
}

static void copa_account_loss(struct copa *ca, const struct rate_sample *rs)
{
	if (rs->losses > 0) {
		ca->round_loss = 1;
		ca->loss_lost += rs->losses;
	}
	ca->loss_delivered += rs->acked_sacked;
}

/* Was more than loss_thresh / @div % of the loss window so far lost? */
static bool copa_window_lost_over(const struct copa *ca, u32 div)
{
	u64 lost = ca->loss_lost;

	return lost * 100 * div >
	       (u64)ca->loss_thresh * (lost + ca->loss_delivered);
}

/* Did more than loss_thresh % of a two-round window get lost? */
static bool copa_loss_window_exceeded(struct copa *ca)
{
	bool over;

	if (!ca->loss_second) {
		ca->loss_second = 1;
		return false;
	}
	over = ca->loss_thresh && copa_window_lost_over(ca, 1);
	ca->loss_second = 0;
	ca->loss_lost = 0;
	ca->loss_delivered = 0;
	return over;
}

static void copa_update_mode(const struct sock *sk, struct copa *ca)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 quiet = (u32)tp->tcp_mstamp - ca->last_empty_us;

	ca->competitive = ca->competitive_on &&
			  quiet > COPA_EMPTY_ROUNDS * copa_srtt_us(tp);
}

/*
 * Did this round lose more than loss_thresh / 4 % of the packets of the
 * loss window so far? Lighter random loss is left to the delay rule, as
 * in the paper; an overflowing buffer or a policer loses more.
 */
static bool copa_round_lossy(const struct copa *ca)
{
	return ca->round_loss &&
	       copa_window_lost_over(ca, COPA_LIGHT_LOSS_DIV);
}

/*
 * AIMD on 1/delta, once per round. A lossy round halves 1/delta: down to 1
 * (delta = 1) with the loss reaction on, if it lost enough; down to the
 * configured value in competitive mode; not at all otherwise. A loss-free
 * round adds 1 in competitive mode; outside it, 1/delta regrows towards
 * the configured value by 1/32 (after a loss reaction) and never exceeds
 * it.
 */
static u32 copa_next_inv_delta(const struct copa *ca)
{
	u32 inv = ca->inv_delta;

	if (ca->loss_thresh && copa_round_lossy(ca))
		return max(inv / 2, COPA_INV_DELTA_MIN);
	if (ca->round_loss && ca->competitive)
		return max(inv / 2, ca->inv_delta0);
	if (ca->round_loss)
		return min(inv, ca->inv_delta0);
	if (ca->competitive)
		return min(inv + COPA_UNIT, COPA_INV_DELTA_MAX);
	return min(inv + COPA_INV_DELTA_REGROW, ca->inv_delta0);
}

/* Is 1/delta still regrowing after a loss reaction? */
static bool copa_regrowing(const struct copa *ca)
{
	return ca->inv_delta < ca->inv_delta0;
}

static void copa_exit_slow_start(struct tcp_sock *tp, struct copa *ca)
{
	ca->slow_start = 0;
	tp->snd_ssthresh = tcp_snd_cwnd(tp);
}

static void copa_cut_cwnd(struct sock *sk, struct copa *ca)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd = tcp_snd_cwnd(tp) * COPA_LOSS_CUT_NUM / COPA_LOSS_CUT_DEN;

	tcp_snd_cwnd_set(tp, max_t(u32, cwnd, COPA_MIN_CWND));
	ca->cwnd_frac = 0;
	ca->velocity = 1;
	copa_exit_slow_start(tp, ca);
}

/* Largest v that moves cwnd by at most half a window per round. */
static u32 copa_velocity_cap(const struct copa *ca, u32 cwnd)
{
	u64 cap = div_u64((u64)cwnd << COPA_SHIFT, 2 * ca->inv_delta);

	return clamp_t(u64, cap, 1, COPA_MAX_VELOCITY);
}

static void copa_update_velocity(struct copa *ca, u32 cwnd)
{
	enum copa_dir dir = COPA_FLAT;

	if (cwnd > ca->round_cwnd)
		dir = COPA_UP;
	else if (cwnd < ca->round_cwnd)
		dir = COPA_DOWN;

	if (dir == COPA_FLAT || dir != ca->dir) {
		ca->dir = dir;
		ca->same_dir_rounds = 1;
		ca->velocity = 1;
	} else {
		if (ca->same_dir_rounds < U8_MAX)
			ca->same_dir_rounds++;
		if (ca->same_dir_rounds >= COPA_VELOCITY_ROUNDS)
			ca->velocity = min(2U * ca->velocity,
					   copa_velocity_cap(ca, cwnd));
	}
	ca->round_cwnd = cwnd;
}

static void copa_on_round(struct sock *sk, struct copa *ca)
{
	struct tcp_sock *tp = tcp_sk(sk);

	copa_update_mode(sk, ca);
	ca->inv_delta = copa_next_inv_delta(ca);
	if (copa_loss_window_exceeded(ca))
		copa_cut_cwnd(sk, ca);
	copa_update_velocity(ca, tcp_snd_cwnd(tp));
	/* Until a loss reaction's 1/delta has regrown, do not accelerate. */
	if (copa_regrowing(ca))
		ca->velocity = 1;
	ca->round_loss = 0;
}

/* ---------------------------------------------------------------------
 * Per ACK: move cwnd towards the target, pace.
 */

/* Target window RTTstanding / (delta * dq), COPA_UNIT scale. */
static u32 copa_target_cwnd(const struct copa *ca, u32 dq)
{
	u64 standing = copa_win_min(&ca->rtt_standing);

	if (!dq)
		return U32_MAX;
	return min_t(u64, div_u64(standing * ca->inv_delta, dq), U32_MAX);
}

static void copa_set_cwnd_fp(struct sock *sk, struct copa *ca, u64 cwnd_fp)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u64 cwnd = max_t(u64, cwnd_fp >> COPA_SHIFT, COPA_MIN_CWND);

	tcp_snd_cwnd_set(tp, min_t(u64, cwnd, tp->snd_cwnd_clamp));
	ca->cwnd_frac = cwnd_fp & (COPA_UNIT - 1);
}

/*
 * Loss reaction: the first loss ends slow start at once, and halves cwnd
 * back to the previous round's window, which the path carried.
 */
static void copa_end_slow_start_on_loss(struct sock *sk, struct copa *ca,
					const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!ca->slow_start || rs->losses <= 0 || !ca->loss_thresh)
		return;
	copa_set_cwnd_fp(sk, ca, (u64)tcp_snd_cwnd(tp) << (COPA_SHIFT - 1));
	copa_exit_slow_start(tp, ca);
}

/* Move cwnd for @acked packets; returns the target (COPA_UNIT scale). */
static u32 copa_update_cwnd(struct sock *sk, struct copa *ca, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd = tcp_snd_cwnd(tp);
	u64 cwnd_fp = ((u64)cwnd << COPA_SHIFT) | ca->cwnd_frac;
	u32 target = copa_target_cwnd(ca, copa_dq_us(ca));
	bool increase = cwnd_fp < target;
	u64 step;

	if (!acked || !copa_win_min(&ca->rtt_standing))
		return target;
	if ((increase && ca->dir == COPA_DOWN) ||
	    (!increase && ca->dir == COPA_UP))
		ca->velocity = 1;
	if (ca->slow_start && !increase)
		copa_exit_slow_start(tp, ca);

	if (ca->slow_start)
		step = (u64)acked << COPA_SHIFT;
	else
		step = div_u64((u64)acked * ca->velocity * ca->inv_delta,
			       max(cwnd, 1U));

	if (!increase)
		cwnd_fp -= min(step, cwnd_fp);
	else if (tcp_is_cwnd_limited(sk))
		cwnd_fp += step;
	copa_set_cwnd_fp(sk, ca, cwnd_fp);
	return target;
}

static void copa_set_pacing_rate(struct sock *sk, u64 rate)
{
	rate = min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate));
	WRITE_ONCE(sk->sk_pacing_rate, rate);
}

/*
 * Pace at 2 * cwnd / RTTstanding (srtt, or 1 ms, before any sample). After
 * a loss reaction, until 1/delta has regrown, pace at cwnd / RTTstanding:
 * the path dropped packets, so its buffer may not absorb a burst sent
 * faster than the window drains. Since RTTstanding <= srtt, this rate
 * still lets the whole window out within one round.
 */
static void copa_pace_window(struct sock *sk, const struct copa *ca)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 rtt = copa_win_min(&ca->rtt_standing);
	u32 pct = copa_regrowing(ca) ? COPA_PACE_LOSS_PCT : COPA_PACE_PCT;
	u64 bytes = (u64)pct * tcp_snd_cwnd(tp) * tp->mss_cache *
		    (USEC_PER_SEC / 100);

	if (!rtt)
		rtt = tp->srtt_us ? copa_srtt_us(tp) : USEC_PER_MSEC;
	copa_set_pacing_rate(sk, div_u64(bytes, rtt));
}

/* Policed: pace at hold_rate with a window of twice its BDP. */
static void copa_apply_hold(struct sock *sk, struct copa *ca)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u64 bdp = (u64)ca->hold_rate * copa_win_min(&ca->rtt_min);

	bdp = div_u64(bdp, USEC_PER_SEC * max_t(u32, tp->mss_cache, 1));
	copa_set_cwnd_fp(sk, ca, (2 * bdp) << COPA_SHIFT);
	copa_set_pacing_rate(sk, ca->hold_rate);
}

static enum copa_mode copa_mode(const struct copa *ca)
{
	if (ca->hold_rate)
		return COPA_MODE_POLICED;
	if (ca->slow_start)
		return COPA_MODE_SLOW_START;
	return ca->competitive ? COPA_MODE_COMPETITIVE : COPA_MODE_DEFAULT;
}

void copa_update(struct sock *sk, const struct rate_sample *rs)
{
	struct copa *ca = inet_csk_ca(sk);
	u32 target = 0;

	/* The SYN-ACK can reach cong_control before init (7.x): no state. */
	if (!ca->inv_delta)
		return;
	copa_update_rtt(sk, ca, rs);
	copa_account_loss(ca, rs);
	copa_end_slow_start_on_loss(sk, ca, rs);
	copa_update_round(sk, ca, rs);
	if (ca->round_start)
		copa_on_round(sk, ca);

	if (ca->hold_rate) {
		copa_apply_hold(sk, ca);
	} else {
		target = copa_update_cwnd(sk, ca, rs->acked_sacked);
		copa_pace_window(sk, ca);
	}
	trace_copa_update(sk, ca, target >> COPA_SHIFT, copa_dq_us(ca),
			  copa_mode(ca));
}
EXPORT_SYMBOL_GPL(copa_update);

static void copa_cong_control(COPA_CONG_CONTROL_ARGS)
{
	copa_update(sk, rs);
}

/* ---------------------------------------------------------------------
 * Connection events.
 */

/* (Re)start from slow start with the configured delta; RTTmin is kept. */
static void copa_restart(struct sock *sk, struct copa *ca)
{
	struct tcp_sock *tp = tcp_sk(sk);

	ca->slow_start = 1;
	ca->competitive = 0;
	ca->round_loss = 0;
	ca->loss_second = 0;
	ca->dir = COPA_FLAT;
	ca->same_dir_rounds = 0;
	ca->velocity = 1;
	ca->cwnd_frac = 0;
	ca->hold_rate = 0;
	ca->loss_lost = 0;
	ca->loss_delivered = 0;
	ca->inv_delta = ca->inv_delta0;
	ca->round_cwnd = tcp_snd_cwnd(tp);
	ca->next_round_delivered = tp->delivered;
	ca->last_empty_us = (u32)tp->tcp_mstamp;
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
}

void copa_init(struct sock *sk)
{
	const unsigned int *val = copa_params_of(&copa_params, sock_net(sk));
	struct copa *ca = inet_csk_ca(sk);

	memset(ca, 0, sizeof(*ca));
	ca->inv_delta0 = (1000U << COPA_SHIFT) / val[COPA_T_DELTA];
	ca->competitive_on = !!val[COPA_T_COMPETITIVE];
	ca->loss_thresh = val[COPA_T_LOSS_REACTION];
	copa_restart(sk, ca);

	cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED);
	copa_pace_window(sk, ca);
}
EXPORT_SYMBOL_GPL(copa_init);

/* Copa sets cwnd itself; the stack's ssthresh only mirrors slow start. */
u32 copa_ssthresh(struct sock *sk)
{
	return tcp_sk(sk)->snd_ssthresh;
}
EXPORT_SYMBOL_GPL(copa_ssthresh);

u32 copa_undo_cwnd(struct sock *sk)
{
	return tcp_snd_cwnd(tcp_sk(sk));
}
EXPORT_SYMBOL_GPL(copa_undo_cwnd);

/* After a timeout the stack has set cwnd to 1 + in flight: restart. */
void copa_set_state(struct sock *sk, u8 new_state)
{
	if (new_state == TCP_CA_Loss)
		copa_restart(sk, inet_csk_ca(sk));
}
EXPORT_SYMBOL_GPL(copa_set_state);

/*
 * inet_diag reuses struct tcpvegas_info: tcpv_enabled = mode (enum
 * copa_mode, never 0), tcpv_rttcnt = velocity, tcpv_rtt = RTTstanding,
 * tcpv_minrtt = RTTmin (both us). ss -ti uses tcpv_rtt for "send".
 */
size_t copa_get_info(struct sock *sk, u32 ext, int *attr,
		     union tcp_cc_info *info)
{
	const struct copa *ca = inet_csk_ca(sk);

	if (!(ext & (1 << (INET_DIAG_VEGASINFO - 1))))
		return 0;
	memset(&info->vegas, 0, sizeof(info->vegas));
	info->vegas.tcpv_enabled = copa_mode(ca);
	info->vegas.tcpv_rttcnt = ca->velocity;
	info->vegas.tcpv_rtt = copa_win_min(&ca->rtt_standing);
	info->vegas.tcpv_minrtt = copa_win_min(&ca->rtt_min);
	*attr = INET_DIAG_VEGASINFO;
	return sizeof(info->vegas);
}
EXPORT_SYMBOL_GPL(copa_get_info);

/* ---------------------------------------------------------------------
 * Tunables: module parameters and per-namespace sysctls.
 */

/*
 * Parse one value from the len bytes at s, which need not end in a NUL.
 * As for the core integer sysctls (kernel/sysctl.c: proc_skip_spaces(),
 * proc_get_long()), white space may surround the value and nothing else
 * may; there is no sign. "milli" values take up to three decimal places
 * ("0.04" is 40). Overflow stops at t->max, which fits in an unsigned int.
 */
static int copa_tunable_parse(const struct copa_tunable *t, const char *s,
			      size_t len, unsigned int *out)
{
	unsigned int unit = t->milli ? 1000 : 1;
	const char *end = s + len;
	bool digits = false;
	u64 v = 0;

	while (s < end && isspace(*s))
		s++;
	for (; s < end && isdigit(*s); s++, digits = true) {
		v = v * 10 + (*s - '0') * unit;
		if (v > t->max)
			return -EINVAL;
	}
	if (t->milli && s < end && *s == '.') {
		for (s++; s < end && isdigit(*s); s++, digits = true) {
			if (unit == 1)
				return -EINVAL;
			unit /= 10;
			v += (*s - '0') * unit;
		}
	}
	while (s < end && isspace(*s))
		s++;
	if (s != end || !digits || v < t->min || v > t->max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int copa_tunable_format(const struct copa_tunable *t, unsigned int v,
			       char *buf, size_t len)
{
	unsigned int frac = v % 1000, width = 3;

	if (!t->milli || !frac)
		return scnprintf(buf, len, "%u", t->milli ? v / 1000 : v);
	while (!(frac % 10)) {
		frac /= 10;
		width--;
	}
	return scnprintf(buf, len, "%u.%0*u", v / 1000, width, frac);
}

static int copa_tunable_set(const char *val, const struct kernel_param *kp)
{
	struct copa_tunable *t = kp->arg;
	unsigned int v;
	int ret;

	ret = copa_tunable_parse(t, val, strlen(val), &v);
	if (!ret)
		WRITE_ONCE(t->def, v);
	return ret;
}

static int copa_tunable_get(char *buffer, const struct kernel_param *kp)
{
	const struct copa_tunable *t = kp->arg;
	int len = copa_tunable_format(t, READ_ONCE(t->def), buffer, PAGE_SIZE);

	return len + scnprintf(buffer + len, PAGE_SIZE - len, "\n");
}

const struct kernel_param_ops copa_tunable_ops = {
	.set = copa_tunable_set,
	.get = copa_tunable_get,
};
EXPORT_SYMBOL_GPL(copa_tunable_ops);

/*
 * sysctl handler. Reads show the decimal text form. A write takes one
 * value from the whole buffer. As in proc_dointvec_minmax() with the
 * default sysctl_writes_strict=1 (__do_proc_dointvec() and
 * proc_first_pos_non_zero_ignore()), an empty write or one at a non-zero
 * position changes nothing and reports success.
 */
static int copa_proc_tunable(COPA_CTL_TABLE *table, int write, void *buffer,
			     size_t *lenp, loff_t *ppos)
{
	const struct copa_tunable *t = table->extra1;
	unsigned int *val = table->data;
	char text[24];
	struct ctl_table tmp = {
		.data = text,
		.maxlen = sizeof(text),
	};
	unsigned int v;
	int ret;

	if (!write) {
		copa_tunable_format(t, READ_ONCE(*val), text, sizeof(text));
		return proc_dostring(&tmp, write, buffer, lenp, ppos);
	}
	if (!*ppos && *lenp) {
		ret = copa_tunable_parse(t, buffer, *lenp, &v);
		if (ret)
			return ret;
		WRITE_ONCE(*val, v);
	}
	*ppos += *lenp;
	return 0;
}

const unsigned int *copa_params_of(const struct copa_params *p,
				   const struct net *net)
{
	const struct copa_net *cn = net_generic(net, p->net_id);

	return cn->val;
}
EXPORT_SYMBOL_GPL(copa_params_of);

/* A new namespace starts from the module parameters. */
int copa_params_net_init(const struct copa_params *p, struct net *net)
{
	struct copa_net *cn = net_generic(net, p->net_id);
	struct ctl_table *table;
	unsigned int i;

	/* One more zeroed entry terminates the table on older kernels. */
	table = kcalloc(p->n + 1, sizeof(*table), GFP_KERNEL);
	if (!table)
		return -ENOMEM;
	for (i = 0; i < p->n; i++) {
		cn->val[i] = READ_ONCE(p->tun[i].def);
		table[i].procname = p->tun[i].name;
		table[i].data = &cn->val[i];
		table[i].maxlen = sizeof(cn->val[i]);
		table[i].mode = 0644;
		table[i].proc_handler = copa_proc_tunable;
		table[i].extra1 = &p->tun[i];
	}
	cn->hdr = copa_register_net_sysctl(net, p->path, table, p->n);
	if (!cn->hdr) {
		kfree(table);
		return -ENOMEM;
	}
	return 0;
}
EXPORT_SYMBOL_GPL(copa_params_net_init);

void copa_params_net_exit(const struct copa_params *p, struct net *net)
{
	struct copa_net *cn = net_generic(net, p->net_id);
	const struct ctl_table *table = cn->hdr->ctl_table_arg;

	unregister_net_sysctl_table(cn->hdr);
	kfree(table);
}
EXPORT_SYMBOL_GPL(copa_params_net_exit);

module_param_cb(delta, &copa_tunable_ops, &copa_tunables[COPA_T_DELTA], 0644);
MODULE_PARM_DESC(delta, "default delta for new namespaces, (0, 1], e.g. 0.5");
module_param_cb(competitive, &copa_tunable_ops,
		&copa_tunables[COPA_T_COMPETITIVE], 0644);
MODULE_PARM_DESC(competitive, "default competitive mode (0 off, 1 on)");
module_param_cb(loss_reaction, &copa_tunable_ops,
		&copa_tunables[COPA_T_LOSS_REACTION], 0644);
MODULE_PARM_DESC(loss_reaction,
		 "default loss-rate threshold in percent for cutting cwnd (0 ignores loss)");

static int __net_init copa_net_init(struct net *net)
{
	return copa_params_net_init(&copa_params, net);
}

static void __net_exit copa_net_exit(struct net *net)
{
	copa_params_net_exit(&copa_params, net);
}

static struct pernet_operations copa_net_ops = {
	.init	= copa_net_init,
	.exit	= copa_net_exit,
	.id	= &copa_params.net_id,
	.size	= COPA_NET_SIZE(COPA_T_NR),
};

static struct tcp_congestion_ops tcp_copa_cong_ops __read_mostly = {
	.name		= "copa",
	.owner		= THIS_MODULE,
	.init		= copa_init,
	.cong_control	= copa_cong_control,
	.ssthresh	= copa_ssthresh,
	.undo_cwnd	= copa_undo_cwnd,
	.set_state	= copa_set_state,
	.get_info	= copa_get_info,
};

static int __init copa_register(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct copa) > ICSK_CA_PRIV_SIZE);

	ret = register_pernet_subsys(&copa_net_ops);
	if (ret)
		return ret;
	ret = tcp_register_congestion_control(&tcp_copa_cong_ops);
	if (ret)
		unregister_pernet_subsys(&copa_net_ops);
	return ret;
}

static void __exit copa_unregister(void)
{
	tcp_unregister_congestion_control(&tcp_copa_cong_ops);
	unregister_pernet_subsys(&copa_net_ops);
}

module_init(copa_register);
module_exit(copa_unregister);

MODULE_AUTHOR("Copa for Linux developers");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");
MODULE_DESCRIPTION("TCP Copa (delay-based congestion control, NSDI 2018)");
