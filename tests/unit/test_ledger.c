/*
 * Unit tests of the cost ledger (pool/ledger.h) on a fake clock: the prior
 * from the first copies, the window (clear cases at once, close ones over
 * a whole window, big rows by time), the share of hits with a full pool,
 * standing aside and coming back on a sample, the evidence doubling after
 * a flip, the force mode, the board and the reason in numbers. Pure: no
 * device.
 */
#include <pthread.h>

#include <CUnit/Basic.h>
#include <string.h>

#include "cunit_main.h"
#include "pool/ledger.h"

static uint64_t t_wall, t_cpu;

static uint64_t t_fake_wall(void)
{
	return t_wall;
}

static uint64_t t_fake_cpu(void)
{
	return t_cpu;
}

static struct ledger t_l;
static struct ledger_tally t_t;

static const struct ledger_link t_none = { 0, LEDGER_LINK_NONE, 0 };

static struct ledger_link t_link(double gbps, enum ledger_source src)
{
	return (struct ledger_link){ gbps, src, 0 };
}

/* A fresh ledger and tally, the fake clock at 1 s. */
static void t_fresh(void)
{
	ledger_init(&t_l);
	memset(&t_t, 0, sizeof(t_t));
	ledger_set_clock(t_fake_wall, t_fake_cpu);
	t_wall = t_cpu = 1000000000ULL;
}

/*
 * Feeds one copy of rows rows of row bytes that cost ns_per_row of host
 * time each, hits of them served, the clock advanced by the host time.
 */
static enum ledger_event t_copy(uint64_t rows, uint64_t row, double ns_per_row, uint64_t hits, int can_admit,
				const struct ledger_link *link, enum ledger_mode mode)
{
	struct ledger_copy c = {
		.rows = rows, .row = row, .cpu_ns = (uint64_t)(ns_per_row * (double)rows),
		.wall_ns = 2 * (uint64_t)(ns_per_row * (double)rows), .hit_rows = hits, .can_admit = can_admit,
	};

	t_wall += c.wall_ns;
	return ledger_pooled(&t_l, &t_t, &c, link, mode);
}

/* Feeds copies until the ledger says something; returns the copies fed (limit + 1: nothing said). */
static int t_until(int limit, uint64_t rows, uint64_t row, double ns, uint64_t hits, int can_admit,
		   const struct ledger_link *link, enum ledger_event *ev)
{
	for (int i = 1; i <= limit; i++) {
		*ev = t_copy(rows, row, ns, hits, can_admit, link, LEDGER_ON);
		if (*ev != LEDGER_EV_NONE)
			return i;
	}
	return limit + 1;
}

static void test_prior_small_rows(void)
{
	struct ledger_view v;
	char why[256];

	t_fresh();
	/* 64 B rows at 150 ns each: a 2 GB/s link sends one in 32 ns */
	CU_ASSERT_EQUAL(t_copy(256, 64, 900, 0, 1, &t_none, LEDGER_ON), LEDGER_EV_NONE);
	CU_ASSERT_EQUAL(t_copy(256, 64, 150, 0, 1, &t_none, LEDGER_ON), LEDGER_EV_NONE);
	CU_ASSERT_EQUAL(t_copy(256, 64, 300, 0, 1, &t_none, LEDGER_ON), LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_ASIDE);
	CU_ASSERT_EQUAL(t_l.last.basis, LEDGER_BASIS_PRIOR);
	CU_ASSERT_EQUAL(t_l.last.link.source, LEDGER_LINK_ASSUMED);
	/* the least of the first copies: the one-time costs the first copies carry do not count */
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.host_ns, 150.0, 0.01);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.link_ns, 32.0, 0.01);
	CU_ASSERT_TRUE(ledger_view(&t_t, &v));
	CU_ASSERT_TRUE(v.aside);
	CU_ASSERT_EQUAL(v.stand_asides, 1);
	CU_ASSERT_EQUAL(v.copies, 3);
	CU_ASSERT_EQUAL(v.rows, 768);
	CU_ASSERT_STRING_EQUAL(ledger_reason(&v, why, sizeof(why)),
			       "64 B rows stood aside from their first copies: 150 ns of host time per row to "
			       "save 32 ns of link time at 2 GB/s (assumed)");
}

static void test_prior_stated_link(void)
{
	struct ledger_link slow = t_link(0.5, LEDGER_LINK_STATED), fast = t_link(16, LEDGER_LINK_STATED);
	enum ledger_event ev;

	/* over a stated 0.5 GB/s link a 64 B row takes 128 ns: 100 ns of host time pays */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(LEDGER_WINDOW * 4, 256, 64, 100, 0, 1, &slow, &ev), LEDGER_WINDOW * 4 + 1);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	/* at a stated 16 GB/s, 3 KiB rows at 250 ns each stand aside from the prior */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(10, 256, 3072, 250, 0, 1, &fast, &ev), LEDGER_PRIOR_COPIES);
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(t_l.last.basis, LEDGER_BASIS_PRIOR);
	CU_ASSERT_EQUAL(t_l.last.link.source, LEDGER_LINK_STATED);
}

static void test_paying_rows_keep_pooling(void)
{
	struct ledger_link link = t_link(4, LEDGER_LINK_MEASURED);
	enum ledger_event ev;

	/* 147 KiB rows at 4 GB/s: 37.6 us on the link, 15 us to hash */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(500, 64, 150528, 15000, 0, 1, &link, &ev), 501);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	CU_ASSERT_EQUAL(t_l.last.basis, LEDGER_BASIS_WINDOW);
	CU_ASSERT_FALSE(t_l.last.aside);
	CU_ASSERT_EQUAL(atomic_load(&t_t.stand_asides), 0);
}

static void test_clear_fast_close_window(void)
{
	struct ledger_link link = t_link(16, LEDGER_LINK_MEASURED);
	enum ledger_event ev;

	/* 3 KiB rows at 16 GB/s save 192 ns each. 500 ns is clear: aside after the fast copies. */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(200, 256, 3072, 500, 0, 1, &link, &ev),
			LEDGER_PRIOR_COPIES + LEDGER_FAST_COPIES);
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(t_l.last.basis, LEDGER_BASIS_WINDOW);
	/* 220 ns is close: judged over the whole window */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(200, 256, 3072, 220, 0, 1, &link, &ev), LEDGER_PRIOR_COPIES + LEDGER_WINDOW);
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	/* 180 ns pays, window after window */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(10 * LEDGER_WINDOW, 256, 3072, 180, 0, 1, &link, &ev), 10 * LEDGER_WINDOW + 1);
}

/*
 * Whether the link meter may spare a copy of hits (link_pool_due): only
 * when pooling pays even on a link twice as fast as measured, on the open
 * window's whole host time (at least LEDGER_FAST_COPIES copies) or on the
 * last window's verdict. 147 KiB rows at a measured 4 GB/s: 37.6 us on the
 * link, 18.8 us at twice the speed.
 */
static void test_pays_clearly(void)
{
	struct ledger_link link = t_link(4, LEDGER_LINK_MEASURED), stated = t_link(4, LEDGER_LINK_STATED);
	struct ledger_link served = link, fast;
	enum ledger_event ev;

	/* 15 us of host time a row: clear, but only once the window has its fast copies */
	t_fresh();
	for (int i = 0; i < LEDGER_PRIOR_COPIES + LEDGER_FAST_COPIES - 1; i++) {
		t_copy(64, 150528, 15000, 64, 1, &link, LEDGER_ON);
		CU_ASSERT_FALSE(ledger_pays_clearly(&t_l, &link));
	}
	t_copy(64, 150528, 15000, 64, 1, &link, LEDGER_ON);
	CU_ASSERT_TRUE(ledger_pays_clearly(&t_l, &link));
	/* never on a stated link (nothing is measured) nor an unmeasured one */
	CU_ASSERT_FALSE(ledger_pays_clearly(&t_l, &stated));
	CU_ASSERT_FALSE(ledger_pays_clearly(&t_l, &t_none));
	/* serving counted: at 8 GB/s a hit takes 18.8 us back, and nothing is clear */
	served.serve_gbps = 8;
	CU_ASSERT_FALSE(ledger_pays_clearly(&t_l, &served));
	/* a window judged pooling stays clear after it closes, until the next has its fast copies */
	CU_ASSERT_EQUAL(t_until(LEDGER_WINDOW, 64, 150528, 15000, 64, 1, &link, &ev), LEDGER_WINDOW + 1);
	CU_ASSERT_EQUAL(t_l.last.basis, LEDGER_BASIS_WINDOW);
	while (t_l.win_copies != 0)
		t_copy(64, 150528, 15000, 64, 1, &link, LEDGER_ON);
	CU_ASSERT_TRUE(ledger_pays_clearly(&t_l, &link));
	/* 25 us a row pays on the measured link (37.6 us) but not on one twice as fast: close */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(3 * LEDGER_WINDOW, 64, 150528, 25000, 64, 1, &link, &ev), 3 * LEDGER_WINDOW + 1);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	CU_ASSERT_FALSE(ledger_pays_clearly(&t_l, &link));
	/* a spec standing aside is never clear, even on a link its rows would pay on */
	fast = t_link(16, LEDGER_LINK_MEASURED);
	t_fresh();
	CU_ASSERT_EQUAL(t_until(200, 256, 3072, 500, 0, 1, &fast, &ev), LEDGER_PRIOR_COPIES + LEDGER_FAST_COPIES);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_ASIDE);
	CU_ASSERT_FALSE(ledger_pays_clearly(&t_l, &fast));
	CU_ASSERT_FALSE(ledger_pays_clearly(&t_l, &link));
}

/*
 * A hit is served from the slabs, which takes the device's time too: a
 * row saves its link time less that (issue 16). 3 KiB rows at 4 GB/s
 * spend 768 ns on the link; served at 4.8 GB/s they take 640 ns back, and
 * 332 ns of host time per row no longer pays, where it did with the
 * serving taken as free. A serve slower than the link saves nothing, never
 * less than nothing.
 */
static void test_serving_takes_back(void)
{
	struct ledger_link free_serve = t_link(4, LEDGER_LINK_MEASURED), slow_serve = free_serve;
	struct ledger_view v;
	enum ledger_event ev;
	char why[320];

	slow_serve.serve_gbps = 4.8;
	CU_ASSERT_DOUBLE_EQUAL(ledger_saved_row_ns(3072, &free_serve), 768.0, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(ledger_saved_row_ns(3072, &slow_serve), 128.0, 1e-6);
	slow_serve.serve_gbps = 2;
	CU_ASSERT_DOUBLE_EQUAL(ledger_saved_row_ns(3072, &slow_serve), 0.0, 1e-9);
	slow_serve.serve_gbps = 4.8;
	t_fresh();
	CU_ASSERT_EQUAL(t_until(LEDGER_WINDOW * 4, 256, 3072, 332, 256, 1, &free_serve, &ev), LEDGER_WINDOW * 4 + 1);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	t_fresh();
	CU_ASSERT(t_until(LEDGER_WINDOW * 4, 256, 3072, 332, 256, 1, &slow_serve, &ev) <= LEDGER_WINDOW + LEDGER_PRIOR_COPIES);
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.link_ns, 768.0, 0.01);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.serve_ns, 640.0, 0.01);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.saved_ns, 128.0, 0.01);
	CU_ASSERT_TRUE(ledger_view(&t_t, &v));
	CU_ASSERT_DOUBLE_EQUAL(v.v.link.serve_gbps, 4.8, 1e-3);
	CU_ASSERT_STRING_EQUAL(ledger_reason(&v, why, sizeof(why)),
			       "3.0 KiB rows stood aside: 332 ns of host time per row to save 768 ns of link time "
			       "at 4 GB/s (measured), less 640 ns serving it from VRAM at 4.8 GB/s (measured)");
	/* a sample against the same serving does not bring it back; a faster serving does */
	slow_serve.serve_gbps = 400;
	for (int i = 0; i < LEDGER_RESUME_COPIES && ev != LEDGER_EV_RESUME; i++) {
		struct ledger_sample s = { .bytes = 256 * 3072, .row = 3072, .sampled = 1, .rows = 8,
					   .cpu_ns = 8 * 332, .can_admit = 1 };

		ev = ledger_aside(&t_l, &t_t, &s, &slow_serve);
	}
	CU_ASSERT_EQUAL(ev, LEDGER_EV_RESUME);
}

static void test_big_rows_judged_by_time(void)
{
	struct ledger_link link = t_link(32, LEDGER_LINK_MEASURED);
	enum ledger_event ev;
	int n;

	/* 64 MiB rows at 32 GB/s: 2.1 ms on the link; 3 ms of hashing is close, and few come */
	t_fresh();
	n = t_until(LEDGER_WINDOW, 1, 64ULL << 20, 3.0e6, 0, 1, &link, &ev);
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	/* a window of 256 MiB closes after 4 rows of 64 MiB */
	CU_ASSERT_EQUAL(n, LEDGER_PRIOR_COPIES + LEDGER_FAST_COPIES);
	/* 8 MiB rows: the bytes take 32 copies, the fake clock says 1 s after 4 */
	t_fresh();
	for (n = 0; n < LEDGER_PRIOR_COPIES; n++)
		t_copy(1, 8ULL << 20, 300000, 0, 1, &link, LEDGER_ON);
	for (n = 1; n <= LEDGER_WINDOW; n++) {
		ev = t_copy(1, 8ULL << 20, 300000, 0, 1, &link, LEDGER_ON);
		t_wall += 300000000ULL;         /* the program's own work between copies */
		if (ev != LEDGER_EV_NONE)
			break;
	}
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(n, 5);
}

static void test_no_link_no_window(void)
{
	enum ledger_event ev;

	/* 3 KiB rows pass the prior; without a stated or measured link no window decides */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(10 * LEDGER_WINDOW, 256, 3072, 600, 0, 1, &t_none, &ev), 10 * LEDGER_WINDOW + 1);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
}

static void test_full_pool_weighs_hits(void)
{
	struct ledger_link link = t_link(4, LEDGER_LINK_MEASURED);
	struct ledger_view v;
	enum ledger_event ev;
	char why[256];

	/* 3 KiB rows at 4 GB/s (768 ns), 300 ns of host time: pays while the pool admits */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(3 * LEDGER_WINDOW, 100, 3072, 300, 0, 1, &link, &ev), 3 * LEDGER_WINDOW + 1);
	/* full, 19% of rows hit: 146 ns saved per row for 300 spent */
	CU_ASSERT(t_until(3 * LEDGER_WINDOW, 100, 3072, 300, 19, 0, &link, &ev) <= LEDGER_WINDOW);
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.hit_share, 0.19, 0.001);
	ledger_view(&t_t, &v);
	CU_ASSERT_PTR_NOT_NULL(strstr(ledger_reason(&v, why, sizeof(why)), "; 19% of rows hit)"));
	/* full, 60% hit: 460 ns saved per row, it pays */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(3 * LEDGER_WINDOW, 100, 3072, 300, 60, 0, &link, &ev), 3 * LEDGER_WINDOW + 1);
	/* full and (nearly) nothing hits: the back-off's to judge, not the ledger's */
	t_fresh();
	CU_ASSERT_EQUAL(t_until(3 * LEDGER_WINDOW, 100, 3072, 300, 0, 0, &link, &ev), 3 * LEDGER_WINDOW + 1);
}

/*
 * Feeds sampled copies while aside, rows looked up of which hits were
 * found, in ns_per_row each (0: not timed); returns the count fed until a
 * resume (limit + 1: none).
 */
static int t_samples_timed(int limit, uint64_t rows, uint64_t row, uint64_t hits, int can_admit, double ns_per_row,
			   const struct ledger_link *link)
{
	struct ledger_sample smp = {
		.bytes = rows * row, .row = row, .sampled = 1, .rows = rows, .hits = hits,
		.cpu_ns = (uint64_t)(ns_per_row * (double)rows), .can_admit = can_admit,
	};

	for (int i = 1; i <= limit; i++)
		if (ledger_aside(&t_l, &t_t, &smp, link) == LEDGER_EV_RESUME)
			return i;
	return limit + 1;
}

static int t_samples(int limit, uint64_t rows, uint64_t row, uint64_t hits, int can_admit,
		     const struct ledger_link *link)
{
	return t_samples_timed(limit, rows, row, hits, can_admit, 0, link);
}

static void test_aside_resumes_on_sample(void)
{
	struct ledger_link slow = t_link(0.25, LEDGER_LINK_MEASURED), fast = t_link(16, LEDGER_LINK_MEASURED);
	struct ledger_view v;
	enum ledger_event ev;

	t_fresh();
	t_until(LEDGER_PRIOR_COPIES, 256, 64, 150, 0, 1, &t_none, &ev);
	CU_ASSERT_EQUAL_FATAL(ev, LEDGER_EV_ASIDE);
	/* copies passed straight through and not sampled judge nothing */
	for (int i = 0; i < 100; i++) {
		struct ledger_sample smp = { .bytes = 256 * 64, .row = 64, .can_admit = 1 };

		CU_ASSERT_EQUAL(ledger_aside(&t_l, &t_t, &smp, &slow), LEDGER_EV_NONE);
	}
	/* samples at 16 GB/s: 4 ns saved per row, it stays aside */
	CU_ASSERT_EQUAL(t_samples(100, 16, 64, 0, 1, &fast), 101);
	CU_ASSERT_EQUAL(t_l.last.basis, LEDGER_BASIS_SAMPLE);
	CU_ASSERT_TRUE(t_l.last.aside);
	/* the link turns out slow (0.25 GB/s: 256 ns a row): it comes back after a sample's evidence */
	CU_ASSERT_EQUAL(t_samples(100, 16, 64, 0, 1, &slow), LEDGER_RESUME_COPIES);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	ledger_view(&t_t, &v);
	CU_ASSERT_FALSE(v.aside);
	CU_ASSERT_EQUAL(v.resumes, 1);
	CU_ASSERT_EQUAL(v.aside_copies, 100 + 100 + LEDGER_RESUME_COPIES);
	CU_ASSERT_EQUAL(v.sampled, 100 + LEDGER_RESUME_COPIES);
	/* pooled it costs more than measured before: aside again, and the next resume needs twice the evidence */
	t_until(LEDGER_WINDOW, 256, 64, 1000, 0, 1, &slow, &ev);
	CU_ASSERT_EQUAL_FATAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(t_l.flips, 1);
	CU_ASSERT_EQUAL(t_samples(96, 16, 64, 0, 1, &slow), 97);       /* whole judgements of 8 copies */
	ledger_view(&t_t, &v);
	CU_ASSERT_EQUAL(v.stand_asides, 2);
	/* a link slow enough pays for the 1000 ns it cost, after twice the evidence */
	slow.gbps = 0.01;
	CU_ASSERT_EQUAL(t_samples(100, 16, 64, 0, 1, &slow), 2 * LEDGER_RESUME_COPIES);
}

static void test_aside_full_pool_sample_hits(void)
{
	struct ledger_link link = t_link(4, LEDGER_LINK_MEASURED);
	enum ledger_event ev;

	/* full pool, 19% hits: aside; then the sampled rows hit 80%: 614 ns saved per row for 300 */
	t_fresh();
	t_until(3 * LEDGER_WINDOW, 100, 3072, 300, 19, 0, &link, &ev);
	CU_ASSERT_EQUAL_FATAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(t_samples(100, 16, 3072, 3, 0, &link), 101);
	CU_ASSERT_EQUAL(t_samples(100, 16, 3072, 13, 0, &link), LEDGER_RESUME_ROWS / 16);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
}

/*
 * Feeds one copy of 3 KiB rows at 4 GB/s (768 ns of link time a row) that
 * captures captured of its 100 rows and serves hits, at 1200 ns of host
 * time a row of which hash_ns is hashing.
 */
static enum ledger_event t_capturing(uint64_t captured, uint64_t hits, double hash_ns)
{
	struct ledger_link link = t_link(4, LEDGER_LINK_MEASURED);
	struct ledger_copy c = {
		.rows = 100, .row = 3072, .cpu_ns = 120000, .wall_ns = 120000, .hash_ns = (uint64_t)(hash_ns * 100),
		.hit_rows = hits, .captured_rows = captured, .can_admit = 1,
	};

	return ledger_pooled(&t_l, &t_t, &c, &link, LEDGER_ON);
}

static void test_captures_weigh_the_hash(void)
{
	struct ledger_view v;
	char why[256];
	int i;

	/* Epoch 1: every row a capture at 1200 ns, 250 of them hashing: the captures are paid back later. */
	t_fresh();
	for (i = 0; i < 10 * LEDGER_WINDOW; i++)
		CU_ASSERT_EQUAL(t_capturing(100, 0, 250), LEDGER_EV_NONE);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	CU_ASSERT_TRUE(t_l.last.hashing);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.host_ns, 250, 0.01);
	ledger_view(&t_t, &v);
	CU_ASSERT_STRING_EQUAL(ledger_reason(&v, why, sizeof(why)),
			       "3.0 KiB rows pool: 250 ns of hashing per row saves 768 ns of link time at 4 GB/s "
			       "(measured)");
	/* rows that cost more to hash than to send stand aside even while capturing */
	t_fresh();
	for (i = 0; i < 2 * LEDGER_WINDOW && t_capturing(100, 0, 1000) == LEDGER_EV_NONE; i++)
		;
	CU_ASSERT_EQUAL(t_l.state, LEDGER_ASIDE);
	CU_ASSERT_TRUE(t_l.last.hashing);
	/* once rows come back the whole host time is weighed: 1200 ns does not pay for 768 */
	t_fresh();
	for (i = 0; i < 2 * LEDGER_WINDOW && t_capturing(10, 90, 250) == LEDGER_EV_NONE; i++)
		;
	CU_ASSERT_EQUAL(t_l.state, LEDGER_ASIDE);
	CU_ASSERT_FALSE(t_l.last.hashing);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.host_ns, 1200, 0.01);
}

static void test_retire_and_flips_per_ledger(void)
{
	struct ledger_link slow = t_link(0.1, LEDGER_LINK_MEASURED);
	struct ledger other;
	enum ledger_event ev;

	/* a spec that stood aside in a pool whose device was reset stands aside no more */
	t_fresh();
	t_until(LEDGER_PRIOR_COPIES, 256, 64, 150, 0, 1, &t_none, &ev);
	CU_ASSERT_EQUAL_FATAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(atomic_load(&t_t.aside), 1);
	ledger_retire(&t_l, &t_t);
	CU_ASSERT_EQUAL(atomic_load(&t_t.aside), 0);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	CU_ASSERT_EQUAL(t_l.prior_copies, 0);
	/* a resume in one pool does not make another pool's first stand-aside a flip */
	t_fresh();
	ledger_init(&other);
	t_until(LEDGER_PRIOR_COPIES, 256, 64, 150, 0, 1, &t_none, &ev);
	CU_ASSERT_EQUAL(t_samples(100, 16, 64, 0, 1, &slow), LEDGER_RESUME_COPIES);
	CU_ASSERT_EQUAL(atomic_load(&t_t.resumes), 1);
	for (int i = 0; i < LEDGER_PRIOR_COPIES; i++) {
		struct ledger_copy c = { .rows = 256, .row = 64, .cpu_ns = 256 * 150, .can_admit = 1 };

		ev = ledger_pooled(&other, &t_t, &c, &t_none, LEDGER_ON);
	}
	CU_ASSERT_EQUAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(other.flips, 0);
}

static void test_sample_keeps_verdict_without_news(void)
{
	struct ledger_view v;
	enum ledger_event ev;

	/* aside from the first copies against the assumed link; samples without a link say nothing new */
	t_fresh();
	t_until(LEDGER_PRIOR_COPIES, 256, 64, 150, 0, 1, &t_none, &ev);
	CU_ASSERT_EQUAL_FATAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(t_samples(10 * LEDGER_RESUME_COPIES, 16, 64, 0, 1, &t_none), 10 * LEDGER_RESUME_COPIES + 1);
	ledger_view(&t_t, &v);
	CU_ASSERT_EQUAL(v.v.basis, LEDGER_BASIS_PRIOR);
	CU_ASSERT_EQUAL(v.v.link.source, LEDGER_LINK_ASSUMED);
}

static void test_sample_cost_corrects_prior(void)
{
	struct ledger_link link = t_link(4, LEDGER_LINK_MEASURED);
	enum ledger_event ev;

	/* 147 KiB rows whose first copies carried 90 us a row of one-time costs: aside against 2 GB/s */
	t_fresh();
	t_until(LEDGER_PRIOR_COPIES, 8, 150528, 90000, 0, 1, &t_none, &ev);
	CU_ASSERT_EQUAL_FATAL(ev, LEDGER_EV_ASIDE);
	/* the samples hash a row in 12 us: against the assumed link already, it pays; it comes back */
	CU_ASSERT_EQUAL(t_samples_timed(100, 8, 150528, 0, 1, 12000, &t_none), LEDGER_RESUME_COPIES);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	CU_ASSERT_TRUE(t_l.last.hashing);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.host_ns, 12000, 0.5);
	/* a window's whole host time (500 ns for 3 KiB rows at 4 GB/s, full, 50% hit) is not a hash's */
	t_fresh();
	t_until(3 * LEDGER_WINDOW, 100, 3072, 500, 50, 0, &link, &ev);
	CU_ASSERT_EQUAL_FATAL(ev, LEDGER_EV_ASIDE);
	CU_ASSERT_EQUAL(t_samples_timed(100, 16, 3072, 8, 0, 200, &link), 101);
	CU_ASSERT_DOUBLE_EQUAL(t_l.last.host_ns, 500, 0.5);
}

static void test_force_keeps_verdict(void)
{
	struct ledger_view v;

	t_fresh();
	for (int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(t_copy(256, 64, 150, 0, 1, &t_none, LEDGER_FORCE), LEDGER_EV_NONE);
	CU_ASSERT_EQUAL(t_l.state, LEDGER_POOLING);
	CU_ASSERT_TRUE(t_l.last.aside);         /* what it would have done */
	ledger_view(&t_t, &v);
	CU_ASSERT_FALSE(v.aside);
	CU_ASSERT_TRUE(v.v.aside);
	CU_ASSERT_EQUAL(v.stand_asides, 0);
}

static void test_board_skip(void)
{
	int passed = 0, skipped = 0;

	ledger_board_reset();
	/* pooling: every copy reaches its pool */
	for (int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(ledger_skip(3), 0);
	atomic_store(&ledger_board[3].aside, 1);
	for (int i = 0; i < 16 * LEDGER_SAMPLE_EVERY; i++) {
		if (ledger_skip(3))
			skipped++;
		else
			passed++;
	}
	CU_ASSERT_EQUAL(passed, 16);
	CU_ASSERT_EQUAL(skipped, 15 * 16);
	CU_ASSERT_EQUAL(ledger_skip(-1), 0);
	CU_ASSERT_EQUAL(ledger_slot(-1), LEDGER_WHOLE);
	CU_ASSERT_EQUAL(ledger_slot(LAYOUT_MAX_SPECS), -1);
	ledger_board_reset();
	CU_ASSERT_EQUAL(ledger_skip(3), 0);
}

static void test_fake_clock(void)
{
	struct ledger_stamp s;
	uint64_t wall, cpu;

	t_fresh();
	ledger_stamp(&s);
	ledger_stamp_cpu(&s);
	t_wall += 1500;
	t_cpu += 700;
	ledger_elapsed(&s, &wall, &cpu);
	CU_ASSERT_EQUAL(wall, 1500);
	CU_ASSERT_EQUAL(cpu, 700);
	/* without a CPU reading (no system call), the CPU time is the wall time */
	ledger_stamp(&s);
	t_wall += 900;
	t_cpu += 100;
	ledger_elapsed(&s, &wall, &cpu);
	CU_ASSERT_EQUAL(wall, 900);
	CU_ASSERT_EQUAL(cpu, 900);
	ledger_set_clock(NULL, NULL);
	ledger_stamp(&s);
	ledger_elapsed(&s, &wall, &cpu);
	CU_ASSERT(wall < 1000000000ULL);
}

/*
 * The sampled CPU clock, on a thread of its own (the state is per thread):
 * the first LEDGER_CPU_FIRST hashed copies read it, then one in
 * LEDGER_CPU_EVERY, a synchronous copy always; a copy that did not read
 * it is given its wall time times the share those that did measured.
 */
static void *t_cpu_thread(void *arg)
{
	unsigned due = 0, n = 4 * LEDGER_CPU_EVERY;

	(void)arg;
	CU_ASSERT_EQUAL(ledger_cpu_share(0, 1000, 1000), 1000);  /* nothing read yet: the wall time */
	for (unsigned i = 0; i < LEDGER_CPU_FIRST; i++)
		CU_ASSERT(ledger_cpu_due(0));
	CU_ASSERT_EQUAL(ledger_cpu_share(1, 1000, 400), 400);
	for (unsigned i = 0; i < n; i++)
		due += (unsigned)ledger_cpu_due(0);
	CU_ASSERT_EQUAL(due, n / LEDGER_CPU_EVERY);
	for (unsigned i = 0; i < n; i++)
		CU_ASSERT(ledger_cpu_due(1));
	CU_ASSERT_EQUAL(ledger_cpu_share(0, 2000, 2000), 800);    /* a share of 0.4 */
	/* the share follows later readings, never above 1 */
	for (unsigned i = 0; i < 64; i++)
		(void)ledger_cpu_share(1, 1000, 3000);
	CU_ASSERT(ledger_cpu_share(0, 1000, 1000) <= 1000);
	CU_ASSERT(ledger_cpu_share(0, 1000, 1000) >= 990);
	return NULL;
}

static void test_cpu_clock_sampled(void)
{
	pthread_t t;

	ledger_set_clock(NULL, NULL);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, t_cpu_thread, NULL) == 0);
	pthread_join(t, NULL);
	/* under a fake clock every copy reads it */
	ledger_set_clock(t_fake_wall, t_fake_cpu);
	for (unsigned i = 0; i < 4 * LEDGER_CPU_FIRST; i++)
		CU_ASSERT(ledger_cpu_due(0));
	ledger_set_clock(NULL, NULL);
}

static int t_clean(void)
{
	ledger_set_clock(NULL, NULL);
	ledger_board_reset();
	return 0;
}

static const CU_TestInfo tests[] = {
	{ "64 B rows that cost more than a slow link sends them stand aside from their first copies",
	  test_prior_small_rows },
	{ "the first copies are weighed against the stated link when there is one", test_prior_stated_link },
	{ "147 KiB rows at 4 GB/s keep pooling, window after window", test_paying_rows_keep_pooling },
	{ "a clear case stands aside after a few copies, a close one after a whole window",
	  test_clear_fast_close_window },
	{ "pooling is clear when it pays even on a link twice as fast as measured", test_pays_clearly },
	{ "a hit saves its link time less its serving from the slabs, never less than nothing",
	  test_serving_takes_back },
	{ "big rows that come few are judged by bytes or by time", test_big_rows_judged_by_time },
	{ "without a stated or measured link the window decides nothing", test_no_link_no_window },
	{ "with a full pool only the hits save, and rows that never hit are the back-off's",
	  test_full_pool_weighs_hits },
	{ "a spec standing aside comes back when its sample pays, and a flip doubles the evidence",
	  test_aside_resumes_on_sample },
	{ "with a full pool the sample's hits bring it back", test_aside_full_pool_sample_hits },
	{ "while the pool captures, a window weighs the hash; once rows come back, the whole host time",
	  test_captures_weigh_the_hash },
	{ "a retired pool's ledger stands aside no more, and flips are counted per ledger",
	  test_retire_and_flips_per_ledger },
	{ "samples without a newer link keep the verdict of the first copies", test_sample_keeps_verdict_without_news },
	{ "a sample's hash and look-up correct a prior the first copies inflated, not a window's host time",
	  test_sample_cost_corrects_prior },
	{ "VRAMPOOL_LEDGER=force keeps the verdict and pools", test_force_keeps_verdict },
	{ "the calls layer lets one copy in LEDGER_SAMPLE_EVERY of a spec standing aside through",
	  test_board_skip },
	{ "the clock reads wall and CPU time, fake or real", test_fake_clock },
	{ "a thread reads its CPU clock on its first copies and one in LEDGER_CPU_EVERY after, and scales the others",
	  test_cpu_clock_sampled },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "ledger",
	.clean = t_clean,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
