// SPDX-License-Identifier: GPL-2.0
/*
 * Example per-prefix policy for the BPF build of Copa: a sock_ops program
 * that, when a connection is established (actively or passively), looks
 * the peer's address up in the LPM trie copa_prefix and
 *
 *  - stores the prefix's Copa parameters in the connection's socket
 *    storage (copa_sk_params), where bpf_copa reads them as the
 *    connection's congestion control starts, and
 *  - switches the connection's congestion control to the prefix's one,
 *    if it names one, with bpf_setsockopt(TCP_CONGESTION).
 *
 * Both run before the stack initialises the congestion control (see
 * tcp_init_transfer()), so the connection starts with its prefix's
 * parameters. copa_sk_params is shared with tcp_copa.bpf.o through its
 * pin in /sys/fs/bpf. A policy whose parameters are out of range is not
 * stored, and is counted; bpf_copa checks again whatever it finds.
 *
 * While copa-fleet ab runs an experiment (copa_ab), a connection to a
 * peer in its scope takes its arm's policy instead, and its arm's label
 * is kept under its cookie in copa_ab_arms for the collector.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "copa_bpf.h"

char _license[] SEC("license") = "GPL";

#define COPA_SOL_TCP		6
#define COPA_TCP_CONGESTION	13
#define COPA_AF_INET		2
#define COPA_AF_INET6		10

u64 copa_prefix_hits;		/* connections that matched a prefix */
u64 copa_prefix_bad;		/* ... whose parameters were out of range */
u64 copa_cc_set;		/* congestion controls switched */
u64 copa_cc_failed;		/* bpf_setsockopt(TCP_CONGESTION) failures */
u64 copa_ab_assigned;		/* connections given an A/B arm */

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct copa_prefix_key);
	__type(value, struct copa_prefix_policy);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} copa_prefix SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct copa_ab_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} copa_ab SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct copa_prefix_key);
	__type(value, u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} copa_ab_scope SEC(".maps");

/* Socket cookie -> arm label; the collector reads a socket's entry once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, char[COPA_AB_LABEL_LEN]);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} copa_ab_arms SEC(".maps");

static __always_inline bool copa_peer_key(const struct bpf_sock_ops *skops,
					  struct copa_prefix_key *key)
{
	u32 a;

	key->prefixlen = 128;
	if (skops->family == COPA_AF_INET) {
		a = skops->remote_ip4;
		key->addr[10] = 0xff;
		key->addr[11] = 0xff;
		__builtin_memcpy(&key->addr[12], &a, 4);
		return true;
	}
	if (skops->family != COPA_AF_INET6)
		return false;
	a = skops->remote_ip6[0];
	__builtin_memcpy(&key->addr[0], &a, 4);
	a = skops->remote_ip6[1];
	__builtin_memcpy(&key->addr[4], &a, 4);
	a = skops->remote_ip6[2];
	__builtin_memcpy(&key->addr[8], &a, 4);
	a = skops->remote_ip6[3];
	__builtin_memcpy(&key->addr[12], &a, 4);
	return true;
}

/* @key with the bits past the first @plen cleared. */
static __always_inline void copa_mask(struct copa_prefix_key *key, u32 plen)
{
	int i, bits;

#pragma unroll
	for (i = 0; i < 16; i++) {
		bits = (int)plen - 8 * i;
		if (bits <= 0)
			key->addr[i] = 0;
		else if (bits < 8)
			key->addr[i] &= (u8)(0xff << (8 - bits));
	}
}

/* The arm of the connection under experiment @ab (copa_ab_hash()). */
static __always_inline u32 copa_ab_arm(struct bpf_sock_ops *skops,
				       const struct copa_ab_config *ab,
				       const struct copa_prefix_key *peer,
				       u64 cookie)
{
	struct copa_prefix_key k = *peer;
	u64 w0, w1, period = 0;

	if (ab->period_ns)
		period = (bpf_ktime_get_boot_ns() - ab->start_ns) /
			 ab->period_ns;
	if (ab->unit == COPA_AB_CONNECTION)
		return copa_ab_hash(ab, cookie, 0, period);
	if (ab->unit == COPA_AB_PREFIX)
		copa_mask(&k, skops->family == COPA_AF_INET ?
			  96 + ab->prefix_v4 : ab->prefix_v6);
	__builtin_memcpy(&w0, &k.addr[0], 8);
	__builtin_memcpy(&w1, &k.addr[8], 8);
	return copa_ab_hash(ab, w0, w1, period);
}

/*
 * The policy of the connection to @key: its A/B arm's if an experiment
 * runs and the peer is in its scope (the arm's label is recorded), else
 * its prefix's, else NULL.
 */
static __always_inline const struct copa_prefix_policy *
copa_policy(struct bpf_sock_ops *skops, const struct copa_prefix_key *key)
{
	const struct copa_prefix_policy *pol;
	const struct copa_ab_config *ab;
	u32 zero = 0, arm;
	u64 cookie;

	ab = bpf_map_lookup_elem(&copa_ab, &zero);
	if (!ab || !bpf_map_lookup_elem(&copa_ab_scope, key)) {
		pol = bpf_map_lookup_elem(&copa_prefix, key);
		if (pol)
			__sync_fetch_and_add(&copa_prefix_hits, 1);
		return pol;
	}
	cookie = bpf_get_socket_cookie(skops);
	arm = copa_ab_arm(skops, ab, key, cookie);
	__sync_fetch_and_add(&copa_ab_assigned, 1);
	if (arm) {
		bpf_map_update_elem(&copa_ab_arms, &cookie, ab->label[1], BPF_ANY);
		return &ab->policy[1];
	}
	bpf_map_update_elem(&copa_ab_arms, &cookie, ab->label[0], BPF_ANY);
	return &ab->policy[0];
}

SEC("sockops")
int copa_sockops(struct bpf_sock_ops *skops)
{
	struct copa_prefix_key key = {};
	const struct copa_prefix_policy *pol;
	struct copa_sk_params *p;
	struct bpf_sock *sk;
	char cc[COPA_CC_NAME_LEN];

	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB &&
	    skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	if (!copa_peer_key(skops, &key))
		return 1;
	pol = copa_policy(skops, &key);
	if (!pol)
		return 1;

	sk = skops->sk;
	if (pol->params.set && sk) {
		if (!copa_sk_params_valid(&pol->params)) {
			__sync_fetch_and_add(&copa_prefix_bad, 1);
		} else {
			p = bpf_sk_storage_get(&copa_sk_params, sk, NULL,
					       BPF_SK_STORAGE_GET_F_CREATE);
			if (p)
				*p = pol->params;
		}
	}
	if (pol->cc[0]) {
		__builtin_memcpy(cc, pol->cc, sizeof(cc));
		cc[sizeof(cc) - 1] = 0;
		if (bpf_setsockopt(skops, COPA_SOL_TCP, COPA_TCP_CONGESTION,
				   cc, sizeof(cc)))
			__sync_fetch_and_add(&copa_cc_failed, 1);
		else
			__sync_fetch_and_add(&copa_cc_set, 1);
	}
	return 1;
}
