/* SPDX-License-Identifier: GPL-2.0 */
/*
 * State and helpers shared by tcp_copa.ko and tcp_copa_policer.ko.
 * tcp_copa.ko implements everything declared here and exports it;
 * tcp_copa_policer.ko adds policer detection on top (see tcp_copa.c for
 * the algorithm).
 */
#ifndef _TCP_COPA_H
#define _TCP_COPA_H

#include <linux/types.h>
#include <net/tcp.h>

#include "tcp_copa_compat.h"

/* Fixed point: cwnd, targets and 1/delta are in units of 1/256 packet. */
#define COPA_SHIFT	8
#define COPA_UNIT	((u32)BIT(COPA_SHIFT))

/* Operating modes, as reported by the tracepoint and inet_diag. */
enum copa_mode {
	COPA_MODE_SLOW_START = 1,
	COPA_MODE_DEFAULT = 2,
	COPA_MODE_COMPETITIVE = 3,
	COPA_MODE_POLICED = 4,
};

/*
 * Windowed extreme (min or max) of RTT samples. The window is split in
 * two halves: @cur holds the extreme of the half that started at @start,
 * @prev that of the half before it, so the result always covers between
 * one and two half-windows of history. Times are the low 32 bits of
 * tp->tcp_mstamp (microseconds); u32 subtraction makes wraparound safe.
 * A value of 0 means "no sample yet" (samples are clamped to >= 1 us).
 */
struct copa_win {
	u32	cur;
	u32	prev;
	u32	start;
};

static inline u32 copa_win_min(const struct copa_win *w)
{
	return min_not_zero(w->cur, w->prev);
}

/* Per-socket Copa state, in icsk_ca_priv. */
struct copa {
	struct copa_win	rtt_min;	/* min RTT over 10 s: propagation */
	struct copa_win	rtt_standing;	/* min RTT over srtt/2 */
	struct copa_win	rtt_max;	/* max RTT over 4 srtt */
	u32	next_round_delivered;	/* tp->delivered ending this round */
	u32	last_empty_us;		/* when the queue was nearly empty */
	u32	round_cwnd;		/* cwnd (packets) at round start */
	u32	inv_delta;		/* current 1/delta, COPA_UNIT scale */
	u32	inv_delta0;		/* configured 1/delta, COPA_UNIT scale */
	u32	hold_rate;		/* bytes/s to hold, 0 = Copa decides */
	u32	loss_lost;		/* packets lost in the loss window */
	u32	loss_delivered;		/* packets delivered in the window */
	u16	velocity;		/* v, in packets */
	u8	cwnd_frac;		/* fraction of cwnd, 1/COPA_UNIT */
	u8	same_dir_rounds;	/* rounds cwnd moved in @dir */
	u8	loss_thresh;		/* loss reaction threshold, percent */
	u8	slow_start:1,		/* still in slow start */
		competitive_on:1,	/* competitive mode allowed */
		competitive:1,		/* competing with a buffer-filler */
		round_start:1,		/* this ACK started a new round */
		round_loss:1,		/* losses seen in this round */
		loss_second:1,		/* second round of the loss window */
		dir:2;			/* enum copa_dir of the last round */
};

/* Queueing delay dq = RTTstanding - RTTmin, in us. */
static inline u32 copa_dq_us(const struct copa *ca)
{
	u32 standing = copa_win_min(&ca->rtt_standing);
	u32 rtt_min = copa_win_min(&ca->rtt_min);

	return standing > rtt_min ? standing - rtt_min : 0;
}

void copa_init(struct sock *sk);
void copa_update(struct sock *sk, const struct rate_sample *rs);
u32 copa_ssthresh(struct sock *sk);
u32 copa_undo_cwnd(struct sock *sk);
void copa_set_state(struct sock *sk, u8 new_state);
size_t copa_get_info(struct sock *sk, u32 ext, int *attr,
		     union tcp_cc_info *info);

/*
 * Tunables: module parameters that set the defaults of per-namespace
 * sysctls. Each value is an unsigned int; "milli" values are written and
 * shown as decimals with up to three places (0.04 is stored as 40).
 */
struct copa_tunable {
	const char	*name;
	unsigned int	min;
	unsigned int	max;
	bool		milli;
	unsigned int	def;	/* module parameter: default for new netns */
};

extern const struct kernel_param_ops copa_tunable_ops;

struct copa_params {
	const char		*path;	/* sysctl directory, "net/ipv4/..." */
	struct copa_tunable	*tun;
	unsigned int		n;
	unsigned int		net_id;	/* pernet id of struct copa_net */
};

/* Per-namespace values, allocated by the pernet subsystem. */
struct copa_net {
	struct ctl_table_header	*hdr;
	unsigned int		val[];
};

#define COPA_NET_SIZE(n)	(sizeof(struct copa_net) + (n) * sizeof(unsigned int))

int copa_params_net_init(const struct copa_params *p, struct net *net);
void copa_params_net_exit(const struct copa_params *p, struct net *net);
const unsigned int *copa_params_of(const struct copa_params *p,
				   const struct net *net);

#endif /* _TCP_COPA_H */
