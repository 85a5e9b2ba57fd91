/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What tcp_copa_algo.h expects from its includer, for the BPF build:
 * vmlinux.h already gives u8 ... u64, s32, s64 and bool; this adds the
 * kernel's minmax, math64 and limits helpers the algorithm uses. Each
 * macro evaluates its arguments once, like the kernel's; the kernel's
 * compile-time type checks are not repeated (the module build does them).
 */
#ifndef _COPA_BPF_SHIM_H
#define _COPA_BPF_SHIM_H

#define U32_MAX		((u32)~0U)
#define U64_MAX		((u64)~0ULL)
#define S32_MAX		((s32)(U32_MAX >> 1))

#define __copa_cmp(a, b, op) ({				\
	__typeof__(a) __a = (a);			\
	__typeof__(b) __b = (b);			\
	__a op __b ? __a : __b; })

#define min(a, b)		__copa_cmp(a, b, <)
#define max(a, b)		__copa_cmp(a, b, >)
#define min_t(t, a, b)		__copa_cmp((t)(a), (t)(b), <)
#define max_t(t, a, b)		__copa_cmp((t)(a), (t)(b), >)
#define max3(a, b, c)		max(max(a, b), c)
#define clamp_t(t, v, lo, hi)	min_t(t, max_t(t, v, lo), hi)

/* Set bits in the low byte, as <linux/bitops.h>. */
static __always_inline unsigned int hweight8(unsigned int w)
{
	return __builtin_popcount(w & 0xff);
}

/* BPF divides 64 by 64 bits natively; a zero divisor yields 0. */
static __always_inline u64 div_u64(u64 dividend, u32 divisor)
{
	return dividend / divisor;
}

static __always_inline u64 div64_u64(u64 dividend, u64 divisor)
{
	return dividend / divisor;
}

#endif /* _COPA_BPF_SHIM_H */
