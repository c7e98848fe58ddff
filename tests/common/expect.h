/* expect.h - the unit tests' soft assertion: prints where and why, counts, and goes on, so one
 * run reports every difference. main returns test_failures ? 1 : 0. */
#ifndef URNIC_TEST_EXPECT_H
#define URNIC_TEST_EXPECT_H

#include <stdio.h>

static int test_failures;

#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
			test_failures++;                                                           \
		}                                                                                  \
	} while (0)

#endif
