// SPDX-License-Identifier: GPL-2.0
/*
 * Copa: practical delay-based congestion control (Arun and Balakrishnan,
 * NSDI 2018).
 *
 * Copa aims at a sending rate of 1/(delta * dq) packets per second, where
 * dq = RTTstanding - RTTmin is the queueing delay. RTTmin is the minimum
 * RTT over the last 5 to 10 s (or 10 to 20 RTTmin, if longer); RTTstanding
 * the minimum over the last srtt/4 to srtt/2, which filters ACK jitter and
 * delayed ACKs. As a window, the target is RTTstanding / (delta * dq).
 * Each ACK moves cwnd towards it by v / (delta * cwnd) per packet acked,
 * the division's remainder carried to the next ACK. The velocity v is 1
 * until cwnd has moved the same way for three rounds, then doubles each
 * round up to half a window per round, and is 1 again when the direction
 * flips. Packets are paced at 2 * cwnd / RTTstanding. A lone flow keeps
 * about 1/delta packets queued and empties its queue every few rounds.
 *
 * Here is a state transition diagram for Copa's modes:
 *
 *                    |   a timeout, from any mode
 *                    V
 *   +----------- SLOW_START ------------+
 *   | a "decrease", or a loss           | a loss whose ACK train met a
 *   V                                   V limit, then a round losing 1/8
 * DEFAULT ----------------------------> POLICED
 *  |  ^    two lossy rounds at one       |
 *  |  |    rate with the queue low       |
 *  |  +----------------------------------+
 *  |  |    the hold is over, a queue builds, or it lost twice
 *  V  |
 * COMPETITIVE   (enters POLICED and leaves it as DEFAULT does)
 *
 * SLOW_START doubles cwnd per round until the first "decrease" decision
 * (then the overshoot drains for three rounds at 3/4 of the measured
 * queue per round) or the first loss (then cwnd is what the path
 * delivered in the round trip, at most half). Until a round after it
 * loses less than an eighth, lost packets leave the window (packet
 * conservation). It is not entered again but after a timeout.
 *
 * DEFAULT is the paper's mode, with delta as configured. A standing queue
 * (over twice Copa's own and over RTTmin / 4) makes a loss congestion:
 * with loss_reaction = N > 0, a round losing over N/4 % halves 1/delta
 * (regrowing by 1/32 per clean round), and a two-round window losing over
 * N % cuts cwnd by 30%. Losses with the queue low are noise, or a limit.
 *
 * COMPETITIVE starts when the queue has not come nearly empty for five
 * rounds (a buffer-filler shares the bottleneck) and ends when it does,
 * twice in eight rounds or five rounds in a row. 1/delta grows by one per
 * round and halves on a round with a loss or an ECN mark, never below
 * the configured value; RTTmin's window is ten minutes meanwhile, as the
 * competitor's queue never drains.
 *
 * POLICED: two rounds that lose at least 1% with the queue low, at
 * delivery rates within 12%, while the window grew past what that rate
 * carries, are a limit that drops instead of queueing (a token-bucket
 * policer, or a buffer shorter than Copa's target queue). Copa then paces
 * at that rate, with a window of 1.5 times its BDP (at least BDP + 2
 * packets), for 48 rounds (twice as long after each probe that met the
 * same limit, up to 255). Rounds that the application limited, or in
 * which sending restarted after idle, do not measure the path and are
 * not sampled; nor, in a hold, are rounds that sent under 3/4 of the held
 * rate (a write's last round). A standing queue, or a second lossy round
 * after the held rate was cut, ends the hold early; Copa then probes above
 * the held rate from one BDP of it.
 *
 * tcp_copa_policer.ko is the same algorithm with the detector's
 * parameters as sysctls. Around the algorithm: an undo (a loss or
 * timeout found spurious) restores the window and 1/delta, and ends a
 * slow start the timeout began; the first round after idle is paced at
 * 1x; RTT samples of whole milliseconds (the timestamp echo's) are
 * skipped.
 *
 * Every window, MSS and time the stack hands in is clamped before any
 * arithmetic: a route's initcwnd, which the owner of a user namespace
 * sets, is clamped only to snd_cwnd_clamp by the stack.
 *
 * The algorithm lives in tcp_copa_algo.h, shared with tcp_copa_policer.ko,
 * the BPF build and the user-space model test; this file connects it to
 * the kernel and owns the tunables.
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

/* COPA_TUNABLES of tcp_copa_params.h, indexed by enum copa_tunable_id. */
static struct copa_tunable copa_tunables[COPA_T_NR] = {
	COPA_TUNABLES(COPA_TUNABLE)
};

static struct copa_params copa_params = {
	.path	= "net/ipv4/tcp_copa",
	.tun	= copa_tunables,
	.n	= COPA_T_NR,
};

/* ---------------------------------------------------------------------
 * From the stack to the algorithm and back.
 */

/* Fill @ack from the socket and the rate sample, as they are. */
static void copa_ack_begin(struct sock *sk, const struct rate_sample *rs,
			   struct copa_ack *ack)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	*ack = (struct copa_ack) {
		.now_us		= tp->tcp_mstamp,
		.srtt_us	= tp->srtt_us >> 3,
		.cwnd		= tcp_snd_cwnd(tp),
		.cwnd_clamp	= tp->snd_cwnd_clamp,
		.mss		= tp->mss_cache,
		.delivered	= tp->delivered,
		.lost		= tp->lost,
		.prior_delivered = rs->prior_delivered,
		.rs_delivered	= rs->delivered,
		.acked_sacked	= min_t(u32, rs->acked_sacked, S32_MAX),
		.losses		= rs->losses,
		.in_flight	= tcp_packets_in_flight(tp),
		.rtt_us		= rs->rtt_us < 0 ? -1 :
				  (s32)min_t(long, rs->rtt_us, S32_MAX),
		.cwnd_limited	= tcp_is_cwnd_limited(sk),
		.app_limited	= rs->is_app_limited,
	};
}

static void copa_set_pacing_rate(struct sock *sk, u64 rate)
{
	rate = min_t(u64, rate, READ_ONCE(sk->sk_max_pacing_rate));
	WRITE_ONCE(sk->sk_pacing_rate, rate);
}

/*
 * ssthresh mirrors Copa's phase, so that tcp_in_slow_start() (and with it
 * tcp_is_cwnd_limited()) agrees with Copa: infinite in slow start, cwnd
 * after it.
 */
static u32 copa_phase_ssthresh(const struct copa *ca, u32 cwnd)
{
	return ca->slow_start ? TCP_INFINITE_SSTHRESH : cwnd;
}

/* Apply the algorithm's result to the socket. */
static void copa_ack_end(struct sock *sk, const struct copa_ack *ack)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct copa *ca = inet_csk_ca(sk);

	tcp_snd_cwnd_set(tp, ack->cwnd);
	tp->snd_ssthresh = copa_phase_ssthresh(ca, ack->cwnd);
	copa_set_pacing_rate(sk, ack->pacing_rate);
	trace_copa_update(sk, ca, ack->target, copa_dq_us(ca), copa_mode(ca));
}

void tcp_copa_cong_control(COPA_CONG_CONTROL_ARGS)
{
	struct copa_ack sample;

	copa_ack_begin(sk, rs, &sample);
	if (copa_on_ack(inet_csk_ca(sk), &sample))
		copa_ack_end(sk, &sample);
}
EXPORT_SYMBOL_COPA(tcp_copa_cong_control);

/* ---------------------------------------------------------------------
 * Connection events.
 */

/* Pace the current window as an ACK would, between ACKs. */
static void copa_pace_window(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u64 rate = copa_window_pacing_rate(inet_csk_ca(sk), tcp_snd_cwnd(tp),
					   tp->mss_cache, tp->srtt_us >> 3);

	if (rate)
		copa_set_pacing_rate(sk, rate);
}

void tcp_copa_init(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	copa_reset(inet_csk_ca(sk), copa_param(&copa_params, sk, COPA_T_DELTA),
		   copa_param(&copa_params, sk, COPA_T_COMPETITIVE),
		   copa_param(&copa_params, sk, COPA_T_LOSS_REACTION),
		   tcp_snd_cwnd(tp), tp->delivered);
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED);
	copa_pace_window(sk);
}
EXPORT_SYMBOL_COPA(tcp_copa_init);

/*
 * The stack calls this as it enters recovery, loss or CWR: Copa keeps
 * what an undo restores, and the answer only mirrors Copa's phase.
 */
u32 tcp_copa_ssthresh(struct sock *sk)
{
	struct copa *ca = inet_csk_ca(sk);
	u32 cwnd = tcp_snd_cwnd(tcp_sk(sk));

	copa_save_prior(ca, cwnd);
	return copa_phase_ssthresh(ca, cwnd);
}
EXPORT_SYMBOL_COPA(tcp_copa_ssthresh);

/* The reduction was spurious: restore what copa_ssthresh() kept. */
u32 tcp_copa_undo_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	return min(copa_undo(inet_csk_ca(sk), tcp_snd_cwnd(tp)),
		   tp->snd_cwnd_clamp);
}
EXPORT_SYMBOL_COPA(tcp_copa_undo_cwnd);

/* After a timeout the stack has set cwnd to 1 + in flight: restart. */
void tcp_copa_set_state(struct sock *sk, u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (new_state != TCP_CA_Loss)
		return;
	copa_restart(inet_csk_ca(sk), tcp_snd_cwnd(tp), tp->delivered);
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
}
EXPORT_SYMBOL_COPA(tcp_copa_set_state);

/* Every ACK passes here, before cong_control if it gets there. */
void tcp_copa_in_ack_event(struct sock *sk, u32 flags)
{
	copa_on_ack_event(inet_csk_ca(sk), flags & CA_ACK_ECE);
}
EXPORT_SYMBOL_COPA(tcp_copa_in_ack_event);

/*
 * Sending starts with nothing in flight, after tp->lsndtime. The last
 * rate sample (tp->rate_delivered over tp->rate_interval_us, what
 * tcp_info reports as delivery_rate) bounds the window of the first round.
 */
void tcp_copa_tx_start(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 idle = tcp_jiffies32 - tp->lsndtime;
	u64 idle_us = (u64)jiffies_to_msecs(idle) * USEC_PER_MSEC;

	tcp_snd_cwnd_set(tp, copa_on_tx_start(inet_csk_ca(sk), idle_us,
					      tp->srtt_us >> 3,
					      tcp_snd_cwnd(tp),
					      tp->rate_delivered,
					      tp->rate_interval_us));
	copa_pace_window(sk);
}
EXPORT_SYMBOL_COPA(tcp_copa_tx_start);

/*
 * inet_diag reuses struct tcpvegas_info: tcpv_enabled = mode (enum
 * copa_mode, never 0), tcpv_rttcnt = velocity, tcpv_rtt = RTTstanding,
 * tcpv_minrtt = RTTmin (both us). ss -ti uses tcpv_rtt for "send".
 */
size_t tcp_copa_get_info(struct sock *sk, u32 ext, int *attr,
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
EXPORT_SYMBOL_COPA(tcp_copa_get_info);

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

const struct kernel_param_ops tcp_copa_tunable_ops = {
	.set = copa_tunable_set,
	.get = copa_tunable_get,
};
EXPORT_SYMBOL_COPA(tcp_copa_tunable_ops);

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

const unsigned int *tcp_copa_params_of(const struct copa_params *p,
				       const struct net *net)
{
	const struct copa_net *cn = net_generic(net, p->net_id);

	return cn->val;
}
EXPORT_SYMBOL_COPA(tcp_copa_params_of);

/* A new namespace starts from the module parameters. */
int tcp_copa_params_net_init(const struct copa_params *p, struct net *net)
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
EXPORT_SYMBOL_COPA(tcp_copa_params_net_init);

void tcp_copa_params_net_exit(const struct copa_params *p, struct net *net)
{
	struct copa_net *cn = net_generic(net, p->net_id);
	const struct ctl_table *table = cn->hdr->ctl_table_arg;

	unregister_net_sysctl_table(cn->hdr);
	kfree(table);
}
EXPORT_SYMBOL_COPA(tcp_copa_params_net_exit);

#define COPA_TUNABLE_OF(id)	(&copa_tunables[COPA_T_##id])
COPA_TUNABLES(COPA_MODULE_PARAM)

static int __net_init copa_net_init(struct net *net)
{
	return tcp_copa_params_net_init(&copa_params, net);
}

static void __net_exit copa_net_exit(struct net *net)
{
	tcp_copa_params_net_exit(&copa_params, net);
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
	.init		= tcp_copa_init,
	.cong_control	= tcp_copa_cong_control,
	.ssthresh	= tcp_copa_ssthresh,
	.undo_cwnd	= tcp_copa_undo_cwnd,
	.set_state	= tcp_copa_set_state,
	.in_ack_event	= tcp_copa_in_ack_event,
	COPA_TX_START_OP,
	.get_info	= tcp_copa_get_info,
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
MODULE_VERSION(COPA_VERSION);
MODULE_DESCRIPTION("TCP Copa (delay-based congestion control, NSDI 2018)");
