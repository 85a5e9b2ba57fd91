/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Layouts shared by tcp_copa.bpf.c (the congestion controls), the
 * example sock_ops program copa_sockops.bpf.c and copa-bpf, which
 * writes and reads these maps from user space. All fields are
 * host-endian u32 unless said otherwise.
 */
#ifndef _COPA_BPF_H
#define _COPA_BPF_H

/*
 * The tunables, their ranges and built-in defaults are tcp_copa_params.h's,
 * the modules' own: the structs below have one u32 per tunable, in the
 * table's order, and copa-bpf reads the same table. delta is in
 * thousandths (500 is 0.5).
 */
#include "../tcp_copa_params.h"

#define COPA_BPF_U32(id, name, ...)	u32 name;

/*
 * Defaults for new connections: the global data section ".data.params"
 * of tcp_copa.bpf.o, tcp_copa.ko's tunables, then tcp_copa_policer.ko's
 * (bpf_copa_pol only), then the BPF build's own (flow_stats: keep each
 * flow in copa_flows). A field out of range is replaced by the built-in
 * default when a connection starts, and counted in copa_bad_defaults.
 */
struct copa_bpf_defaults {
	COPA_TUNABLES(COPA_BPF_U32)
	COPA_POLICER_TUNABLES(COPA_BPF_U32)
	COPA_BPF_TUNABLES(COPA_BPF_U32)
};

/*
 * Which fields of a struct copa_sk_params override the defaults: bit
 * COPA_T_<ID> for each tunable of tcp_copa.ko (COPA_SET(DELTA), ...).
 */
#define COPA_SET(id)		(1U << COPA_T_##id)
#define COPA_SET_ALL		((1U << COPA_T_NR) - 1)

/*
 * Per-socket override, in the socket storage map copa_sk_params: @set,
 * then one u32 per tunable of tcp_copa.ko. Read once, when the
 * congestion control starts on the socket. If any field that @set names
 * is out of range, or @set has unknown bits, the whole override is
 * ignored (the defaults apply) and counted in copa_bad_overrides.
 */
struct copa_sk_params {
	u32	set;
	COPA_TUNABLES(COPA_BPF_U32)
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

/* Each field of @p that its set bit names is within its range, and ... */
#define COPA_SK_PARAM_VALID(id, name, min, max, ...)			\
	(!(p->set & COPA_SET(id)) || copa_in_range(p->name, min, max)) &&

/* An override is used whole or not at all. */
static inline bool copa_sk_params_valid(const struct copa_sk_params *p)
{
	return COPA_TUNABLES(COPA_SK_PARAM_VALID) !(p->set & ~COPA_SET_ALL);
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
	u32	noise_us;	/* the RTT's measured noise, us */
	u32	pad;
	u64	updates;	/* refreshes since the flow started */
};

/*
 * The A/B experiment of copa-fleet ab (Documentation/fleet.rst). A
 * connection to a peer inside copa_ab_scope (an LPM trie of prefixes,
 * keyed as copa_prefix) gets the policy of its arm instead of its
 * prefix's, and its arm's label goes into copa_ab_arms under its socket
 * cookie, where copa-fleet collect reads it. The arm is a hash of a
 * salt, the unit and the switchback period (copa_ab_hash()); copa-fleet
 * computes the same hash in Python, and a native test checks that the
 * two agree.
 */
#define COPA_AB_CONNECTION	1	/* unit: the socket cookie */
#define COPA_AB_CLIENT		2	/* ... the peer's address */
#define COPA_AB_PREFIX		3	/* ... the peer's prefix */
#define COPA_AB_SHARES		10000	/* treatment share's unit */
#define COPA_AB_LABEL_LEN	32

/*
 * copa_ab (hash, one entry under key 0): the experiment running; no
 * entry, none. A hash map, not an array, so that an update replaces the
 * entry whole and a connection never sees half of one.
 */
struct copa_ab_config {
	u32	unit;			/* COPA_AB_* */
	u32	treat_share;		/* per COPA_AB_SHARES of the units */
	u64	salt;
	u32	prefix_v4;		/* COPA_AB_PREFIX: prefix lengths */
	u32	prefix_v6;
	u64	start_ns;		/* switchback: CLOCK_BOOTTIME of period 0 */
	u64	period_ns;		/* switchback: period length; 0: none */
	struct copa_prefix_policy policy[2];	/* control, treatment */
	char	label[2][COPA_AB_LABEL_LEN];	/* "NAME/control", ... */
};

/* murmur3's 64-bit finaliser over (h ^ w): one step of copa_ab_hash(). */
static inline u64 copa_ab_mix(u64 h, u64 w)
{
	h ^= w;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/*
 * The arm (0 control, 1 treatment) of the unit (w0, w1) in @period: w0
 * is the cookie (w1 0) or the first and last eight bytes of the
 * IPv4-mapped address (the prefix's, its host bits 0), each read as a
 * host-endian u64.
 */
static inline u32 copa_ab_hash(const struct copa_ab_config *ab, u64 w0,
			       u64 w1, u64 period)
{
	u64 h = copa_ab_mix(copa_ab_mix(copa_ab_mix(ab->salt, w0), w1),
			    period);

	return h % COPA_AB_SHARES < ab->treat_share;
}

/* Counters in the .bss of each object (see copa-bpf stats). */

#endif /* _COPA_BPF_H */
