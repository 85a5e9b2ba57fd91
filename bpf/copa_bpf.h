/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Layouts shared by tcp_copa.bpf.c (the congestion controls), the
 * example sock_ops program copa_sockops.bpf.c and scripts/copa-bpf,
 * which writes and reads these maps from user space. All fields are
 * host-endian u32 unless said otherwise.
 */
#ifndef _COPA_BPF_H
#define _COPA_BPF_H

/*
 * Valid ranges: the same as the module's sysctls (tcp_copa.c,
 * tcp_copa_policer.c). delta is in thousandths (500 is 0.5).
 */
#define COPA_DELTA_MIN		1
#define COPA_DELTA_MAX		1000
#define COPA_DELTA_DEF		500
#define COPA_COMPETITIVE_DEF	1
#define COPA_LOSS_REACTION_MAX	100
#define COPA_LOSS_REACTION_DEF	5
#define COPA_DETECT_DEF		1
/* the detector's, from tcp_copa_algo.h: 1-100, 1-100, 1-255 */
#define COPA_LOSS_THRESH_DEF	COPA_LIMIT_LOSS_PCT
#define COPA_RATE_TOL_DEF	COPA_RATE_TOL_PCT
#define COPA_HOLD_ROUNDS_DEF	COPA_HOLD_ROUNDS

/*
 * Defaults for new connections: the global data section ".data.params"
 * of tcp_copa.bpf.o. A field out of range is replaced by the built-in
 * default above when a connection starts, and counted in
 * copa_stats.bad_defaults.
 */
struct copa_bpf_defaults {
	u32	delta;
	u32	competitive;
	u32	loss_reaction;
	u32	detect;		/* bpf_copa_pol only */
	u32	loss_thresh;	/* bpf_copa_pol only */
	u32	rate_tol;	/* bpf_copa_pol only */
	u32	hold_rounds;	/* bpf_copa_pol only */
	u32	flow_stats;	/* 0, 1: keep each flow in copa_flows */
};

/* Which fields of a struct copa_sk_params override the defaults. */
#define COPA_SET_DELTA		(1U << 0)
#define COPA_SET_COMPETITIVE	(1U << 1)
#define COPA_SET_LOSS_REACTION	(1U << 2)
#define COPA_SET_ALL		(COPA_SET_DELTA | COPA_SET_COMPETITIVE | \
				 COPA_SET_LOSS_REACTION)

/*
 * Per-socket override, in the socket storage map copa_sk_params. Read
 * once, when the congestion control starts on the socket. If any field
 * that @set names is out of range, or @set has unknown bits, the whole
 * override is ignored (the defaults apply) and counted in
 * copa_stats.bad_overrides.
 */
struct copa_sk_params {
	u32	set;
	u32	delta;
	u32	competitive;
	u32	loss_reaction;
};

/*
 * The socket storage both objects use: the sock_ops program writes it,
 * the congestion control reads it. Each object declares it from here,
 * and pinning by name makes the two declarations one map.
 */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct copa_sk_params);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} copa_sk_params SEC(".maps");

static inline bool copa_in_range(u32 v, u32 lo, u32 hi)
{
	return v >= lo && v <= hi;
}

/* An override is used whole or not at all. */
static inline bool copa_sk_params_valid(const struct copa_sk_params *p)
{
	if (p->set & ~COPA_SET_ALL)
		return false;
	if ((p->set & COPA_SET_DELTA) &&
	    !copa_in_range(p->delta, COPA_DELTA_MIN, COPA_DELTA_MAX))
		return false;
	if ((p->set & COPA_SET_COMPETITIVE) &&
	    !copa_in_range(p->competitive, 0, 1))
		return false;
	if ((p->set & COPA_SET_LOSS_REACTION) &&
	    !copa_in_range(p->loss_reaction, 0, COPA_LOSS_REACTION_MAX))
		return false;
	return true;
}

/*
 * copa_prefix (LPM trie): destination prefix -> policy. IPv4 addresses
 * are stored IPv4-mapped (::ffff:a.b.c.d), so an IPv4 /24 has
 * prefixlen 96 + 24.
 */
struct copa_prefix_key {
	u32	prefixlen;
	u8	addr[16];
};

#define COPA_CC_NAME_LEN	16

struct copa_prefix_policy {
	char			cc[COPA_CC_NAME_LEN];	/* "" keeps the CC */
	struct copa_sk_params	params;			/* set = 0: none */
};

/*
 * copa_flows (LRU hash): what each flow runs with, for observation. One
 * entry per connection: its addresses and ports and its network
 * namespace, so that flows to one peer from two local addresses or two
 * namespaces are two entries.
 */
struct copa_flow_key {
	u8	saddr[16];	/* local address, IPv4-mapped for IPv4 */
	u8	daddr[16];	/* peer address, IPv4-mapped for IPv4 */
	u32	netns;		/* inode number of the network namespace */
	u16	sport;		/* local port, host order */
	u16	dport;		/* peer port, host order */
};

#define COPA_SRC_DEFAULT	0	/* the global defaults */
#define COPA_SRC_OVERRIDE	1	/* a valid socket-storage override */
#define COPA_SRC_REJECTED	2	/* an invalid override, ignored */

struct copa_flow {
	u32	delta;		/* configured delta, thousandths */
	u32	competitive;
	u32	loss_reaction;
	u32	source;		/* COPA_SRC_* */
	u32	inv_delta;	/* current 1/delta, 1/256 units */
	u32	mode;		/* enum copa_mode */
	u32	velocity;
	u32	rtt_min_us;
	u32	rtt_standing_us;
	u32	cwnd;
	u32	target;		/* target cwnd, packets */
	u32	pacing;		/* sk_pacing_status: 1 TCP paces, 2 fq does */
	u64	updates;	/* refreshes since the flow started */
};

/* Counters in the .bss of each object (see scripts/copa-bpf stats). */

#endif /* _COPA_BPF_H */
