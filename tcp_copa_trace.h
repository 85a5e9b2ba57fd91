/* SPDX-License-Identifier: GPL-2.0 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM copa

#if !defined(_TCP_COPA_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TCP_COPA_TRACE_H

#include <linux/ipv6.h>
#include <linux/sock_diag.h>
#include <linux/tracepoint.h>
#include <net/inet_sock.h>
#include <trace/events/net_probe_common.h>

#include "tcp_copa.h"

/*
 * One event per Copa window update; cwnd and target are in packets.
 *
 * The socket is identified as tcp:tcp_probe identifies it, so that events
 * join with ss output: saddr and daddr are a sockaddr_in or sockaddr_in6
 * with the port (TP_STORE_ADDR_PORTS, printed as ss prints them), and
 * sock_cookie is the socket cookie that inet_diag reports (ss -e prints it
 * as sk:HEX; tcp_probe prints the same hex).
 *
 * A socket has no cookie until something asks for one (inet_diag,
 * SO_COOKIE, a BPF program); atomic64_read(&sk->sk_cookie) reads 0 until
 * then. tcp_probe therefore generates it with sock_gen_cookie(), which
 * modules cannot call: its __sock_gen_cookie() is not exported on any
 * kernel from 5.10 to 7.2. sock_diag_save_cookie(), exported (GPL) on all
 * of them, generates it the same way, so the event never reads 0 and ss
 * later reports the very value the trace recorded: the cookie is fixed
 * once generated. This costs one cmpxchg per socket, and only while the
 * event is enabled; it is also why sk is not const here. It adds no
 * module dependency, and that is intended: sock_diag.o is built into
 * every kernel with networking (net/core, obj-y), not inet_diag's module,
 * so modinfo lists no "depends" and loading copa loads nothing else.
 */
TRACE_EVENT(copa_update,

	TP_PROTO(struct sock *sk, const struct copa *ca, u32 target,
		 u32 dq_us, u8 mode),

	TP_ARGS(sk, ca, target, dq_us, mode),

	TP_STRUCT__entry(
		/* sockaddr_in6 is always bigger than sockaddr_in */
		__array(__u8, saddr, sizeof(struct sockaddr_in6))
		__array(__u8, daddr, sizeof(struct sockaddr_in6))
		__field(__u64, sock_cookie)
		__field(__u16, sport)
		__field(__u16, dport)
		__field(__u32, cwnd)
		__field(__u32, target)
		__field(__u32, dq_us)
		__field(__u32, rtt_min_us)
		__field(__u32, rtt_standing_us)
		__field(__u32, delta_milli)
		__field(__u8, mode)
		__field(__u16, velocity)
		__field(__u8, noise_us)
	),

	TP_fast_assign(
		const struct inet_sock *inet = inet_sk(sk);
		__u32 cookie[2];

		memset(__entry->saddr, 0, sizeof(struct sockaddr_in6));
		memset(__entry->daddr, 0, sizeof(struct sockaddr_in6));
		TP_STORE_ADDR_PORTS(__entry, inet, sk);
		sock_diag_save_cookie(sk, cookie);
		__entry->sock_cookie = (__u64)cookie[1] << 32 | cookie[0];
		/* for filters: "sport == 20001" */
		__entry->sport = ntohs(inet->inet_sport);
		__entry->dport = ntohs(inet->inet_dport);
		__entry->cwnd = tcp_snd_cwnd(tcp_sk(sk));
		__entry->target = target;
		__entry->dq_us = dq_us;
		__entry->rtt_min_us = min_not_zero(ca->rtt_min.cur,
						   ca->rtt_min.prev);
		__entry->rtt_standing_us = min_not_zero(ca->rtt_standing.cur,
							ca->rtt_standing.prev);
		__entry->delta_milli = (1000U << COPA_SHIFT) / ca->inv_delta;
		__entry->mode = mode;
		__entry->velocity = ca->velocity;
		__entry->noise_us = ca->noise_us;
	),

	TP_printk("src=%pISpc dest=%pISpc sock_cookie=%llx cwnd=%u target=%u dq_us=%u rtt_min_us=%u rtt_standing_us=%u delta_milli=%u mode=%u velocity=%u noise_us=%u",
		  __entry->saddr, __entry->daddr, __entry->sock_cookie,
		  __entry->cwnd,
		  __entry->target, __entry->dq_us, __entry->rtt_min_us,
		  __entry->rtt_standing_us, __entry->delta_milli,
		  __entry->mode, __entry->velocity, __entry->noise_us)
);

#endif /* _TCP_COPA_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE tcp_copa_trace
#include <trace/define_trace.h>
