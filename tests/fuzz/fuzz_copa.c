// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target over tcp_copa_algo.h: the input drives the algorithm
 * the way tcp_copa.c does, with any values the stack could hand in and
 * many it could not, and every step is checked.
 *
 * Input: a 7-byte header of tunables, then events until the bytes run out
 * (a missing byte reads 0).
 *
 *   header  delta_milli (2 bytes, low first, 1 + n % 1000), flags (bit 0
 *           competitive, bit 1 the copa_policer variant, which calls
 *           copa_set_detector() after init, bit 2 its detect),
 *           loss_reaction (n % 101), then the detector's limit_loss
 *           (1 + n % 100), rate_tol (1 + n % 100), hold_rounds (1 + n % 255)
 *   event   one byte, n % EV_NR:
 *     EV_INIT      init: copa_reset() (and copa_set_detector()),
 *                  then the pacing of the window
 *     EV_ACK       cong_control with a rate sample: a 16-bit mask (low
 *                  byte first) of the fields that change (bits: the F_
 *                  enum), then one value selector per set bit (pick(),
 *                  pick_clock() for the clock); fields not named
 *                  keep their last value, except that the clock advances
 *                  by the last step, delivered and lost by the ACK's
 *                  acked_sacked and losses, and prior_delivered is the
 *                  delivered count before the ACK (every ACK may end a
 *                  round)
 *     EV_ACK_EVENT in_ack_event, one byte: bit 0 is CA_ACK_ECE
 *     EV_SSTHRESH  ssthresh: copa_save_prior()
 *     EV_UNDO      undo_cwnd: copa_undo(), then min() with the clamp
 *     EV_LOSS      set_state(TCP_CA_Loss): copa_restart()
 *     EV_TX_START  copa_on_tx_start() with an idle time and the last rate
 *                  sample, then the pacing of the window
 *     EV_PACE      the pacing of the current window, as copa_pace_window()
 *     EV_SOCKET    the stack changes cwnd, the clamp, mss or srtt between
 *                  ACKs: a mask byte and selectors as for EV_ACK
 *
 * The state starts zeroed, as icsk_ca_priv does, and any event may come
 * before EV_INIT: the stack calls ssthresh, undo_cwnd, set_state,
 * in_ack_event and cwnd_event before init in some paths, and
 * cong_control too on some kernels.
 *
 * Checks: the shim aborts on a zero divisor and a reversed clamp, the
 * sanitizers on undefined behaviour (see Makefile), and check_*() below
 * on every output and on the state after each event.
 */
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "../model/kernel_shim.h"
#include "tcp_copa_algo.h"

#define USEC_PER_SEC	1000000ULL

enum {
	EV_INIT,
	EV_ACK,
	EV_ACK_EVENT,
	EV_SSTHRESH,
	EV_UNDO,
	EV_LOSS,
	EV_TX_START,
	EV_PACE,
	EV_SOCKET,
	EV_NR,
};

/* What tcp_sock and the last rate sample hold between events. */
struct sock {
	u64	now_us;
	u64	step_us;
	u32	cwnd;
	u32	clamp;
	u32	mss;
	u32	srtt_us;
	u32	delivered;
	u32	lost;
	s32	rtt_us;
	s32	rs_delivered;
	s32	acked;
	s32	losses;
	u32	acc_cwnd;	/* largest cwnd since cwnd_acc was 0 */
	bool	app_limited;
	bool	cwnd_limited;
	/* the tunables of the header */
	u32	delta_milli;
	u32	loss_reaction;
	bool	competitive;
	bool	policer;
	bool	detect;
	u32	limit_loss;
	u32	rate_tol;
	u32	hold_rounds;
	/* checking */
	bool	inited;
	u32	rtt_lo;		/* usable RTT samples fed, 0: none yet */
	u32	rtt_hi;
	unsigned int	event;
};

struct input {
	const u8	*p;
	size_t		n;
};

static const char *event_names[EV_NR] = {
	"init", "ack", "ack_event", "ssthresh", "undo", "loss", "tx_start",
	"pace", "socket",
};

static bool trace;

void shim_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "fuzz_copa: assertion failed at %s:%d: %s\n", file,
		line, what);
	abort();
}

static void __attribute__((noreturn, format(printf, 2, 3)))
fail(const struct sock *sk, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_copa: event %u: ", sk->event);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static u8 get8(struct input *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static u32 get16(struct input *in)
{
	u32 v = get8(in);

	return v | (u32)get8(in) << 8;
}

static u32 get32(struct input *in)
{
	u32 v = get16(in);

	return v | get16(in) << 16;
}

/* Values at the edges of the types and of the algorithm's ranges. */
static const u32 special[32] = {
	0, 1, 2, 3, 10, 48, 100, 999, 1000, 1001, 1448, 40001, 65483,
	0xffff, 0x10000, 0x3fffff, 0x400000, 0x400001, 0x1000000, 0x3000000,
	0xfffffff, 0x10000000, 0x10000001, 0x40000000, 0x400003e9, 0x7fffffff,
	0x80000000, 0xfffffc18, 0xfffffffe, 0xffffffff, 200001, 1000000,
};

/*
 * A u32 (or, cast, an s32) from one selector byte: the low 3 bits choose,
 * the high 5 are a small operand k.
 */
static u32 pick(struct input *in, u32 cur)
{
	u8 s = get8(in);
	u32 k = s >> 3;

	switch (s & 7) {
	case 0:
		return special[k];
	case 1:
		return k;
	case 2:
		return get16(in);
	case 3:
		return get32(in);
	case 4:
		return cur + k + 1;
	case 5:
		return cur - k - 1;
	case 6:
		return cur + (get8(in) << (k % 24));
	default:
		return (u32)((u64)get8(in) << k);
	}
}

/* The clock: a new step, jumps, going back, the low 32 bits wrapping. */
static void pick_clock(struct input *in, struct sock *sk)
{
	u8 s = get8(in);
	u32 k = s >> 3;

	switch (s & 7) {
	case 0:
		sk->step_us = get16(in);
		break;
	case 1:
		sk->step_us = (u64)get8(in) << k;
		break;
	case 2:
		sk->now_us += get32(in);
		break;
	case 3:
		sk->now_us -= get16(in);
		break;
	case 4:
		sk->now_us += 1ULL << 32;
		break;
	case 5:
		sk->now_us = (sk->now_us | U32_MAX) - k;
		break;
	case 6:
		sk->now_us += (u64)get32(in) << 16;
		break;
	default:
		sk->now_us = (u64)get32(in) << 32 | get32(in);
		break;
	}
}

/* ---------------------------------------------------------------------
 * Checks.
 */

/* The window's bytes per RTT, times @pct / 100, as bytes/s, exactly. */
static unsigned __int128 window_rate(u32 cwnd, u32 mss, u32 rtt, u32 pct)
{
	return (unsigned __int128)cwnd * mss * USEC_PER_SEC * pct / 100 / rtt;
}

/*
 * Pacing of window @cwnd of @mss bytes: between 1x and 2x the window per
 * RTTstanding (srtt, or 1 ms, before a sample), as copa_pacing_rate()
 * documents, computed here in 128 bits. Rounded down, so 0 only where 1x
 * is below one byte per second. With the inputs bounded (copa_ack_in():
 * cwnd <= 2^22, mss < 2^16, RTT >= 1 us) the most it can be is 2 x 2^22
 * x 65535 bytes per us, 5.5 * 10^17 bytes/s, well inside a u64: a rate
 * outside the band is a wrapped or truncated product, not rounding.
 */
static void check_pacing(const struct sock *sk, const struct copa *ca,
			 u64 rate, u32 cwnd, u32 mss, u32 srtt_us)
{
	u32 rtt = copa_win_min(&ca->rtt_standing);
	unsigned __int128 lo, hi;

	if (!rtt)
		rtt = srtt_us ? srtt_us : COPA_USEC_PER_MSEC;
	lo = window_rate(cwnd, mss, rtt, 100);
	hi = window_rate(cwnd, mss, rtt, 200);
	if (lo > U64_MAX)
		lo = U64_MAX;
	if (rate < lo || rate > hi)
		fail(sk, "pacing %llu B/s outside [%llu, %llu]: cwnd %u mss %u rtt %u",
		     (unsigned long long)rate, (unsigned long long)lo,
		     (unsigned long long)(hi > U64_MAX ? U64_MAX : hi), cwnd,
		     mss, rtt);
}

/*
 * A window the algorithm hands back: within [MIN, MAX], never grown past
 * both the window handed in and the clamp.
 */
static void check_cwnd(const struct sock *sk, const char *what, u32 out,
		       u32 in, u32 clamp)
{
	u32 hi = max_t(u32, min(clamp, COPA_MAX_CWND), COPA_MIN_CWND);

	if (out < COPA_MIN_CWND || out > COPA_MAX_CWND ||
	    out > max(in, hi))
		fail(sk, "%s: cwnd %u (in %u, clamp %u)", what, out, in, clamp);
}

static void check_filter(const struct sock *sk, const char *name,
			 const struct copa_win *w)
{
	u32 v[2] = { w->cur, w->prev };
	int i;

	for (i = 0; i < 2; i++)
		if (v[i] && (!sk->rtt_lo || v[i] < sk->rtt_lo ||
			     v[i] > sk->rtt_hi))
			fail(sk, "%s %u outside the samples [%u, %u]", name,
			     v[i], sk->rtt_lo, sk->rtt_hi);
}

/* The state after every event. */
static void check_state(const struct sock *sk, const struct copa *ca)
{
	static const struct copa zero;
	s64 acc = ca->cwnd_acc;

	if (!sk->inited) {
		/* every entry point leaves a state before init alone */
		if (memcmp(ca, &zero, sizeof(zero)))
			fail(sk, "state before init changed");
		return;
	}
	if (ca->inv_delta0 < COPA_INV_DELTA_MIN ||
	    ca->inv_delta0 > COPA_INV_DELTA_MAX ||
	    ca->inv_delta < COPA_INV_DELTA_MIN ||
	    ca->inv_delta > COPA_INV_DELTA_MAX)
		fail(sk, "1/delta %u (configured %u)", ca->inv_delta,
		     ca->inv_delta0);
	if (ca->velocity < 1 || ca->velocity > COPA_MAX_VELOCITY)
		fail(sk, "velocity %u", ca->velocity);
	if ((acc < 0 ? -acc : acc) >= (s64)COPA_UNIT * COPA_MAX_CWND)
		fail(sk, "cwnd_acc %d", ca->cwnd_acc);
	if (ca->loss_thresh > 100 || ca->limit_loss < 1 ||
	    ca->limit_loss > 100 || ca->rate_tol < 1 || ca->rate_tol > 100 ||
	    ca->hold_rounds < 1)
		fail(sk, "tunables loss %u limit_loss %u rate_tol %u hold %u",
		     ca->loss_thresh, ca->limit_loss, ca->rate_tol,
		     ca->hold_rounds);
	if (ca->limit_rounds > copa_hold_len(ca) && ca->hold_rate)
		fail(sk, "hold of %u rounds, %u left", copa_hold_len(ca),
		     ca->limit_rounds);
	check_filter(sk, "rtt_min", &ca->rtt_min);
	check_filter(sk, "rtt_standing", &ca->rtt_standing);
	check_filter(sk, "rtt_max", &ca->rtt_max);
	/*
	 * rtt_max takes every RTTstanding as it changes, so it is at least
	 * the current one. The spread (rtt_max - RTTmin, in u32) is read only
	 * where dq > 0: then it cannot wrap. With dq = 0 it may (RTTmin's
	 * window, 10 s, shorter than rtt_max's, 4 srtt), and the readers
	 * decide on dq alone.
	 */
	if (copa_win_max(&ca->rtt_max) < copa_win_min(&ca->rtt_standing))
		fail(sk, "rtt_max %u below RTTstanding %u",
		     copa_win_max(&ca->rtt_max),
		     copa_win_min(&ca->rtt_standing));
	if (copa_dq_us(ca) > sk->rtt_hi ||
	    (copa_dq_us(ca) && copa_rtt_spread(ca) > sk->rtt_hi))
		fail(sk, "dq %u us, spread %u us, above the samples' %u",
		     copa_dq_us(ca), copa_rtt_spread(ca), sk->rtt_hi);
	if (ca->prior_cwnd < COPA_MIN_CWND || ca->prior_cwnd > COPA_MAX_CWND ||
	    ca->round_cwnd < COPA_MIN_CWND || ca->round_cwnd > COPA_MAX_CWND)
		fail(sk, "prior_cwnd %u, round_cwnd %u", ca->prior_cwnd,
		     ca->round_cwnd);
}

/* ---------------------------------------------------------------------
 * The glue (tcp_copa.c) and its checks.
 */

/* copa_pace_window(): the rate for the current window, or 0 for none. */
static void pace_window(struct sock *sk, const struct copa *ca)
{
	u64 rate = copa_window_pacing_rate(ca, sk->cwnd, sk->mss,
					   sk->srtt_us);
	struct copa_ack ack = {
		.cwnd		= sk->cwnd,
		.mss		= sk->mss,
		.srtt_us	= sk->srtt_us,
	};

	if (!sk->inited || ca->hold_rate) {
		if (rate)
			fail(sk, "pacing %llu B/s %s", (unsigned long long)rate,
			     ca->hold_rate ? "during a hold" : "before init");
		return;
	}
	copa_ack_in(&ack);
	check_pacing(sk, ca, rate, ack.cwnd, ack.mss, ack.srtt_us);
}

static void do_init(struct sock *sk, struct copa *ca)
{
	copa_reset(ca, sk->delta_milli, sk->competitive, sk->loss_reaction,
		   sk->cwnd, sk->delivered);
	if (sk->policer)
		copa_set_detector(ca, sk->detect, sk->limit_loss,
				  sk->rate_tol, sk->hold_rounds);
	sk->inited = true;
	pace_window(sk, ca);
}

/* The fields EV_ACK and EV_SOCKET may change, by mask bit. */
enum {
	F_CLOCK,
	F_CWND,
	F_CLAMP,
	F_MSS,
	F_SRTT,
	F_RTT,
	F_RS_DELIVERED,
	F_ACKED,
	F_LOSSES,
	F_DELIVERED,
	F_LOST,
	F_PRIOR,
	F_FLAGS,
};

static void pick_socket(struct input *in, struct sock *sk, u32 mask)
{
	if (mask & 1U << F_CWND)
		sk->cwnd = pick(in, sk->cwnd);
	if (mask & 1U << F_CLAMP)
		sk->clamp = pick(in, sk->clamp);
	if (mask & 1U << F_MSS)
		sk->mss = pick(in, sk->mss);
	if (mask & 1U << F_SRTT)
		sk->srtt_us = pick(in, sk->srtt_us);
}

static void do_ack(struct input *in, struct sock *sk, struct copa *ca)
{
	u32 mask = get16(in);
	u32 prior = sk->delivered;
	u32 cwnd_in, clamp;
	bool held;
	struct copa_ack ack;

	if (mask & 1U << F_CLOCK)
		pick_clock(in, sk);
	pick_socket(in, sk, mask);
	if (mask & 1U << F_RTT)
		sk->rtt_us = (s32)pick(in, (u32)sk->rtt_us);
	if (mask & 1U << F_RS_DELIVERED)
		sk->rs_delivered = (s32)pick(in, (u32)sk->rs_delivered);
	if (mask & 1U << F_ACKED)
		sk->acked = (s32)pick(in, (u32)sk->acked);
	if (mask & 1U << F_LOSSES)
		sk->losses = (s32)pick(in, (u32)sk->losses);
	if (mask & 1U << F_DELIVERED)
		sk->delivered = pick(in, sk->delivered);
	else
		sk->delivered += (u32)max(sk->acked, 0);
	if (mask & 1U << F_LOST)
		sk->lost = pick(in, sk->lost);
	else
		sk->lost += (u32)max(sk->losses, 0);
	if (mask & 1U << F_PRIOR)
		prior = pick(in, prior);
	if (mask & 1U << F_FLAGS) {
		u8 f = get8(in);

		sk->app_limited = f & 1;
		sk->cwnd_limited = f & 2;
	}
	sk->now_us += sk->step_us;

	ack = (struct copa_ack) {
		.now_us		= sk->now_us,
		.srtt_us	= sk->srtt_us,
		.cwnd		= sk->cwnd,
		.cwnd_clamp	= sk->clamp,
		.mss		= sk->mss,
		.delivered	= sk->delivered,
		.lost		= sk->lost,
		.prior_delivered = prior,
		.rs_delivered	= sk->rs_delivered,
		.acked_sacked	= sk->acked,
		.losses		= sk->losses,
		.rtt_us		= sk->rtt_us,
		.cwnd_limited	= sk->cwnd_limited,
		.app_limited	= sk->app_limited,
	};
	cwnd_in = ack.cwnd;
	clamp = ack.cwnd_clamp;
	held = ca->hold_rate;
	if (trace)
		fprintf(stderr,
			"  now %llu cwnd %u clamp %u mss %u srtt %u rtt %d rs %d acked %d losses %d delivered %u lost %u prior %u app %d cwnd_limited %d\n",
			(unsigned long long)ack.now_us, ack.cwnd, ack.cwnd_clamp,
			ack.mss, ack.srtt_us, ack.rtt_us, ack.rs_delivered,
			ack.acked_sacked, ack.losses, ack.delivered, ack.lost,
			ack.prior_delivered, ack.app_limited, ack.cwnd_limited);
	if (!copa_on_ack(ca, &ack))
		return;
	if (trace)
		fprintf(stderr,
			"  -> cwnd %u acc %d pacing %llu mode %d 1/delta %u v %u RTTmin %u RTTstanding %u rtt_max %u\n",
			ack.cwnd, ca->cwnd_acc,
			(unsigned long long)ack.pacing_rate,
			copa_mode(ca), ca->inv_delta, ca->velocity,
			copa_win_min(&ca->rtt_min),
			copa_win_min(&ca->rtt_standing),
			copa_win_max(&ca->rtt_max));
	if (!sk->inited)
		fail(sk, "an ACK processed before init");
	/* the samples the algorithm saw (after its own bounds) */
	if (copa_rtt_usable(ack.rtt_us)) {
		u32 rtt = (u32)ack.rtt_us;

		if (!sk->rtt_lo || rtt < sk->rtt_lo)
			sk->rtt_lo = rtt;
		sk->rtt_hi = max(sk->rtt_hi, rtt);
	}
	check_cwnd(sk, "ack", ack.cwnd, cwnd_in, clamp);
	/*
	 * Below one packet of the largest window it was computed for: the
	 * stack may shrink cwnd between ACKs and leave more pending, and a
	 * hold that ends sets a window (up to the clamp) that the same ACK
	 * then moves from.
	 */
	sk->acc_cwnd = max3(sk->acc_cwnd, ack.cwnd, cwnd_in);
	if (held && !ca->hold_rate)
		sk->acc_cwnd = max_t(u32, sk->acc_cwnd,
				     min(clamp, COPA_MAX_CWND));
	if (ca->cwnd_acc &&
	    (u64)(ca->cwnd_acc < 0 ? -(s64)ca->cwnd_acc : ca->cwnd_acc) >=
	    (u64)COPA_UNIT * sk->acc_cwnd)
		fail(sk, "cwnd_acc %d at cwnd %u (was %u)", ca->cwnd_acc,
		     ack.cwnd, cwnd_in);
	if (ca->hold_rate) {
		if (ack.pacing_rate != copa_held_rate(ca))
			fail(sk, "hold: pacing %llu B/s, held %llu",
			     (unsigned long long)ack.pacing_rate,
			     (unsigned long long)copa_held_rate(ca));
	} else {
		check_pacing(sk, ca, ack.pacing_rate, ack.cwnd, ack.mss,
			     ack.srtt_us);
	}
	/* what copa_ack_end() reads for the tracepoint */
	if (copa_mode(ca) < COPA_MODE_SLOW_START ||
	    copa_mode(ca) > COPA_MODE_POLICED)
		fail(sk, "mode %d", copa_mode(ca));
	sk->cwnd = ack.cwnd;
}

static void do_tx_start(struct input *in, struct sock *sk, struct copa *ca)
{
	u8 s = get8(in);
	u32 rate_delivered, rate_interval, cwnd;
	u64 idle;

	switch (s & 3) {
	case 0:
		idle = (u64)sk->srtt_us + COPA_IDLE_MIN_US + (s >> 2) - 32;
		break;
	case 1:
		idle = (u64)get32(in) * COPA_USEC_PER_MSEC; /* jiffies in ms */
		break;
	case 2:
		idle = (u64)get32(in) << (s >> 2) % 33;
		break;
	default:
		idle = U64_MAX - (s >> 2);
		break;
	}
	rate_delivered = pick(in, 0);
	rate_interval = pick(in, 0);
	cwnd = copa_on_tx_start(ca, idle, sk->srtt_us, sk->cwnd,
				rate_delivered, rate_interval);
	if (sk->inited)
		check_cwnd(sk, "tx_start", cwnd, sk->cwnd, U32_MAX);
	if (sk->inited && cwnd > max_t(u32, sk->cwnd, COPA_MIN_CWND))
		fail(sk, "tx_start grew cwnd %u to %u", sk->cwnd, cwnd);
	sk->cwnd = cwnd;
	pace_window(sk, ca);
}

static void do_event(struct input *in, struct sock *sk, struct copa *ca)
{
	u8 op = get8(in) % EV_NR;
	u32 cwnd;

	if (trace)
		fprintf(stderr, "event %u: %s (cwnd %u mss %u srtt %u)\n",
			sk->event, event_names[op], sk->cwnd, sk->mss,
			sk->srtt_us);
	switch (op) {
	case EV_INIT:
		do_init(sk, ca);
		break;
	case EV_ACK:
		do_ack(in, sk, ca);
		break;
	case EV_ACK_EVENT:
		copa_on_ack_event(ca, get8(in) & 1);
		break;
	case EV_SSTHRESH:
		copa_save_prior(ca, sk->cwnd);
		break;
	case EV_UNDO:
		cwnd = copa_undo(ca, sk->cwnd);
		if (sk->inited)
			check_cwnd(sk, "undo", cwnd, max(sk->cwnd, ca->prior_cwnd),
				   U32_MAX);
		sk->cwnd = min(cwnd, sk->clamp);
		break;
	case EV_LOSS:
		copa_restart(ca, sk->cwnd, sk->delivered);
		break;
	case EV_TX_START:
		do_tx_start(in, sk, ca);
		break;
	case EV_PACE:
		pace_window(sk, ca);
		break;
	default:
		pick_socket(in, sk, get8(in) << F_CWND);
		break;
	}
	if (!ca->cwnd_acc)
		sk->acc_cwnd = 0;
	check_state(sk, ca);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	trace = getenv("FUZZ_TRACE");
	return 0;
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct input in = { data, size };
	struct copa ca = {};
	struct sock sk = {
		.now_us		= USEC_PER_SEC,
		.step_us	= 1000,
		.cwnd		= COPA_INIT_CWND,
		.clamp		= U32_MAX,
		.mss		= 1448,
		.rtt_us		= -1,
		.rs_delivered	= 1,
		.acked		= 1,
		.cwnd_limited	= true,
	};
	u32 flags;

	sk.delta_milli = 1 + get16(&in) % 1000;
	flags = get8(&in);
	sk.competitive = flags & 1;
	sk.policer = flags & 2;
	sk.detect = flags & 4;
	sk.loss_reaction = get8(&in) % 101;
	sk.limit_loss = 1 + get8(&in) % 100;
	sk.rate_tol = 1 + get8(&in) % 100;
	sk.hold_rounds = 1 + get8(&in) % 255;
	if (trace)
		fprintf(stderr,
			"delta %u/1000 competitive %d loss_reaction %u policer %d detect %d limit_loss %u rate_tol %u hold_rounds %u\n",
			sk.delta_milli, sk.competitive, sk.loss_reaction,
			sk.policer, sk.detect, sk.limit_loss, sk.rate_tol,
			sk.hold_rounds);
	for (sk.event = 0; in.n; sk.event++)
		do_event(&in, &sk, &ca);
	return 0;
}
