/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel glue shared by tcp_copa.ko and tcp_copa_policer.ko. The
 * algorithm itself is in tcp_copa_algo.h, which both modules compile;
 * tcp_copa.ko implements and exports what is declared here: the
 * congestion-control operations (turning a rate sample into a struct
 * copa_ack and the result back into cwnd and pacing, and the connection
 * events) and the tunables machinery.
 */
#ifndef _TCP_COPA_H
#define _TCP_COPA_H

#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/types.h>
#include <net/tcp.h>

#include "tcp_copa_compat.h"
#include "tcp_copa_algo.h"

void tcp_copa_cong_control(COPA_CONG_CONTROL_ARGS);
void tcp_copa_init(struct sock *sk);
u32 tcp_copa_ssthresh(struct sock *sk);
u32 tcp_copa_undo_cwnd(struct sock *sk);
void tcp_copa_set_state(struct sock *sk, u8 new_state);
void tcp_copa_in_ack_event(struct sock *sk, u32 flags);
size_t tcp_copa_get_info(struct sock *sk, u32 ext, int *attr,
			 union tcp_cc_info *info);

/*
 * Tunables: module parameters that set the defaults of per-namespace
 * sysctls. Each value is an unsigned int; "milli" values are written and
 * shown as decimals with up to three places (0.04 is stored as 40). The
 * tunables, their ranges and defaults are the tables of
 * tcp_copa_params.h; COPA_TUNABLE() makes an entry of one.
 */
struct copa_tunable {
	const char	*name;
	unsigned int	min;
	unsigned int	max;
	bool		milli;
	unsigned int	def;	/* module parameter: default for new netns */
};

extern const struct kernel_param_ops tcp_copa_tunable_ops;

/* An entry of a struct copa_tunable array, in the table's order. */
#define COPA_TUNABLE(id, name, min, max, milli, def, desc)		\
	{ #name, min, max, milli, def },

/*
 * A module parameter for each tunable of a table, the default for new
 * namespaces: the includer defines COPA_TUNABLE_OF(id), its struct
 * copa_tunable of tunable @id, and expands TABLE(COPA_MODULE_PARAM).
 */
#define COPA_MODULE_PARAM(id, name, min, max, milli, def, desc)	\
	module_param_cb(name, &tcp_copa_tunable_ops, COPA_TUNABLE_OF(id), 0644); \
	MODULE_PARM_DESC(name, desc);

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

int tcp_copa_params_net_init(const struct copa_params *p, struct net *net);
void tcp_copa_params_net_exit(const struct copa_params *p, struct net *net);
const unsigned int *tcp_copa_params_of(const struct copa_params *p,
				       const struct net *net);

/* Read one per-namespace value of a socket's namespace. */
static inline unsigned int copa_param(const struct copa_params *p,
				      const struct sock *sk, unsigned int id)
{
	return READ_ONCE(tcp_copa_params_of(p, sock_net(sk))[id]);
}

#endif /* _TCP_COPA_H */
