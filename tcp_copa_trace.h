/* SPDX-License-Identifier: GPL-2.0 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM copa

#if !defined(_TCP_COPA_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TCP_COPA_TRACE_H

#include <linux/tracepoint.h>
#include <net/inet_sock.h>

#include "tcp_copa.h"

/* One event per Copa window update; cwnd and target are in packets. */
TRACE_EVENT(copa_update,

	TP_PROTO(const struct sock *sk, const struct copa *ca, u32 target,
		 u32 dq_us, u8 mode),

	TP_ARGS(sk, ca, target, dq_us, mode),

	TP_STRUCT__entry(
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
	),

	TP_fast_assign(
		__entry->sport = ntohs(inet_sk(sk)->inet_sport);
		__entry->dport = ntohs(inet_sk(sk)->inet_dport);
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
	),

	TP_printk("sport=%u dport=%u cwnd=%u target=%u dq_us=%u rtt_min_us=%u rtt_standing_us=%u delta_milli=%u mode=%u velocity=%u",
		  __entry->sport, __entry->dport, __entry->cwnd,
		  __entry->target, __entry->dq_us, __entry->rtt_min_us,
		  __entry->rtt_standing_us, __entry->delta_milli,
		  __entry->mode, __entry->velocity)
);

#endif /* _TCP_COPA_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE tcp_copa_trace
#include <trace/define_trace.h>
