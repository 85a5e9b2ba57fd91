// SPDX-License-Identifier: GPL-2.0
/*
 * Copa with tunable rate-limit detection.
 *
 * Copa (tcp_copa.ko) tells losses apart by the queue they come with (see
 * tcp_copa.c): a loss with a standing queue is congestion; with the queue
 * low, two rounds that lose at the same delivery rate while the window
 * (less what the queue holds) grew well past what that rate carries mean
 * a limit that drops instead of queueing, a token-bucket policer or a
 * buffer shorter than Copa's target queue, and Copa then holds that rate
 * (paced, with a window of 1.5 times its BDP, at least BDP + 2) for hold_rounds rounds,
 * twice as long after each probe that met the same limit. tcp_copa.ko
 * runs that detector with its defaults; this module is the same
 * algorithm, with the detector's parameters as per-namespace sysctls
 * under net.ipv4.tcp_copa_policer: detect (0/1), loss_thresh (percent a
 * round must lose, 1-100), rate_tol (percent two rounds' rates may
 * differ, 1-100) and hold_rounds (1-255), COPA_POLICER_TUNABLES of
 * tcp_copa_params.h. Copa's own tunables (net.ipv4.tcp_copa) apply as
 * well.
 */

/* <net/tcp.h> first: 5.10's generic.h needs struct net. */
#include <net/tcp.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <net/netns/generic.h>

#include "tcp_copa.h"

/* COPA_POLICER_TUNABLES, indexed by enum copa_policer_tunable_id. */
static struct copa_tunable policer_tunables[POLICER_T_NR] = {
	COPA_POLICER_TUNABLES(COPA_TUNABLE)
};

static struct copa_params policer_params = {
	.path	= "net/ipv4/tcp_copa_policer",
	.tun	= policer_tunables,
	.n	= POLICER_T_NR,
};

static void copa_policer_init(struct sock *sk)
{
	tcp_copa_init(sk);
	copa_set_detector(inet_csk_ca(sk),
			  copa_param(&policer_params, sk, POLICER_T_DETECT),
			  copa_param(&policer_params, sk, POLICER_T_LOSS_THRESH),
			  copa_param(&policer_params, sk, POLICER_T_RATE_TOL),
			  copa_param(&policer_params, sk, POLICER_T_HOLD_ROUNDS));
}

#define COPA_TUNABLE_OF(id)	(&policer_tunables[POLICER_T_##id])
COPA_POLICER_TUNABLES(COPA_MODULE_PARAM)

static int __net_init policer_net_init(struct net *net)
{
	return tcp_copa_params_net_init(&policer_params, net);
}

static void __net_exit policer_net_exit(struct net *net)
{
	tcp_copa_params_net_exit(&policer_params, net);
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
	.cong_control	= tcp_copa_cong_control,
	.ssthresh	= tcp_copa_ssthresh,
	.undo_cwnd	= tcp_copa_undo_cwnd,
	.set_state	= tcp_copa_set_state,
	.in_ack_event	= tcp_copa_in_ack_event,
	COPA_TX_START_OP,
	.get_info	= tcp_copa_get_info,
};

static int __init copa_policer_register(void)
{
	int ret;

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
MODULE_DESCRIPTION("TCP Copa with tunable policer (rate-limit) detection");
