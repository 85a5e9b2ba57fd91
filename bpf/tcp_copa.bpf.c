// SPDX-License-Identifier: GPL-2.0
/*
 * Copa as BPF struct_ops congestion controls: bpf_copa, and bpf_copa_pol
 * with tunable policer (rate-limit) detection. The algorithm is tcp_copa_algo.h, the same file
 * tcp_copa.ko and tcp_copa_policer.ko compile; this file is only the glue
 * that tcp_copa.c is for the modules, written against the BPF view of the
 * socket:
 *
 *  - the socket and rate sample go into a struct copa_ack, the window and
 *    pacing rate come back out of it (copa_ack_begin/copa_ack_end);
 *  - the tunables (tcp_copa_params.h) come from the global data section
 *    .data.params (struct copa_bpf_defaults), and tcp_copa.ko's from a
 *    socket storage override (copa_sk_params) where one says so; values
 *    outside the sysctls' ranges never reach the algorithm;
 *  - there are no tracepoints and no inet_diag: copa_flows records each
 *    flow's parameters and state once per round instead.
 *
 * cong_control takes (sk, ack, flag, rs) from 6.10 and (sk, rs) before;
 * the Makefile reads which from the vmlinux.h it builds against, and
 * likewise whether the kernel has the 7.1 cwnd_event_tx_start hook.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "copa_bpf_shim.h"
#include "../tcp_copa_algo.h"
#include "copa_bpf.h"

char _license[] SEC("license") = "GPL";

/* Kernel constants; enums a kernel's BTF need not carry. */
#define COPA_TCP_INFINITE_SSTHRESH	0x7fffffffU
#define COPA_TCP_CA_LOSS		4	/* TCP_CA_Loss */
#define COPA_CA_EVENT_TX_START		0	/* CA_EVENT_TX_START */
#define COPA_CA_ACK_ECE			4	/* CA_ACK_ECE */
#define COPA_SK_PACING_NONE		0
#define COPA_SK_PACING_NEEDED		1
#define COPA_AF_INET			2

/*
 * Defaults for new connections, tcp_copa_params.h's; copa-bpf set
 * changes them.
 */
#define COPA_BPF_DEFAULT(id, name, min, max, milli, def, desc)	.name = (def),
struct copa_bpf_defaults copa_defaults SEC(".data.params") = {
	COPA_TUNABLES(COPA_BPF_DEFAULT)
	COPA_POLICER_TUNABLES(COPA_BPF_DEFAULT)
	COPA_BPF_TUNABLES(COPA_BPF_DEFAULT)
};

/*
 * copa_flows is refreshed at a flow's first round start in each
 * 2^COPA_FLOW_EPOCH_SHIFT us of the clock (16 ms): an LRU hash update on
 * every round cost 110 to 120 ns per ACK at veth's 50 us rounds
 * (scripts/bpf-bench --perf), half of what the rest of bpf_copa costs.
 */
#define COPA_FLOW_EPOCH_SHIFT	14

/* Counters (global data, .bss). */
u64 copa_bad_defaults;		/* connections that met an invalid default */
u64 copa_bad_overrides;		/* socket overrides rejected */
u64 copa_overrides;		/* socket overrides applied */
u64 copa_flows_started;		/* connections initialised */
u64 copa_undo_bad;		/* undo_cwnd results the stack would reject */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct copa_flow_key);
	__type(value, struct copa_flow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} copa_flows SEC(".maps");

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* ---------------------------------------------------------------------
 * Parameters.
 */

/*
 * The parameters one connection starts with, all within range: one
 * u32 per tunable of tcp_copa.ko, and where they came from.
 */
struct copa_bpf_conf {
	COPA_TUNABLES(COPA_BPF_U32)
	u32	source;
};

/* bpf_copa_pol's detector parameters, within range. */
struct copa_bpf_policer_conf {
	COPA_POLICER_TUNABLES(COPA_BPF_U32)
};

static __always_inline u32 copa_pick(u32 v, u32 lo, u32 hi, u32 def,
				     bool *bad)
{
	if (v < lo || v > hi) {
		*bad = true;
		return def;
	}
	return v;
}

/* c->name from the default, or the built-in one if that is out of range. */
#define COPA_BPF_PICK(id, name, min, max, milli, def, desc)		\
	c->name = copa_pick(copa_defaults.name, min, max, def, &bad);
/* c->name from the override @p, if its set bit says so. */
#define COPA_BPF_OVERRIDE(id, name, ...)				\
	c->name = p->set & COPA_SET(id) ? p->name : c->name;

static __always_inline void copa_bpf_conf(struct sock *sk,
					  struct copa_bpf_conf *c)
{
	struct copa_sk_params *p;
	bool bad = false;

	COPA_TUNABLES(COPA_BPF_PICK)
	c->source = COPA_SRC_DEFAULT;
	if (bad)
		__sync_fetch_and_add(&copa_bad_defaults, 1);

	p = bpf_sk_storage_get(&copa_sk_params, sk, NULL, 0);
	if (!p || !p->set)
		return;
	if (!copa_sk_params_valid(p)) {
		c->source = COPA_SRC_REJECTED;
		__sync_fetch_and_add(&copa_bad_overrides, 1);
		return;
	}
	COPA_TUNABLES(COPA_BPF_OVERRIDE)
	c->source = COPA_SRC_OVERRIDE;
	__sync_fetch_and_add(&copa_overrides, 1);
}

/* ---------------------------------------------------------------------
 * Observation: copa_flows.
 */

/* ::ffff:a.b.c.d, as the IPv6 stack and copa_prefix store IPv4. */
static __always_inline void copa_v4_mapped(u8 *addr, const __be32 *v4)
{
	addr[10] = 0xff;
	addr[11] = 0xff;
	__builtin_memcpy(&addr[12], v4, 4);
}

/*
 * The flow: both addresses and ports, and the network namespace, named
 * by its inode number (what ls -iL /run/netns/NAME, lsns and
 * /proc/PID/ns/net show) rather than its cookie, which user space sees
 * only through a socket of that namespace. An inode number is reused
 * once its namespace is gone; a flow that then meets an old key resets
 * the entry (copa_flow_record), as one on a reused 4-tuple does.
 */
static __always_inline void copa_flow_key(struct sock *sk,
					  struct copa_flow_key *k)
{
	const struct sock_common *skc = &sk->__sk_common;

	__builtin_memset(k, 0, sizeof(*k));
	if (skc->skc_family == COPA_AF_INET) {
		copa_v4_mapped(k->saddr, &skc->skc_rcv_saddr);
		copa_v4_mapped(k->daddr, &skc->skc_daddr);
	} else {
		__builtin_memcpy(k->saddr, &skc->skc_v6_rcv_saddr, 16);
		__builtin_memcpy(k->daddr, &skc->skc_v6_daddr, 16);
	}
	k->netns = skc->skc_net.net->ns.inum;
	k->sport = skc->skc_num;
	k->dport = bpf_ntohs(skc->skc_dport);
}

static __noinline void copa_flow_record(struct sock *sk, const struct copa *ca,
					const struct copa_bpf_conf *c,
					u32 cwnd, u32 target)
{
	struct copa_flow_key k;
	struct copa_flow *f, init = {};

	copa_flow_key(sk, &k);
	f = bpf_map_lookup_elem(&copa_flows, &k);
	if (!f) {
		if (!c)
			return;
		init.delta = c->delta;
		init.competitive = c->competitive;
		init.loss_reaction = c->loss_reaction;
		init.source = c->source;
		bpf_map_update_elem(&copa_flows, &k, &init, BPF_ANY);
		f = bpf_map_lookup_elem(&copa_flows, &k);
		if (!f)
			return;
	} else if (c) {
		/* A new connection on a reused 4-tuple. */
		f->delta = c->delta;
		f->competitive = c->competitive;
		f->loss_reaction = c->loss_reaction;
		f->source = c->source;
		f->updates = 0;
	} else {
		f->updates++;
	}
	f->inv_delta = ca->inv_delta;
	f->mode = copa_mode(ca);
	f->velocity = ca->velocity;
	f->rtt_min_us = copa_win_min(&ca->rtt_min);
	f->rtt_standing_us = copa_win_min(&ca->rtt_standing);
	f->cwnd = cwnd;
	f->target = target;
	f->pacing = sk->sk_pacing_status;
	f->noise_us = ca->noise_us;
}

/* ---------------------------------------------------------------------
 * From the stack to the algorithm and back (tcp_copa.c's glue).
 */

/* tcp_is_cwnd_limited() */
static __always_inline bool copa_cwnd_limited(const struct tcp_sock *tp)
{
	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

static __always_inline void copa_ack_begin(struct sock *sk,
					   const struct rate_sample *rs,
					   struct copa_ack *ack)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	long rtt_us = rs->rtt_us;

	__builtin_memset(ack, 0, sizeof(*ack));
	ack->now_us = tp->tcp_mstamp;
	ack->srtt_us = tp->srtt_us >> 3;
	ack->cwnd = tp->snd_cwnd;
	ack->cwnd_clamp = tp->snd_cwnd_clamp;
	ack->mss = tp->mss_cache;
	ack->delivered = tp->delivered;
	ack->lost = tp->lost;
	ack->prior_delivered = rs->prior_delivered;
	ack->rs_delivered = rs->delivered;
	ack->acked_sacked = min_t(u32, rs->acked_sacked, S32_MAX);
	ack->losses = rs->losses;
	/* tcp_packets_in_flight() */
	ack->in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) +
			 tp->retrans_out;
	ack->rtt_us = rtt_us < 0 ? -1 : (s32)min_t(long, rtt_us, S32_MAX);
	ack->cwnd_limited = copa_cwnd_limited(tp);
	ack->app_limited = rs->is_app_limited;
}

static __always_inline void copa_set_pacing_rate(struct sock *sk, u64 rate)
{
	sk->sk_pacing_rate = min_t(u64, rate, sk->sk_max_pacing_rate);
}

static __always_inline u32 copa_phase_ssthresh(const struct copa *ca, u32 cwnd)
{
	return ca->slow_start ? COPA_TCP_INFINITE_SSTHRESH : cwnd;
}

/* Did a round start in a new flow-record epoch (a round began at @prev_us)? */
static __always_inline bool copa_flow_record_due(const struct copa *ca,
						 u32 prev_us)
{
	return ca->round_start &&
	       (ca->round_start_us ^ prev_us) >> COPA_FLOW_EPOCH_SHIFT;
}

/* Write the ACK's result back; the round before this ACK began at @prev_us. */
static __always_inline void copa_ack_end(struct sock *sk,
					 const struct copa_ack *ack,
					 u32 prev_us)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct copa *ca = inet_csk_ca(sk);

	tp->snd_cwnd = ack->cwnd;
	tp->snd_ssthresh = copa_phase_ssthresh(ca, ack->cwnd);
	copa_set_pacing_rate(sk, ack->pacing_rate);
	if (copa_defaults.flow_stats && copa_flow_record_due(ca, prev_us))
		copa_flow_record(sk, ca, NULL, ack->cwnd, ack->target);
}

/* Pace the current window as an ACK would, between ACKs. */
static __always_inline void copa_pace_window(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u64 rate = copa_window_pacing_rate(inet_csk_ca(sk), tp->snd_cwnd,
					   tp->mss_cache, tp->srtt_us >> 3);

	if (rate)
		copa_set_pacing_rate(sk, rate);
}

static __always_inline void copa_bpf_init(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct copa_bpf_conf c;

	copa_bpf_conf(sk, &c);
	copa_reset(inet_csk_ca(sk), c.delta, c.competitive, c.loss_reaction,
		   tp->snd_cwnd, tp->delivered);
	tp->snd_ssthresh = COPA_TCP_INFINITE_SSTHRESH;
	/*
	 * Ask the stack to pace unless something paces the socket already.
	 * sch_fq marks a socket SK_PACING_FQ from its enqueue, under the
	 * qdisc's lock and not the socket's, so holding the socket here
	 * orders nothing: a test then a store could overwrite fq's mark,
	 * and TCP would pace the flow a second time, under fq. As the
	 * module's cmpxchg() (and tcp_bbr's), a compare-and-exchange,
	 * which the verifier accepts on this BTF pointer (6.18 here; the
	 * kernel's tcp_ca_write_sk_pacing selftest does the same from 6.0).
	 */
	__sync_val_compare_and_swap(&sk->sk_pacing_status,
				    COPA_SK_PACING_NONE, COPA_SK_PACING_NEEDED);
	copa_pace_window(sk);
	__sync_fetch_and_add(&copa_flows_started, 1);
	if (copa_defaults.flow_stats)
		copa_flow_record(sk, inet_csk_ca(sk), &c, tp->snd_cwnd, 0);
}

static __always_inline void copa_bpf_set_state(struct sock *sk, u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (new_state != COPA_TCP_CA_LOSS)
		return;
	copa_restart(inet_csk_ca(sk), tp->snd_cwnd, tp->delivered);
	tp->snd_ssthresh = COPA_TCP_INFINITE_SSTHRESH;
}

/*
 * How long sending was idle, in us. The module reads tp->lsndtime, in
 * jiffies; converting those here needs CONFIG_HZ, a __kconfig extern that
 * libbpf resolves from /boot/config-$(uname -r) or /proc/config.gz when
 * the object loads, and refuses to load without (containers, hosts that
 * ship no config). RACK's mstamp is the send time of the newest packet
 * delivered; with nothing in flight, that is the last packet sent. 0
 * before anything was delivered.
 */
static __always_inline u64 copa_bpf_idle_us(const struct tcp_sock *tp)
{
	u64 last = tp->rack.mstamp;

	return last && tp->tcp_mstamp > last ? tp->tcp_mstamp - last : 0;
}

static __always_inline void copa_bpf_tx_start(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u64 idle_us = copa_bpf_idle_us(tp);

	tp->snd_cwnd = copa_on_tx_start(inet_csk_ca(sk), idle_us,
					tp->srtt_us >> 3, tp->snd_cwnd,
					tp->rate_delivered,
					tp->rate_interval_us);
	copa_pace_window(sk);
}

/*
 * The algorithm's per-ACK step, kept a subprogram: inlined into the
 * program (clang's choice once it has one caller), it made the verifier
 * walk past its limit of a million instructions; as a subprogram it
 * walks under 50,000 (6.18).
 */
static __noinline bool copa_bpf_on_ack(struct copa *ca, struct copa_ack *ack)
{
	return copa_on_ack(ca, ack);
}

/* One ACK: the shared algorithm between the stack's view and its result. */
static __always_inline void copa_bpf_cong_control(struct sock *sk,
						  const struct rate_sample *rs)
{
	struct copa *ca = inet_csk_ca(sk);
	u32 prev_us = ca->round_start_us;
	struct copa_ack ack;

	copa_ack_begin(sk, rs, &ack);
	if (copa_bpf_on_ack(ca, &ack))
		copa_ack_end(sk, &ack, prev_us);
}

/* Entering recovery, loss or CWR: keep what an undo restores. */
static __always_inline u32 copa_bpf_ssthresh(struct sock *sk)
{
	struct copa *ca = inet_csk_ca(sk);
	u32 cwnd = tcp_sk(sk)->snd_cwnd;

	copa_save_prior(ca, cwnd);
	return copa_phase_ssthresh(ca, cwnd);
}

/* Every ACK passes here, before cong_control if it gets there. */
static __always_inline void copa_bpf_in_ack_event(struct sock *sk, u32 flags)
{
	copa_on_ack_event(inet_csk_ca(sk), flags & COPA_CA_ACK_ECE);
}

/*
 * The reduction was spurious: restore what ssthresh kept. A window the
 * stack would reject (tcp_snd_cwnd_set() warns unless 0 < cwnd <= S32_MAX)
 * is counted and the current one kept instead.
 */
static __always_inline u32 copa_bpf_undo(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd = min(copa_undo(inet_csk_ca(sk), tp->snd_cwnd),
		       tp->snd_cwnd_clamp);

	if ((s32)cwnd <= 0) {
		__sync_fetch_and_add(&copa_undo_bad, 1);
		return tp->snd_cwnd;
	}
	return cwnd;
}

/* The state must fit icsk_ca_priv (13 u64 on every kernel, 6.0 to 7.2). */
_Static_assert(sizeof(struct copa) <= 13 * sizeof(u64), "struct copa too large");

/* ---------------------------------------------------------------------
 * bpf_copa
 */

#ifdef COPA_CONG_CONTROL_2ARGS
#define COPA_CONG_CONTROL_PROG(name)					\
	void BPF_PROG(name, struct sock *sk, const struct rate_sample *rs)
#else
#define COPA_CONG_CONTROL_PROG(name)					\
	void BPF_PROG(name, struct sock *sk, u32 ack_seq, int flag,	\
		      const struct rate_sample *rs)
#endif

SEC("struct_ops")
void BPF_PROG(copa_init, struct sock *sk)
{
	copa_bpf_init(sk);
}

SEC("struct_ops")
COPA_CONG_CONTROL_PROG(copa_cong_control)
{
	copa_bpf_cong_control(sk, rs);
}

SEC("struct_ops")
u32 BPF_PROG(copa_ssthresh, struct sock *sk)
{
	return copa_bpf_ssthresh(sk);
}

SEC("struct_ops")
u32 BPF_PROG(copa_undo_cwnd, struct sock *sk)
{
	return copa_bpf_undo(sk);
}

SEC("struct_ops")
void BPF_PROG(copa_set_state, struct sock *sk, u8 new_state)
{
	copa_bpf_set_state(sk, new_state);
}

SEC("struct_ops")
void BPF_PROG(copa_in_ack_event, struct sock *sk, u32 flags)
{
	copa_bpf_in_ack_event(sk, flags);
}

#ifdef COPA_TX_START_HOOK
SEC("struct_ops")
void BPF_PROG(copa_tx_start, struct sock *sk)
{
	copa_bpf_tx_start(sk);
}
#define COPA_TX_START_OPS(pfx)	.cwnd_event_tx_start = (void *)pfx##_tx_start
#else
SEC("struct_ops")
void BPF_PROG(copa_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == COPA_CA_EVENT_TX_START)
		copa_bpf_tx_start(sk);
}
#define COPA_TX_START_OPS(pfx)	.cwnd_event = (void *)pfx##_cwnd_event
#endif

SEC(".struct_ops")
struct tcp_congestion_ops bpf_copa = {
	.init		= (void *)copa_init,
	.cong_control	= (void *)copa_cong_control,
	.ssthresh	= (void *)copa_ssthresh,
	.undo_cwnd	= (void *)copa_undo_cwnd,
	.set_state	= (void *)copa_set_state,
	.in_ack_event	= (void *)copa_in_ack_event,
	COPA_TX_START_OPS(copa),
	.name		= "bpf_copa",
};

/* ---------------------------------------------------------------------
 * bpf_copa_pol: the same Copa with the detector's tunables
 * (tcp_copa_policer.c).
 * "bpf_copa_policer" would be 16 characters, one more than a congestion
 * control name may have (TCP_CA_NAME_MAX counts the NUL).
 * Its own programs, so that each struct_ops map has programs of its own.
 */

static __always_inline void copa_policer_bpf_init(struct sock *sk)
{
	struct copa_bpf_policer_conf pc, *c = &pc;
	bool bad = false;

	copa_bpf_init(sk);
	COPA_POLICER_TUNABLES(COPA_BPF_PICK)
	if (bad)
		__sync_fetch_and_add(&copa_bad_defaults, 1);
	copa_set_detector(inet_csk_ca(sk), c->detect, c->loss_thresh,
			  c->rate_tol, c->hold_rounds);
}

SEC("struct_ops")
void BPF_PROG(copa_policer_init, struct sock *sk)
{
	copa_policer_bpf_init(sk);
}

SEC("struct_ops")
COPA_CONG_CONTROL_PROG(copa_policer_cong_control)
{
	copa_bpf_cong_control(sk, rs);
}

SEC("struct_ops")
u32 BPF_PROG(copa_policer_ssthresh, struct sock *sk)
{
	return copa_bpf_ssthresh(sk);
}

SEC("struct_ops")
u32 BPF_PROG(copa_policer_undo_cwnd, struct sock *sk)
{
	return copa_bpf_undo(sk);
}

SEC("struct_ops")
void BPF_PROG(copa_policer_set_state, struct sock *sk, u8 new_state)
{
	copa_bpf_set_state(sk, new_state);
}

SEC("struct_ops")
void BPF_PROG(copa_policer_in_ack_event, struct sock *sk, u32 flags)
{
	copa_bpf_in_ack_event(sk, flags);
}

#ifdef COPA_TX_START_HOOK
SEC("struct_ops")
void BPF_PROG(copa_policer_tx_start, struct sock *sk)
{
	copa_bpf_tx_start(sk);
}
#else
SEC("struct_ops")
void BPF_PROG(copa_policer_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == COPA_CA_EVENT_TX_START)
		copa_bpf_tx_start(sk);
}
#endif

SEC(".struct_ops")
struct tcp_congestion_ops bpf_copa_pol = {
	.init		= (void *)copa_policer_init,
	.cong_control	= (void *)copa_policer_cong_control,
	.ssthresh	= (void *)copa_policer_ssthresh,
	.undo_cwnd	= (void *)copa_policer_undo_cwnd,
	.set_state	= (void *)copa_policer_set_state,
	.in_ack_event	= (void *)copa_policer_in_ack_event,
	COPA_TX_START_OPS(copa_policer),
	.name		= "bpf_copa_pol",
};
