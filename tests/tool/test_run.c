/*
 * test_run.c: CUnit suites of the launcher's files linked directly
 * (run_check.c, run_dumps.c): the library's own path expansion
 * (config_expand_path), a stats file the library could not write named as
 * such (never "no CUDA call"), and the dumps of a run told from older
 * ones in the same place.
 */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/cunit_main.h"
#include "run.h"
#include "vrampool.h"

static char tmpdir[] = "/tmp/vrampool-test-run.XXXXXX";

static int suite_init(void)
{
	return mkdtemp(tmpdir) ? 0 : -1;
}

/* Removes the suite's files, then its directory. */
static int suite_clean(void)
{
	static const char *const names[] = { "stderr.txt", "vrampool.prog.12.json", "vrampool.prog.13.json" };
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
		unlink(path);
	}
	return rmdir(tmpdir);
}

/* Runs run_no_dump for T with stderr caught into OUT. */
static void no_dump_text(const struct run_target *t, char *out, size_t size)
{
	static char *cmd[] = { "/bin/true", NULL };
	struct run_options o;
	char path[PATH_MAX];
	int saved, fd;
	ssize_t n;

	memset(&o, 0, sizeof(o));
	o.cmd = cmd;
	snprintf(path, sizeof(path), "%s/stderr.txt", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	run_no_dump(&o, t, "");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, out, size - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
}

static void test_unwritable_stats_named(void)
{
	struct run_target t;
	char out[2048];

	memset(&t, 0, sizeof(t));
	t.pid = 4321;
	snprintf(t.pattern, sizeof(t.pattern), "/proc/vrampool-no-such-dir/s.%%p.json");
	no_dump_text(&t, out, sizeof(out));
	fputs(out, stdout);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "the library could not write /proc/vrampool-no-such-dir/s.4321.json"));
	CU_ASSERT_PTR_NULL(strstr(out, "saw no CUDA call"));
	/* a writable path says what it said before: no CUDA call seen */
	snprintf(t.pattern, sizeof(t.pattern), "%s/s.%%p.json", tmpdir);
	no_dump_text(&t, out, sizeof(out));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "saw no CUDA call"));
}

static void test_expand_is_the_library_s(void)
{
	char out[PATH_MAX], host[256], want[PATH_MAX + 300];

	CU_ASSERT_EQUAL(run_expand("/x/s.%p.%h.json", 77, out, sizeof(out)), 0);
	CU_ASSERT_EQUAL(gethostname(host, sizeof(host)), 0);
	host[sizeof(host) - 1] = '\0';
	snprintf(want, sizeof(want), "/x/s.77.%s.json", host);
	CU_ASSERT_STRING_EQUAL(out, want);
}

static void test_older_dump_not_taken(void)
{
	struct run_target t;
	struct dump *all = NULL;
	char path[PATH_MAX];
	FILE *f;

	memset(&t, 0, sizeof(t));
	snprintf(t.pattern, sizeof(t.pattern), "%s/vrampool.prog.%%p.json", tmpdir);
	snprintf(path, sizeof(path), "%s/vrampool.prog.12.json", tmpdir);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("{\"vrampool\": 1, \"pid\": 12, \"bytes\": {}}", f);
	fclose(f);
	t.start = time(NULL);
	CU_ASSERT_EQUAL(run_snapshot(&t), 0);
	CU_ASSERT_EQUAL(run_collect(&t, &all), 0);
	snprintf(path, sizeof(path), "%s/vrampool.prog.13.json", tmpdir);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("{\"vrampool\": 1, \"pid\": 13, \"bytes\": {}}", f);
	fclose(f);
	CU_ASSERT_EQUAL(run_collect(&t, &all), 1);
	if (all)
		CU_ASSERT_EQUAL(all[0].pid, 13);
	free(all);
	free(t.seen);
}

static const CU_TestInfo tests[] = {
	{ "a stats file the library could not write is named, with why, never blamed on CUDA",
	  test_unwritable_stats_named },
	{ "the launcher expands paths with the library's own config_expand_path",
	  test_expand_is_the_library_s },
	{ "a dump that was there before the run is never taken for one of its own",
	  test_older_dump_not_taken },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "the launcher's files",
	.init = suite_init,
	.clean = suite_clean,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
