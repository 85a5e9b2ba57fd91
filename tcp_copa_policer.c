// SPDX-License-Identifier: GPL-2.0
/*
 * Copa with token-bucket policer detection.
 *
 * A policer drops what exceeds its token rate without queueing it, so
 * Copa's delay signal sees an empty queue and keeps growing the window
 * into heavy loss. This module runs the Copa of tcp_copa.ko unchanged and
 * watches for the policer's fingerprint, after BBRv1's long-term sampling:
 * an interval starts at a loss and ends at a loss 4 to 16 rounds later. It
 * counts when at least loss_thresh percent of the packets delivered in it
 * were lost while the queueing delay stayed under RTTmin / 4 (a FIFO that
 * overflows shows a standing queue instead). Two consecutive counting
 * intervals whose delivery rates agree within rate_tol percent (or
 * 4 kbit/s) mean a policer: Copa is then held at their mean rate, pacing
 * at it with a window of twice its BDP, for hold_rounds rounds. Afterwards
 * Copa probes again from its configured delta; if the policer is gone, it
 * stays normal Copa.
 * Application-limited samples, a timeout or an interval without enough
 * loss restart the sampling.
 */

/* <net/tcp.h> first: 5.10's generic.h needs struct net. */
#include <net/tcp.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <net/netns/generic.h>

#include "tcp_copa.h"

#define POLICER_MIN_ROUNDS	4	/* an interval spans 4 to 16 rounds */
#define POLICER_MAX_ROUNDS	16
#define POLICER_RATE_SLACK	500	/* bytes/s (4 kbit/s) always agree */
#define POLICER_QUEUE_LOW_DIV	4	/* queue low: dq < RTTmin / 4 */

enum copa_policer_tunable_id {
	POLICER_T_DETECT,
	POLICER_T_LOSS_THRESH,
	POLICER_T_RATE_TOL,
	POLICER_T_HOLD_ROUNDS,
	POLICER_T_NR,
};

static struct copa_tunable policer_tunables[POLICER_T_NR] = {
	[POLICER_T_DETECT]	= { "detect", 0, 1, false, 1 },
	[POLICER_T_LOSS_THRESH]	= { "loss_thresh", 1, 100, false, 20 },
	[POLICER_T_RATE_TOL]	= { "rate_tol", 1, 100, false, 12 },
	[POLICER_T_HOLD_ROUNDS]	= { "hold_rounds", 1, 255, false, 48 },
};

static struct copa_params policer_params = {
	.path	= "net/ipv4/tcp_copa_policer",
	.tun	= policer_tunables,
	.n	= POLICER_T_NR,
};

struct copa_policer {
	struct copa	copa;
	u32	start_us;		/* interval start, tcp_mstamp low bits */
	u32	start_delivered;	/* tp->delivered at interval start */
	u32	start_lost;		/* tp->lost at interval start */
	u32	last_rate;		/* previous interval's rate, bytes/s */
	u8	rounds;			/* rounds in this interval */
	u8	hold_left;		/* rounds left at the held rate */
	u8	loss_thresh;		/* percent lost for an interval to count */
	u8	rate_tol;		/* percent two rates may differ */
	u8	hold_rounds;
	u8	detect:1,
		sampling:1;
};

static void policer_reset(struct copa_policer *cp)
{
	cp->sampling = 0;
	cp->last_rate = 0;
}

static void policer_start_interval(struct copa_policer *cp,
				   const struct tcp_sock *tp)
{
	cp->start_us = (u32)tp->tcp_mstamp;
	cp->start_delivered = tp->delivered;
	cp->start_lost = tp->lost;
	cp->rounds = 0;
	cp->sampling = 1;
}

static bool policer_interval_lossy(const struct copa_policer *cp,
				   const struct tcp_sock *tp)
{
	u64 delivered = tp->delivered - cp->start_delivered;
	u64 lost = tp->lost - cp->start_lost;

	return delivered && lost * 100 >= delivered * cp->loss_thresh;
}

static bool policer_queue_low(const struct copa *ca)
{
	return copa_dq_us(ca) < copa_win_min(&ca->rtt_min) / POLICER_QUEUE_LOW_DIV;
}

/* Delivery rate over the interval, bytes per second. */
static u32 policer_interval_rate(const struct copa_policer *cp,
				 const struct tcp_sock *tp)
{
	u64 bytes = (u64)(tp->delivered - cp->start_delivered) * tp->mss_cache;
	u32 elapsed = max((u32)tp->tcp_mstamp - cp->start_us, 1U);

	return min_t(u64, div_u64(bytes * USEC_PER_SEC, elapsed), U32_MAX);
}

static bool policer_rates_agree(const struct copa_policer *cp, u32 rate)
{
	u32 diff = max(rate, cp->last_rate) - min(rate, cp->last_rate);

	return diff <= POLICER_RATE_SLACK ||
	       (u64)diff * 100 <= (u64)cp->last_rate * cp->rate_tol;
}

static void policer_hold(struct copa_policer *cp, u32 rate)
{
	cp->copa.hold_rate = rate;
	cp->hold_left = cp->hold_rounds;
	policer_reset(cp);
}

/*
 * Count down the hold. When it ends Copa probes again, from its configured
 * delta: the hold, not the loss reaction, answered the policer's losses.
 */
static void policer_count_hold(struct copa_policer *cp)
{
	if (cp->copa.round_start && --cp->hold_left == 0) {
		cp->copa.hold_rate = 0;
		cp->copa.inv_delta = cp->copa.inv_delta0;
	}
}

/* Close the interval at this loss: hold, or remember its rate. */
static void policer_end_interval(struct copa_policer *cp,
				 const struct tcp_sock *tp)
{
	u32 rate;

	if (!policer_interval_lossy(cp, tp) || !policer_queue_low(&cp->copa))
		return;
	rate = policer_interval_rate(cp, tp);
	if (cp->last_rate && policer_rates_agree(cp, rate)) {
		policer_hold(cp, rate / 2 + cp->last_rate / 2);
		return;
	}
	cp->last_rate = rate;
	policer_start_interval(cp, tp);
}

static void policer_sample(struct sock *sk, struct copa_policer *cp,
			   const struct rate_sample *rs)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (cp->copa.hold_rate) {
		policer_count_hold(cp);
		return;
	}
	if (rs->is_app_limited) {
		policer_reset(cp);
		return;
	}
	if (!cp->sampling) {
		if (rs->losses > 0)
			policer_start_interval(cp, tp);
		return;
	}
	if (cp->copa.round_start && ++cp->rounds > POLICER_MAX_ROUNDS) {
		policer_reset(cp);
		return;
	}
	if (rs->losses > 0 && cp->rounds >= POLICER_MIN_ROUNDS)
		policer_end_interval(cp, tp);
}

static void copa_policer_cong_control(COPA_CONG_CONTROL_ARGS)
{
	struct copa_policer *cp = inet_csk_ca(sk);

	copa_update(sk, rs);
	if (cp->detect)
		policer_sample(sk, cp, rs);
}

static void copa_policer_init(struct sock *sk)
{
	const unsigned int *val = copa_params_of(&policer_params, sock_net(sk));
	struct copa_policer *cp = inet_csk_ca(sk);

	copa_init(sk);
	cp->detect = !!val[POLICER_T_DETECT];
	cp->loss_thresh = val[POLICER_T_LOSS_THRESH];
	cp->rate_tol = val[POLICER_T_RATE_TOL];
	cp->hold_rounds = val[POLICER_T_HOLD_ROUNDS];
	cp->hold_left = 0;
	policer_reset(cp);
}

/* A timeout restarts Copa (and drops any hold): sample afresh. */
static void copa_policer_set_state(struct sock *sk, u8 new_state)
{
	copa_set_state(sk, new_state);
	if (new_state == TCP_CA_Loss)
		policer_reset(inet_csk_ca(sk));
}

module_param_cb(detect, &copa_tunable_ops,
		&policer_tunables[POLICER_T_DETECT], 0644);
MODULE_PARM_DESC(detect, "default policer detection (0 off, 1 on)");
module_param_cb(loss_thresh, &copa_tunable_ops,
		&policer_tunables[POLICER_T_LOSS_THRESH], 0644);
MODULE_PARM_DESC(loss_thresh,
		 "default percent of packets lost for an interval to count, 1-100");
module_param_cb(rate_tol, &copa_tunable_ops,
		&policer_tunables[POLICER_T_RATE_TOL], 0644);
MODULE_PARM_DESC(rate_tol,
		 "default percent two interval rates may differ, 1-100");
module_param_cb(hold_rounds, &copa_tunable_ops,
		&policer_tunables[POLICER_T_HOLD_ROUNDS], 0644);
MODULE_PARM_DESC(hold_rounds, "default rounds to hold the policed rate, 1-255");

static int __net_init policer_net_init(struct net *net)
{
	return copa_params_net_init(&policer_params, net);
}

static void __net_exit policer_net_exit(struct net *net)
{
	copa_params_net_exit(&policer_params, net);
}

static struct pernet_operations policer_net_ops = {
	.init	= policer_net_init,
	.exit	= policer_net_exit,
	.id	= &policer_params.net_id,
	.size	= COPA_NET_SIZE(POLICER_T_NR),
};

static struct tcp_congestion_ops tcp_copa_policer_cong_ops __read_mostly = {
	.name		= "copa_policer",
	.owner		= THIS_MODULE,
	.init		= copa_policer_init,
	.cong_control	= copa_policer_cong_control,
	.ssthresh	= copa_ssthresh,
	.undo_cwnd	= copa_undo_cwnd,
	.set_state	= copa_policer_set_state,
	.get_info	= copa_get_info,
};

static int __init copa_policer_register(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct copa_policer) > ICSK_CA_PRIV_SIZE);

	ret = register_pernet_subsys(&policer_net_ops);
	if (ret)
		return ret;
	ret = tcp_register_congestion_control(&tcp_copa_policer_cong_ops);
	if (ret)
		unregister_pernet_subsys(&policer_net_ops);
	return ret;
}

static void __exit copa_policer_unregister(void)
{
	tcp_unregister_congestion_control(&tcp_copa_policer_cong_ops);
	unregister_pernet_subsys(&policer_net_ops);
}

module_init(copa_policer_register);
module_exit(copa_policer_unregister);

MODULE_AUTHOR("Copa for Linux developers");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");
MODULE_DESCRIPTION("TCP Copa with token-bucket policer detection");
