/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Copa's tunables and modes, each written here once. The modules
 * (tcp_copa.c, tcp_copa_policer.c), the algorithm (tcp_copa_algo.h), the
 * BPF build (bpf/copa_bpf.h) and the Python tools (copa_tools.params, for
 * copa-eval's variants, copa-bpf and copa-diag) all read this file.
 *
 * The tools parse it strictly: a table is "#define NAME(X)" followed by
 * X(...) entries and nothing else, each entry's arguments of the kinds
 * below, an entry on one line or continued on the next. Anything else in
 * a table is an error, not something skipped.
 */
#ifndef _TCP_COPA_PARAMS_H
#define _TCP_COPA_PARAMS_H

/*
 * Tunables: X(ID, name, min, max, milli, default, description).
 *
 * Each value is an unsigned int from min to max. A milli value is written
 * and shown as a decimal with up to three places and kept in thousandths
 * (0.04 is 40); min, max and default are in thousandths. The default is
 * a number or a constant of tcp_copa_algo.h or tcp_copa_limit.h. The
 * description is the module parameter's.
 *
 * COPA_TUNABLES are tcp_copa.ko's, per-namespace sysctls under
 * net.ipv4.tcp_copa, whose defaults are the module parameters of the same
 * names; the BPF build has them as defaults and per-socket overrides.
 * COPA_POLICER_TUNABLES are tcp_copa_policer.ko's, under
 * net.ipv4.tcp_copa_policer, and bpf_copa_pol's defaults.
 * COPA_BPF_TUNABLES are the BPF build's own defaults.
 */
#define COPA_TUNABLES(X)						\
	X(DELTA, delta, 1, 1000, true, 500,				\
	  "default delta for new namespaces, (0, 1], e.g. 0.5")		\
	X(COMPETITIVE, competitive, 0, 1, false, 1,			\
	  "default competitive mode (0 off, 1 on)")			\
	X(LOSS_REACTION, loss_reaction, 0, 100, false, 5,		\
	  "default loss-rate threshold in percent for cutting cwnd (0 ignores loss)")

#define COPA_POLICER_TUNABLES(X)					\
	X(DETECT, detect, 0, 1, false, 1,				\
	  "default policer detection (0 off, 1 on)")			\
	X(LOSS_THRESH, loss_thresh, 1, 100, false, COPA_LIMIT_LOSS_PCT,	\
	  "default percent of a round's packets lost for it to count, 1-100") \
	X(RATE_TOL, rate_tol, 1, 100, false, COPA_RATE_TOL_PCT,		\
	  "default percent two limited rounds' rates may differ, 1-100") \
	X(HOLD_ROUNDS, hold_rounds, 1, 255, false, COPA_HOLD_ROUNDS,	\
	  "default rounds to hold a detected limit, 1-255")

#define COPA_BPF_TUNABLES(X)						\
	X(FLOW_STATS, flow_stats, 0, 1, false, 1,			\
	  "keep each flow's state in copa_flows (0 off, 1 on)")

/* The index of each tunable in its module's table. */
#define COPA_T_ENUM(id, ...)		COPA_T_##id,
#define POLICER_T_ENUM(id, ...)		POLICER_T_##id,

enum copa_tunable_id {
	COPA_TUNABLES(COPA_T_ENUM)
	COPA_T_NR,
};

enum copa_policer_tunable_id {
	COPA_POLICER_TUNABLES(POLICER_T_ENUM)
	POLICER_T_NR,
};

/*
 * Operating modes: X(ID, number, name). The number is what the
 * tracepoint's mode= and inet_diag's tcpv_enabled report, the name what
 * the tools show.
 */
#define COPA_MODES(X)							\
	X(SLOW_START, 1, slow_start)					\
	X(DEFAULT, 2, default)						\
	X(COMPETITIVE, 3, competitive)					\
	X(POLICED, 4, policed)

#define COPA_MODE_ENUM(id, number, name)	COPA_MODE_##id = (number),

#endif /* _TCP_COPA_PARAMS_H */
