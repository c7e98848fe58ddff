/* check.h - the fatal assertion of the unit tests whose next steps stand on each check (a ring,
 * a thread, a table), and their IPv4 address helper. expect.h's EXPECT is the soft one. */
#ifndef URNIC_TEST_CHECK_H
#define URNIC_TEST_CHECK_H

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints where and why (file:line: FAIL: ...) and exits 1. */
#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			const char *file_ = strrchr(__FILE__, '/');                                \
			fprintf(stderr, "%s:%d: FAIL: ", file_ ? file_ + 1 : __FILE__, __LINE__);  \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* The IPv4 address s (dotted quad), in network order. */
static inline uint32_t addr_of(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a.s_addr;
}

#endif
