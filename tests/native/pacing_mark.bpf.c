// SPDX-License-Identifier: GPL-2.0
/*
 * A congestion control for tests/native only, cpb_fq_mark: its init marks
 * the socket SK_PACING_FQ, as sch_fq's enqueue does (the host kernel has
 * no sch_fq), so that a socket switched from it to bpf_copa shows what
 * bpf_copa's init does to a socket fq already paces. It keeps the window
 * it is given.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define SK_PACING_FQ_MARK	2	/* SK_PACING_FQ */

SEC("struct_ops")
void BPF_PROG(mark_init, struct sock *sk)
{
	sk->sk_pacing_status = SK_PACING_FQ_MARK;
}

SEC("struct_ops")
u32 BPF_PROG(mark_ssthresh, struct sock *sk)
{
	u32 cwnd = ((struct tcp_sock *)sk)->snd_cwnd;

	return cwnd > 4 ? cwnd / 2 : 2;
}

SEC("struct_ops")
u32 BPF_PROG(mark_undo_cwnd, struct sock *sk)
{
	return ((struct tcp_sock *)sk)->snd_cwnd;
}

SEC("struct_ops")
void BPF_PROG(mark_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
}

SEC(".struct_ops")
struct tcp_congestion_ops cpb_fq_mark = {
	.init		= (void *)mark_init,
	.ssthresh	= (void *)mark_ssthresh,
	.undo_cwnd	= (void *)mark_undo_cwnd,
	.cong_avoid	= (void *)mark_cong_avoid,
	.name		= "cpb_fq_mark",
};
