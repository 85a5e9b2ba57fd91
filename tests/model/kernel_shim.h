/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel types and helpers tcp_copa_algo.h uses, for the
 * user-space model test. They follow the kernel's definitions
 * (include/linux/minmax.h, include/linux/math64.h), with assertions where
 * the kernel would misbehave silently or crash:
 *
 * - min()/max()/max3() are the typed statement expressions of minmax.h;
 *   comparing two different types is a compile-time error here (the
 *   kernel's older strict check), so the model also catches a mixed
 *   comparison that a newer kernel would accept;
 * - min_t()/max_t()/clamp_t() cast to the named type first, as the
 *   kernel does; clamp_t() asserts lo <= hi (the kernel checks that only
 *   for constants, and a reversed range gives a meaningless result);
 * - div_u64() takes a u32 divisor (a wider one is truncated, exactly as
 *   in the kernel), div64_u64() a u64 one; both abort on a zero divisor
 *   instead of faulting.
 *
 * Everything signed is checked by the compiler's UBSan
 * (-fsanitize=undefined -fno-sanitize-recover=all, see Makefile).
 */
#ifndef _COPA_KERNEL_SHIM_H
#define _COPA_KERNEL_SHIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;

#define U32_MAX		((u32)~0U)
#define U64_MAX		((u64)~0ULL)
#define S32_MAX		((s32)(U32_MAX >> 1))

void shim_fail(const char *file, int line, const char *what)
	__attribute__((noreturn));

#define SHIM_ASSERT(cond)						\
	do {								\
		if (!(cond))						\
			shim_fail(__FILE__, __LINE__, #cond);		\
	} while (0)

/* Distinct pointer types make this a warning, and -Werror an error. */
#define __shim_typecheck(a, b)	((void)(&(a) == &(b)))

#define min(x, y) ({					\
	__typeof__(x) _min1 = (x);			\
	__typeof__(y) _min2 = (y);			\
	__shim_typecheck(_min1, _min2);			\
	_min1 < _min2 ? _min1 : _min2; })

#define max(x, y) ({					\
	__typeof__(x) _max1 = (x);			\
	__typeof__(y) _max2 = (y);			\
	__shim_typecheck(_max1, _max2);			\
	_max1 > _max2 ? _max1 : _max2; })

#define max3(x, y, z)	max((__typeof__(x))max(x, y), z)

/* Set bits in the low byte, as <linux/bitops.h>. */
static inline unsigned int hweight8(unsigned int w)
{
	return __builtin_popcount(w & 0xff);
}

#define min_t(type, x, y) ({				\
	type _mint1 = (x);				\
	type _mint2 = (y);				\
	_mint1 < _mint2 ? _mint1 : _mint2; })

#define max_t(type, x, y) ({				\
	type _maxt1 = (x);				\
	type _maxt2 = (y);				\
	_maxt1 > _maxt2 ? _maxt1 : _maxt2; })

#define clamp_t(type, val, lo, hi) ({			\
	type _cl_v = (val);				\
	type _cl_lo = (lo);				\
	type _cl_hi = (hi);				\
	SHIM_ASSERT(_cl_lo <= _cl_hi);			\
	min_t(type, max_t(type, _cl_v, _cl_lo), _cl_hi); })

static inline u64 div_u64(u64 dividend, u32 divisor)
{
	SHIM_ASSERT(divisor != 0);
	return dividend / divisor;
}

static inline u64 div64_u64(u64 dividend, u64 divisor)
{
	SHIM_ASSERT(divisor != 0);
	return dividend / divisor;
}

#endif /* _COPA_KERNEL_SHIM_H */
