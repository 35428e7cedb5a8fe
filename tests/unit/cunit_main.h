/*
 * cunit_main.h: the one main() of every CUnit suite (tests/unit, the
 * command's tests/tool/test_libs.c, the emulated device's check suites).
 * A suite is a table: its name, optional init and clean, its tests as
 * {sentence, function} rows ended by CU_TEST_INFO_NULL, and optionally an
 * alarm and work to do around the run. cunit_suite_main() registers it,
 * runs it through CU_basic in verbose mode (scripts/test.sh reads the
 * "tests" row of CU_basic's summary) and returns the exit status:
 *
 *   0  every test was registered, ran and passed;
 *   1  a test failed, or the suite's init or clean failed (CU_basic says
 *      which; a suite whose init fails runs no test but still fails);
 *   2  the suite or a test could not be registered (a test without a
 *      function, a sentence said twice, no tests at all): said on stderr;
 *      no test runs and no summary is printed, which scripts/test.sh
 *      counts as a failure too.
 *
 * Included by one .c per program: the function is static inline.
 */
#ifndef VRAMPOOL_TESTS_CUNIT_MAIN_H
#define VRAMPOOL_TESTS_CUNIT_MAIN_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * What a suite's main() would otherwise spell out. Only name and tests are
 * required. alarm_seconds guards a suite against deadlocks: when it is not
 * 0, SIGALRM ends the whole program after that long (a failure, with no
 * summary). before runs first, ahead of the registry (to register CUDA
 * module variables as nvcc's constructors do, or to start a module the
 * tests share); after runs last, whether or not the tests could run, to
 * stop what before started.
 */
struct cunit_suite {
	const char *name;
	CU_InitializeFunc init;		/* NULL: none; nonzero fails the suite */
	CU_CleanupFunc clean;		/* NULL: none; nonzero fails the suite */
	const CU_TestInfo *tests;	/* ended by CU_TEST_INFO_NULL */
	unsigned alarm_seconds;		/* 0: no alarm */
	void (*before)(void);		/* NULL: nothing */
	void (*after)(void);		/* NULL: nothing */
};

/* Whether the sentence of T is one of the rows of TESTS before it. */
static inline int cunit_said_before(const CU_TestInfo *tests, const CU_TestInfo *t)
{
	for (; tests < t; tests++)
		if (strcmp(tests->pName, t->pName) == 0)
			return 1;
	return 0;
}

/*
 * Adds SUITE's tests to a new registry; returns 0 or -1, said on stderr.
 * CU_add_test refuses a test without a function; a sentence said twice
 * (which CUnit 2.1 would take, giving two results of one name) and a
 * suite without tests are refused here.
 */
static inline int cunit_suite_register(const struct cunit_suite *suite)
{
	const CU_TestInfo *t;
	CU_pSuite s;

	s = CU_add_suite(suite->name, suite->init, suite->clean);
	if (!s) {
		fprintf(stderr, "%s: cannot register the suite: %s\n", suite->name, CU_get_error_msg());
		return -1;
	}
	if (!suite->tests || !suite->tests[0].pName) {
		fprintf(stderr, "%s: the suite has no tests\n", suite->name);
		return -1;
	}
	for (t = suite->tests; t->pName; t++) {
		if (cunit_said_before(suite->tests, t)) {
			fprintf(stderr, "%s: cannot register the test \"%s\": said twice\n", suite->name, t->pName);
			return -1;
		}
		if (!CU_add_test(s, t->pName, t->pTestFunc)) {
			fprintf(stderr, "%s: cannot register the test \"%s\": %s\n", suite->name, t->pName,
				CU_get_error_msg());
			return -1;
		}
	}
	return 0;
}

/*
 * Registers and runs SUITE, verbosely; returns the exit status above. A
 * failure is anything CU_basic records: a failed assertion, a test that
 * failed, a suite whose init or clean failed, or a run that returned an
 * error.
 */
static inline int cunit_suite_main(const struct cunit_suite *suite)
{
	CU_ErrorCode run;
	int status = 2;

	if (suite->alarm_seconds)
		alarm(suite->alarm_seconds);
	if (suite->before)
		suite->before();
	if (CU_initialize_registry() != CUE_SUCCESS) {
		fprintf(stderr, "%s: cannot create the CUnit registry: %s\n", suite->name, CU_get_error_msg());
		goto out_after;
	}
	if (cunit_suite_register(suite))
		goto out_cleanup_registry;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	run = CU_basic_run_tests();
	if (run != CUE_SUCCESS)
		fprintf(stderr, "%s: %s\n", suite->name, CU_get_error_msg());
	status = run != CUE_SUCCESS || CU_get_number_of_failure_records() || CU_get_number_of_failures() ||
		 CU_get_number_of_tests_failed() || CU_get_number_of_suites_failed();
out_cleanup_registry:
	CU_cleanup_registry();
out_after:
	if (suite->after)
		suite->after();
	return status;
}

#endif
