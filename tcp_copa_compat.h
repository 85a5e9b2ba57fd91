/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every kernel-version difference the Copa modules meet, in one place.
 * The algorithm code never tests LINUX_VERSION_CODE itself.
 *
 * Differences that need no code here:
 *  - minmax_running_min export (6.12): Copa has its own windowed filter.
 */
#ifndef _TCP_COPA_COMPAT_H
#define _TCP_COPA_COMPAT_H

#include <linux/version.h>
#include <linux/export.h>
#include <linux/module.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>
#include <net/tcp.h>

/*
 * The algorithm's u32/u64 arithmetic assumes a 64-bit long (for instance
 * rs->rtt_us is a long that must hold any u32). 32-bit kernels are not
 * supported: refuse them here rather than build a module that misbehaves.
 */
#if BITS_PER_LONG != 64
#error "tcp_copa supports 64-bit kernels only"
#endif

/*
 * tcp_snd_cwnd() and tcp_snd_cwnd_set() arrived in 5.19. Macros, not
 * functions, so that a stable kernel which backported them still builds.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 19, 0)
#define tcp_snd_cwnd(tp)		((tp)->snd_cwnd)
#define tcp_snd_cwnd_set(tp, val)	((tp)->snd_cwnd = (val))
#endif

/* cong_control gained the ack and flag arguments in 6.10. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define COPA_CONG_CONTROL_ARGS \
	struct sock *sk, u32 ack, int flag, const struct rate_sample *rs
#else
#define COPA_CONG_CONTROL_ARGS struct sock *sk, const struct rate_sample *rs
#endif

/*
 * Sending after an idle period (nothing in flight) is CA_EVENT_TX_START
 * through cwnd_event up to 7.0, and has its own hook, cwnd_event_tx_start,
 * from 7.1. Both lead to tcp_copa_tx_start().
 */
void tcp_copa_tx_start(struct sock *sk);

#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 1, 0)
#define COPA_TX_START_OP	.cwnd_event_tx_start = tcp_copa_tx_start
#else
static inline void copa_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == CA_EVENT_TX_START)
		tcp_copa_tx_start(sk);
}

#define COPA_TX_START_OP	.cwnd_event = copa_cwnd_event
#endif

/* proc_handler takes a const table from 6.11. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
#define COPA_CTL_TABLE const struct ctl_table
#else
#define COPA_CTL_TABLE struct ctl_table
#endif

/*
 * Register a table of @n entries followed by a zeroed terminator. From
 * 6.6 the size is passed and must not count the terminator.
 */
static inline struct ctl_table_header *
copa_register_net_sysctl(struct net *net, const char *path,
			 struct ctl_table *table, size_t n)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 6, 0)
	return register_net_sysctl_sz(net, path, table, n);
#else
	return register_net_sysctl(net, path, table);
#endif
}

/*
 * tcp_copa.ko exports what tcp_copa_policer.ko uses, each name prefixed
 * tcp_copa_ (symbols are looked up by name whatever their namespace, so
 * the prefix is what keeps them from clashing with another module's), in
 * the symbol namespace TCP_COPA, so that only a module that imports it
 * links against them. The namespace argument of
 * EXPORT_SYMBOL_NS_GPL() and MODULE_IMPORT_NS() is a bare identifier,
 * stringified by the macros, up to 6.12 and a string literal from 6.13
 * (commit cdd30ebb1b9f, "module: Convert symbol namespace to string
 * literal"). The name starts with EXPORT_SYMBOL for checkpatch, which
 * knows exports by that prefix.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
#define EXPORT_SYMBOL_COPA(sym)	EXPORT_SYMBOL_NS_GPL(sym, "TCP_COPA")
#define COPA_IMPORT_NS()	MODULE_IMPORT_NS("TCP_COPA")
#else
#define EXPORT_SYMBOL_COPA(sym)	EXPORT_SYMBOL_NS_GPL(sym, TCP_COPA)
#define COPA_IMPORT_NS()	MODULE_IMPORT_NS(TCP_COPA)
#endif

#endif /* _TCP_COPA_COMPAT_H */
