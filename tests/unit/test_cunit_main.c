/*
 * Unit tests of cunit_main.h, the main() every CUnit suite shares: its exit
 * status, its CU_basic summary (scripts/test.sh reads the "tests" row) and
 * its hooks. Each case runs this program again (/proc/self/exe) with
 * CUNIT_MAIN_CASE naming a small suite of its own, its output in a file;
 * without the variable the program runs the suite of these tests.
 */
#include <CUnit/Basic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cunit_main.h"

/* ---- the small suites a child runs ---- */

static void c_passes(void)
{
	CU_ASSERT(1);
}

static void c_fails(void)
{
	CU_FAIL("this test fails");
}

static void c_hangs(void)
{
	pause();
}

static int c_init_fails(void)
{
	return -1;
}

static int c_clean_fails(void)
{
	return -1;
}

static void c_before(void)
{
	printf("hook: before\n");
}

static void c_after(void)
{
	printf("hook: after\n");
}

static const CU_TestInfo c_two_pass[] = {
	{ "the first passes", c_passes },
	{ "the second passes", c_passes },
	CU_TEST_INFO_NULL,
};

static const CU_TestInfo c_one_fails[] = {
	{ "this one passes", c_passes },
	{ "this one fails", c_fails },
	CU_TEST_INFO_NULL,
};

static const CU_TestInfo c_repeated[] = {
	{ "a sentence said twice", c_passes },
	{ "a sentence said twice", c_passes },
	CU_TEST_INFO_NULL,
};

static const CU_TestInfo c_no_function[] = {
	{ "a test without a function", NULL },
	CU_TEST_INFO_NULL,
};

static const CU_TestInfo c_none[] = {
	CU_TEST_INFO_NULL,
};

static const CU_TestInfo c_hang[] = {
	{ "this test never returns", c_hangs },
	CU_TEST_INFO_NULL,
};

static const struct {
	const char *name;
	struct cunit_suite suite;
} cases[] = {
	{ "pass", { .name = "passing", .tests = c_two_pass } },
	{ "fail", { .name = "failing", .tests = c_one_fails } },
	{ "init", { .name = "no init", .init = c_init_fails, .tests = c_two_pass } },
	{ "clean", { .name = "no clean", .clean = c_clean_fails, .tests = c_two_pass } },
	{ "repeated", { .name = "repeated", .tests = c_repeated } },
	{ "nofunction", { .name = "no function", .tests = c_no_function } },
	{ "empty", { .name = "empty", .tests = c_none } },
	{ "alarm", { .name = "hung", .tests = c_hang, .alarm_seconds = 1 } },
	{ "hooks", { .name = "hooked", .tests = c_two_pass, .before = c_before, .after = c_after } },
};

/* ---- the parent's side ---- */

static char out[16384];

/* Runs this program on the suite CASE; returns the wait status, the
 * child's stdout and stderr in out. */
static int run_case(const char *name)
{
	FILE *f = tmpfile();
	int status = -1;
	size_t n;
	pid_t pid;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		dup2(fileno(f), STDOUT_FILENO);
		dup2(fileno(f), STDERR_FILENO);
		setenv("CUNIT_MAIN_CASE", name, 1);
		execl("/proc/self/exe", "test_cunit_main", (char *)NULL);
		_exit(127);
	}
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	rewind(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
	return status;
}

/* The exit code of a child that exited, or -1. */
static int exit_code(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether out holds CU_basic's "tests" row with these figures. */
static int has_tests_row(unsigned total, unsigned ran, unsigned passed, unsigned failed)
{
	const char *p = strstr(out, "\n               tests ");
	unsigned t, r, s, f, i;

	return p && sscanf(p, " tests %u %u %u %u %u", &t, &r, &s, &f, &i) == 5 &&
	       t == total && r == ran && s == passed && f == failed && i == 0;
}

static void test_passing_suite_exits_0(void)
{
	CU_ASSERT_EQUAL(exit_code(run_case("pass")), 0);
	CU_ASSERT(has_tests_row(2, 2, 2, 0));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "Suite: passing"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "Test: the second passes ...passed"));
}

static void test_failing_test_exits_1(void)
{
	CU_ASSERT_EQUAL(exit_code(run_case("fail")), 1);
	CU_ASSERT(has_tests_row(2, 2, 1, 1));
}

static void test_failed_init_exits_1(void)
{
	CU_ASSERT_EQUAL(exit_code(run_case("init")), 1);
	CU_ASSERT(has_tests_row(2, 0, 0, 0));
}

static void test_failed_clean_exits_1(void)
{
	CU_ASSERT_EQUAL(exit_code(run_case("clean")), 1);
	CU_ASSERT(has_tests_row(2, 2, 2, 0));
}

static void test_unregistered_test_fails_loudly(void)
{
	CU_ASSERT_EQUAL(exit_code(run_case("repeated")), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "repeated: cannot register the test \"a sentence said twice\""));
	CU_ASSERT_PTR_NULL(strstr(out, "Run Summary"));
	CU_ASSERT_EQUAL(exit_code(run_case("nofunction")), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "cannot register the test \"a test without a function\""));
	CU_ASSERT_PTR_NULL(strstr(out, "Run Summary"));
	CU_ASSERT_EQUAL(exit_code(run_case("empty")), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "empty: the suite has no tests"));
	CU_ASSERT_PTR_NULL(strstr(out, "Run Summary"));
}

static void test_alarm_ends_a_hung_suite(void)
{
	int status = run_case("alarm");

	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM);
	CU_ASSERT_PTR_NULL(strstr(out, "Run Summary"));
}

static void test_hooks_surround_the_run(void)
{
	const char *before, *summary, *after;

	CU_ASSERT_EQUAL(exit_code(run_case("hooks")), 0);
	before = strstr(out, "hook: before");
	summary = strstr(out, "Run Summary");
	after = strstr(out, "hook: after");
	CU_ASSERT(before && summary && after && before < summary && summary < after);
}

static const CU_TestInfo tests[] = {
	{ "a suite whose tests pass exits 0 with CU_basic's verbose output and summary",
	  test_passing_suite_exits_0 },
	{ "a failing test makes the exit status 1 and is counted in the summary",
	  test_failing_test_exits_1 },
	{ "a suite whose init fails exits 1 though no test ran", test_failed_init_exits_1 },
	{ "a suite whose clean fails exits 1 though every test passed", test_failed_clean_exits_1 },
	{ "a test that cannot be registered, or no test at all, exits 2 naming it, with no summary",
	  test_unregistered_test_fails_loudly },
	{ "the alarm ends a hung suite with SIGALRM", test_alarm_ends_a_hung_suite },
	{ "before runs ahead of the tests and after follows the summary", test_hooks_surround_the_run },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "cunit_main",
	.tests = tests,
};

int main(void)
{
	const char *name = getenv("CUNIT_MAIN_CASE");
	size_t i;

	if (!name)
		return cunit_suite_main(&suite);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(cases[i].name, name) == 0)
			return cunit_suite_main(&cases[i].suite);
	fprintf(stderr, "test_cunit_main: no case %s\n", name);
	return 2;
}
