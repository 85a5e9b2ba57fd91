// SPDX-License-Identifier: GPL-2.0
/*
 * Copa with token-bucket policer detection.
 *
 * A policer drops what exceeds its token rate without queueing it, so
 * Copa's delay signal sees an empty queue and keeps growing the window
 * into heavy loss. This module runs Copa's algorithm (tcp_copa_algo.h,
 * with tcp_copa.ko's glue and tunables) unchanged and watches for the
 * policer's fingerprint, after BBRv1's long-term sampling: an interval
 * starts at a loss and ends at a loss 4 to 16 rounds later. It
 * counts when at least loss_thresh percent of the packets delivered in it
 * were lost while the queueing delay stayed under RTTmin / 4 (a FIFO that
 * overflows shows a standing queue instead). Two consecutive counting
 * intervals whose delivery rates agree within rate_tol percent (or
 * 4 kbit/s) mean a policer: Copa is then held at their mean rate, pacing
 * at it with a window of 1.5 times its BDP, for hold_rounds rounds. Afterwards
 * Copa probes again from one BDP of the policed rate, paced at that rate
 * for a round, with its configured delta; if the policer is gone, it stays
 * normal Copa. The detector's code is in tcp_copa_algo.h too.
 * Application-limited samples, a timeout or an interval without enough
 * loss restart the sampling.
 */

/* <net/tcp.h> first: 5.10's generic.h needs struct net. */
#include <net/tcp.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <net/netns/generic.h>

#include "tcp_copa.h"

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

static void copa_policer_cong_control(COPA_CONG_CONTROL_ARGS)
{
	struct copa_policer *cp = inet_csk_ca(sk);
	struct copa_ack sample;

	if (!copa_ack_begin(sk, rs, &sample))
		return;
	copa_on_ack(&cp->copa, &sample);
	policer_on_ack(cp, &sample);
	copa_ack_end(sk, &sample);
}

static void copa_policer_init(struct sock *sk)
{
	copa_init(sk);
	policer_init(inet_csk_ca(sk),
		     copa_param(&policer_params, sk, POLICER_T_DETECT),
		     copa_param(&policer_params, sk, POLICER_T_LOSS_THRESH),
		     copa_param(&policer_params, sk, POLICER_T_RATE_TOL),
		     copa_param(&policer_params, sk, POLICER_T_HOLD_ROUNDS));
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
	.in_ack_event	= copa_in_ack_event,
	COPA_TX_START_OP,
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
MODULE_VERSION(COPA_VERSION);
COPA_IMPORT_NS();
MODULE_DESCRIPTION("TCP Copa with token-bucket policer detection");
