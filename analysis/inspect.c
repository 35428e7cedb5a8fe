/*
 * inspect.c: `vrampool inspect FILE...`, will a program's host-to-device
 * copies be seen by the preloaded library?
 *
 * A preloaded object sees a call when the call goes through the dynamic
 * linker. There are three routes, and this command names the one a file
 * takes: it imports the copies from a shared libcudart (cudaMemcpy*); it
 * imports them from the driver (cuMemcpyHtoD*); or it reaches the driver's
 * entry points itself, with dlopen("libcuda.so.1") and dlsym, then
 * cuGetProcAddress, which is what a statically linked runtime (nvcc's
 * default) does, and which the shim interposes too. What stays out of
 * reach: a statically linked executable (no dynamic linker, so no preload),
 * a runtime carried inside a file that imports no dlsym, copy entry points
 * the shim does not interpose, and the copies an NVIDIA library (cuBLAS,
 * cuDNN, cuFFT) makes inside itself through a runtime or driver route of
 * its own, over NVIDIA's private interfaces (the README's "What the shim
 * does not touch"): a program of yours with nvcc's static runtime takes the
 * driver entry points and is seen; a vendor library doing the same is not
 * counted on.
 *
 * The facts of each file come from elf_facts.c (libelf), each file's
 * verdict from inspect_verdict.c, the files from loader.c (ld.so's search
 * order, $PATH, #!, pyenv); this file walks the DT_NEEDED closure of each
 * file of the command line (each object once, bounded depth), folds the
 * verdicts into one for that file (the exit status is the worst of them),
 * and words the advice for the file it is about:
 * a program of yours can be rebuilt, a vendor library (NVIDIA's) cannot.
 */
#include <elf.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_facts.h"
#include "inspect_verdict.h"
#include "loader.h"
#include "options.h"
#include "vrampool.h"

#define MAX_OBJECTS 1024	/* objects walked per invocation */
#define MAX_DEPTH 32		/* DT_NEEDED nesting */
#define MAX_SCRIPT_HOPS 4	/* #! interpreters that are scripts themselves */

/* A file already walked, and the name it was first met by. */
struct visited {
	dev_t dev;
	ino_t ino;
	char *path;
};

/* The state of one invocation: options, objects seen, results. */
struct walk {
	bool verbose;			/* print every dependency */
	bool follow;			/* walk DT_NEEDED */
	FILE *out;			/* NULL: print nothing */
	struct visited *visited;
	int nvisited;
	struct loader_cache cache;
	int hidden;			/* dependencies with no CUDA use, not printed */
	/* The overall verdict and the files that decided it. */
	enum inspect_verdict best_seen;	/* the most direct route seen, or NONE */
	enum inspect_verdict worst;	/* largest verdict that is not a SEEN kind */
	int nseen, nunseen_runtime;
	bool worst_vendor, worst_program;
	bool unseen_vendor;		/* the first unseen file is an NVIDIA library's own route */
	bool python;			/* an interpreter named python* was inspected */
	char seen_file[PATH_MAX], worst_file[PATH_MAX], unseen_file[PATH_MAX];
	char worst_why[768];
	char named[PATH_MAX];		/* the file of the command line inspected now */
	bool error;
	char error_msg[1024];
};

/* Prints to the walk's output, if it has one. */
static void walk_print(struct walk *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void walk_print(struct walk *w, const char *fmt, ...)
{
	va_list ap;

	if (!w->out)
		return;
	va_start(ap, fmt);
	vfprintf(w->out, fmt, ap);
	va_end(ap);
}

/* Records an error of a file named on the command line (MSG is escaped already). */
static void walk_error(struct walk *w, const char *path, const char *msg)
{
	w->error = true;
	snprintf(w->error_msg, sizeof(w->error_msg), "%s: %s", esc(path), msg);
	if (w->out) {
		fflush(w->out);
		fprintf(stderr, "vrampool inspect: %s\n", w->error_msg);
	}
}

/* Folds the verdict on PATH into the overall one. */
static void walk_note(struct walk *w, const char *path, const struct file_verdict *v)
{
	if (inspect_verdict_seen(v->verdict)) {
		if (!w->nseen++ || v->verdict > w->best_seen) {
			w->best_seen = v->verdict;
			snprintf(w->seen_file, sizeof(w->seen_file), "%s", path);
		}
		return;
	}
	if (v->verdict == INSPECT_STATIC || v->verdict == INSPECT_UNREACHABLE ||
	    v->verdict == INSPECT_VENDOR) {
		if (!w->nunseen_runtime++) {
			snprintf(w->unseen_file, sizeof(w->unseen_file), "%s", path);
			w->unseen_vendor = v->verdict == INSPECT_VENDOR;
		}
	}
	if (v->verdict > w->worst || (v->verdict == w->worst && !w->worst_file[0])) {
		w->worst = v->verdict;
		w->worst_vendor = v->vendor;
		w->worst_program = v->program;
		snprintf(w->worst_file, sizeof(w->worst_file), "%s", path);
		snprintf(w->worst_why, sizeof(w->worst_why), "%s", v->why);
	}
}

/*
 * Returns the path the object ST was first walked by, or NULL after
 * marking it walked by PATH.
 */
static const char *walk_visited(struct walk *w, const struct stat *st, const char *path)
{
	struct visited *p;
	int i;

	for (i = 0; i < w->nvisited; i++)
		if (w->visited[i].dev == st->st_dev && w->visited[i].ino == st->st_ino)
			return w->visited[i].path;
	p = realloc(w->visited, (size_t)(w->nvisited + 1) * sizeof(*w->visited));
	if (!p)
		return path;
	w->visited = p;
	p[w->nvisited].dev = st->st_dev;
	p[w->nvisited].ino = st->st_ino;
	p[w->nvisited].path = strdup(path);
	if (!p[w->nvisited].path)
		return path;
	w->nvisited++;
	return NULL;
}

/* Frees what the walk allocated. */
static void walk_release(struct walk *w)
{
	int i;

	loader_cache_release(&w->cache);
	for (i = 0; i < w->nvisited; i++)
		free(w->visited[i].path);
	free(w->visited);
	w->visited = NULL;
	w->nvisited = 0;
}

/*
 * Starts the verdict on the next file of the command line: forgets the
 * files walked and the verdict drawn (a library two programs load counts
 * for each), keeping the options and the search cache.
 */
static void walk_next_file(struct walk *w)
{
	struct loader_cache cache = w->cache;
	bool verbose = w->verbose, follow = w->follow;
	FILE *out = w->out;
	int i;

	for (i = 0; i < w->nvisited; i++)
		free(w->visited[i].path);
	free(w->visited);
	memset(w, 0, sizeof(*w));
	w->cache = cache;
	w->verbose = verbose;
	w->follow = follow;
	w->out = out;
}

/*
 * Reads PATH into F: opens it only if it is a regular file, refuses what is
 * not a non-empty ELF object, and reports the reason in ERR. Returns 0 or a
 * negative errno. SCRIPT receives the interpreter line when PATH is a #!
 * script (then F is left empty and 1 is returned).
 */
static int inspect_read(const char *path, struct elf_facts *f, struct stat *st,
			char *script, size_t script_size, char *err, size_t err_size)
{
	char head[256];
	ssize_t n;
	int fd, ret;

	fd = loader_open_regular(path, st, err, err_size);
	if (fd < 0)
		return fd;
	if (st->st_size == 0) {
		ret = -EINVAL;
		snprintf(err, err_size, "empty file, not an ELF object");
		goto out_close;
	}
	n = pread(fd, head, sizeof(head) - 1, 0);
	if (n < 0) {
		ret = -errno;
		snprintf(err, err_size, "%s", strerror(errno));
		goto out_close;
	}
	head[n] = '\0';
	if (n >= 2 && head[0] == '#' && head[1] == '!') {
		head[strcspn(head, "\n")] = '\0';
		snprintf(script, script_size, "%s", head + 2);
		ret = 1;
		goto out_close;
	}
	if (n >= 8 && memcmp(head, "!<arch>\n", 8) == 0) {
		ret = -EINVAL;
		snprintf(err, err_size,
			 "an ar archive (a static library): inspect the program linked from it");
		goto out_close;
	}
	if (n < 4 || memcmp(head, "\177ELF", 4) != 0) {
		ret = -EINVAL;
		snprintf(err, err_size, "not an ELF object (nor a #! script)");
		goto out_close;
	}
	ret = elf_facts_read(f, fd, st->st_size, err, err_size);
out_close:
	close(fd);
	return ret;
}

static int walk_object(struct walk *w, const char *path, const char *name,
		       const struct loader_chain *up, int depth);

/*
 * Follows the #! script at PATH (interpreter line LINE) to the program that
 * runs it: the real interpreter behind a pyenv shim, the interpreter named
 * on the line, but never a shell (a shell script's CUDA use is in the
 * programs it starts, which cannot be known here). Returns as walk_object.
 */
static int walk_script(struct walk *w, const char *path, const char *line, int depth)
{
	char interp[PATH_MAX], how[PATH_MAX * 2];
	int ret;

	ret = loader_pyenv_resolve(path, interp, sizeof(interp), how, sizeof(how));
	if (ret == 0) {
		walk_print(w, "%s: a pyenv shim that runs %s (%s)\n", esc(path), esc(interp), esc(how));
		return walk_object(w, interp, NULL, NULL, depth + 1);
	}
	if (ret == -ENOENT) {
		walk_error(w, path, esc(how));
		return -ENOENT;
	}
	if (!loader_script_interpreter(line, interp, sizeof(interp))) {
		walk_error(w, path, "a #! script whose interpreter cannot be found");
		return -ENOENT;
	}
	if (loader_is_shell(interp)) {
		char msg[PATH_MAX + 256];

		snprintf(msg, sizeof(msg),
			 "a shell script (run by %s): the shell makes no CUDA call of its own; inspect the program the script starts",
			 esc(interp));
		walk_error(w, path, msg);
		return -EINVAL;
	}
	walk_print(w, "%s: a script run by %s\n", esc(path), esc(interp));
	return walk_object(w, interp, NULL, NULL, depth + 1);
}

/* The directory of the object at PATH (its real one for a file of the command line). */
static void object_origin(const char *path, bool named, char *origin, size_t size)
{
	char real[PATH_MAX];
	char *slash;

	if (named && realpath(path, real))
		snprintf(origin, size, "%s", real);
	else
		snprintf(origin, size, "%s", path);
	slash = strrchr(origin, '/');
	if (slash && slash != origin)
		*slash = '\0';
	else
		snprintf(origin, size, "%s", slash ? "/" : ".");
}

/*
 * Walks the object at PATH (named NAME by its loader, or NULL for a file of
 * the command line) and its dependencies. Returns 0, or a negative errno when
 * a file of the command line cannot be inspected.
 */
static int walk_object(struct walk *w, const char *path, const char *name,
		       const struct loader_chain *up, int depth)
{
	struct elf_facts f;
	struct file_verdict v;
	struct loader_chain me;
	struct stat st;
	char err[512], script[256], dep[PATH_MAX], origin[PATH_MAX];
	const char *first, *base;
	int ret, i;

	memset(&f, 0, sizeof(f));
	if (name && stat(path, &st) == 0 && walk_visited(w, &st, path))
		return 0;
	ret = inspect_read(path, &f, &st, script, sizeof(script), err, sizeof(err));
	if (ret == 1) {
		if (name || depth >= MAX_SCRIPT_HOPS) {
			walk_print(w, "  %s: a script, not loadable\n", esc(path));
			return 0;
		}
		return walk_script(w, path, script, depth);
	}
	if (ret < 0) {
		if (!name) {
			walk_error(w, path, esc(err));
			return ret;
		}
		walk_print(w, "  %s => %s: cannot inspect: %s\n", esc(name), esc(path), esc(err));
		return 0;
	}
	if (!name && (first = walk_visited(w, &st, path)) != NULL) {
		walk_print(w, "%s: the same file as %s (inspected above)\n", esc(path), esc(first));
		goto out_release;
	}
	file_verdict_decide(&v, path, &f);
	base = strrchr(path, '/');
	if (!name && strncmp(base ? base + 1 : path, "python", 6) == 0)
		w->python = true;
	walk_note(w, path, &v);
	if (!name)
		walk_print(w, "%s: %s\n", esc(path), esc(v.why));
	else if (w->verbose || v.verdict != INSPECT_NONE)
		walk_print(w, "  %s => %s: %s\n", esc(name), esc(path), esc(v.why));
	else
		w->hidden++;
	if (!w->follow || depth >= MAX_DEPTH || w->nvisited >= MAX_OBJECTS)
		goto out_release;
	object_origin(path, !name, origin, sizeof(origin));
	me.rpath = f.has_rpath && !f.has_runpath ? f.rpath : NULL;
	me.origin = origin;
	me.up = up;
	for (i = 0; i < f.nneeded; i++) {
		if (!loader_resolve(&w->cache, f.needed[i], &f, origin, up, dep, sizeof(dep))) {
			walk_print(w, "  %s: not found\n", esc(f.needed[i]));
			continue;
		}
		walk_object(w, dep, f.needed[i], &me, depth + 1);
	}
out_release:
	elf_facts_release(&f);
	return 0;
}

/* The route of a SEEN verdict, in words. */
static const char *seen_route(enum inspect_verdict v)
{
	switch (v) {
	case INSPECT_SEEN:
		return "the shared CUDA runtime";
	case INSPECT_SEEN_DRIVER:
		return "the CUDA driver API";
	default:
		return "the driver entry points, with dlopen, dlsym and cuGetProcAddress";
	}
}

/* Prints the advice for the not-seen verdict of the walk, fitted to the file. */
static void walk_advice(struct walk *w, FILE *out)
{
	const char *file = esc(w->worst_file);

	switch (w->worst) {
	case INSPECT_UNREACHABLE:
		fprintf(out, "advice: link %s dynamically (without -static): a preloaded library needs the dynamic linker.\n",
			file);
		break;
	case INSPECT_VENDOR:
	case INSPECT_STATIC:
		if (w->worst_vendor)
			fprintf(out, "advice: %s is a vendor library (NVIDIA's): there is nothing to rebuild; copies it makes inside itself are not seen, copies your program makes through the shared runtime or the driver are.\n",
				file);
		else
			fprintf(out, "advice: if %s is your %s, rebuild it with `nvcc -cudart shared` (or link with -lcudart, not -lcudart_static), or let it import dlsym.\n",
				file, w->worst_program ? "program" : "library");
		break;
	case INSPECT_OTHER:
		if (!w->worst_vendor)
			fprintf(out, "advice: vrampool sees host-to-device copies made with cudaMemcpy, cudaMemcpyAsync, cudaMemcpy2D*, cudaMemcpyBatchAsync and the driver's cuMemcpyHtoD*, cuMemcpy*; other copy functions pass untouched.\n");
		break;
	default:
		break;
	}
}

/*
 * FILE, escaped, for a verdict on the file named on the command line:
 * "FILE", "FILE and others", and ", used by NAMED" after either when FILE
 * is another (a library it loads, the interpreter of a script). Valid
 * until the next call.
 */
static const char *walk_shown(const struct walk *w, const char *file, bool others)
{
	static char buf[3 * PATH_MAX];
	bool same = !w->named[0] || strcmp(file, w->named) == 0;

	snprintf(buf, sizeof(buf), "%s%s%s%s", esc(file), others ? " and others" : "",
		 same ? "" : ", used by ", same ? "" : esc(w->named));
	return buf;
}

/* Prints the verdict on the file named on the command line and returns the exit status it means. */
static int walk_conclude(struct walk *w, FILE *out)
{
	if (w->nseen) {
		fprintf(out, "verdict: seen: host-to-device copies made through %s (%s) will be seen by vrampool.\n",
			seen_route(w->best_seen), walk_shown(w, w->seen_file, w->nseen > 1));
		if (w->nunseen_runtime)
			fprintf(out, "note: copies made inside %s are not seen: %s.\n",
				walk_shown(w, w->unseen_file, w->nunseen_runtime > 1),
				w->unseen_vendor ?
				"an NVIDIA library with its own CUDA runtime or driver route over private interfaces" :
				"it carries its own CUDA runtime with no route to the driver's entry points");
		return TOOL_EXIT_OK;
	}
	switch (w->worst) {
	case INSPECT_UNREACHABLE:
		fprintf(out, "verdict: not seen: %s is statically linked, so no preloaded library is ever loaded into it.\n",
			walk_shown(w, w->worst_file, false));
		break;
	case INSPECT_STATIC:
		fprintf(out, "verdict: not seen: %s carries the CUDA runtime inside itself and has no route to the driver's entry points that vrampool interposes.\n",
			walk_shown(w, w->worst_file, false));
		break;
	case INSPECT_VENDOR:
		fprintf(out, "verdict: not seen: %s is an NVIDIA library with a CUDA runtime or driver route of its own: the copies it makes inside itself are not seen by vrampool.\n",
			walk_shown(w, w->worst_file, false));
		break;
	case INSPECT_DRIVER:
		fprintf(out, "verdict: not seen: %s is %s; inspect the program that uses it.\n",
			walk_shown(w, w->worst_file, false), strstr(w->worst_why, "stub") ? "the CUDA driver (a stub)" :
			"the CUDA driver");
		break;
	case INSPECT_PROVIDER:
		fprintf(out, "verdict: not seen: %s is the CUDA runtime (or an interposer); inspect the program that uses it.\n",
			walk_shown(w, w->worst_file, false));
		break;
	case INSPECT_OTHER:
		fprintf(out, "verdict: not seen: %s uses CUDA but none of the copy entry points vrampool interposes.\n",
			walk_shown(w, w->worst_file, false));
		break;
	default:
		fprintf(out, "verdict: not seen: no CUDA use found in %s. A program that loads CUDA at run time with dlopen (Python with PyTorch) is not covered: inspect the libraries it loads, e.g. `vrampool inspect .../site-packages/torch/lib/*.so`%s.\n",
			walk_shown(w, w->worst_file, false), w->python ? " (their copies are seen when they import the shared runtime)" : "");
		break;
	}
	walk_advice(w, out);
	return TOOL_EXIT_NOT_SEEN;
}

/* A file of the command line, inspected, and its exit status. */
struct named_file {
	dev_t dev;
	ino_t ino;
	char *path;
	int status;
};

/*
 * Inspects PATH, a file of the command line, and prints its verdict: its
 * own, never one shared with the files before it. A second name for a
 * file already named (NAMED, N of them) is said to be that file, with its
 * status. Returns the exit status of this file: 0 seen, 1 not seen, 2 error.
 */
static int inspect_named(struct walk *w, const char *path, struct named_file *named, int *n)
{
	struct stat st;
	int i, status;

	if (stat(path, &st) == 0)
		for (i = 0; i < *n; i++)
			if (named[i].dev == st.st_dev && named[i].ino == st.st_ino) {
				printf("%s: the same file as %s (inspected above)\n", esc(path),
				       esc(named[i].path));
				return named[i].status;
			}
	walk_next_file(w);
	snprintf(w->named, sizeof(w->named), "%s", path);
	walk_object(w, path, NULL, NULL, 0);
	if (w->hidden)
		printf("  (%d more librar%s with no CUDA use; -v lists them)\n",
		       w->hidden, w->hidden == 1 ? "y" : "ies");
	status = w->error ? TOOL_EXIT_ERROR : walk_conclude(w, stdout);
	if (stat(path, &st) == 0 && (named[*n].path = strdup(path)) != NULL) {
		named[*n].dev = st.st_dev;
		named[*n].ino = st.st_ino;
		named[(*n)++].status = status;
	}
	return status;
}

void inspect_usage(FILE *out)
{
	fprintf(out,
		"usage: vrampool inspect [-v] [--no-deps] FILE...\n"
		"\n"
		"Tells whether the host-to-device copies of each program or shared\n"
		"library will be seen by the preloaded vrampool library, and by which\n"
		"route: copies imported from a shared libcudart (cudaMemcpy*), from the\n"
		"driver (cuMemcpyHtoD*), or the driver's entry points reached with\n"
		"dlopen + dlsym (a statically linked runtime). Follows DT_NEEDED as the\n"
		"dynamic linker does, a #! script's interpreter and a pyenv shim's\n"
		"Python. A FILE without a slash that does not exist is looked up in\n"
		"$PATH. Only regular files are opened.\n"
		"\n"
		"  -v, --verbose   list every dependency, also those with no CUDA use\n"
		"      --no-deps   inspect the named files only\n"
		"\n"
		"Each FILE gets its own verdict. Exit status: the worst of them, 0 seen,\n"
		"1 not seen, 2 error (bad usage, unreadable input).\n");
}

int inspect_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "no-deps", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct walk w;
	struct named_file *named;
	char path[PATH_MAX], err[256];
	int c, i, nnamed = 0, file_status, status = TOOL_EXIT_OK;

	memset(&w, 0, sizeof(w));
	w.follow = true;
	w.out = stdout;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:vh", options, NULL)) != -1) {
		switch (c) {
		case 'v':
			w.verbose = true;
			break;
		case 'n':
			w.follow = false;
			break;
		case 'h':
			inspect_usage(stdout);
			return TOOL_EXIT_OK;
		default:
			return tool_option_error("inspect", options, c, argc, argv);
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "vrampool inspect: no file named (vrampool help inspect)\n");
		return TOOL_EXIT_ERROR;
	}
	if (elf_facts_init(err, sizeof(err)) != 0) {
		fprintf(stderr, "vrampool inspect: %s\n", err);
		return TOOL_EXIT_ERROR;
	}
	named = calloc((size_t)(argc - optind), sizeof(*named));
	if (!named) {
		fprintf(stderr, "vrampool inspect: out of memory\n");
		return TOOL_EXIT_ERROR;
	}
	for (i = optind; i < argc; i++) {
		snprintf(path, sizeof(path), "%s", argv[i]);
		if (!strchr(argv[i], '/') && access(argv[i], F_OK) != 0 &&
		    !loader_path_search(argv[i], path, sizeof(path)))
			snprintf(path, sizeof(path), "%s", argv[i]);
		if (i > optind)
			putchar('\n');
		file_status = inspect_named(&w, path, named, &nnamed);
		if (file_status > status)
			status = file_status;
	}
	for (i = 0; i < nnamed; i++)
		free(named[i].path);
	free(named);
	walk_release(&w);
	return status;
}

int inspect_program_verdict(const char *program, char *why, size_t why_size)
{
	struct walk w;
	char path[PATH_MAX];
	int ret;

	memset(&w, 0, sizeof(w));
	w.follow = true;
	if (elf_facts_init(why, why_size) != 0)
		return -EINVAL;
	if (!loader_path_search(program, path, sizeof(path))) {
		snprintf(why, why_size, "%s: not found in PATH", esc(program));
		return -ENOENT;
	}
	ret = walk_object(&w, path, NULL, NULL, 0);
	if (ret < 0) {
		snprintf(why, why_size, "%s", w.error_msg);
		goto out_release;
	}
	if (w.nseen) {
		snprintf(why, why_size, "%s: seen through %s", esc(w.seen_file), seen_route(w.best_seen));
		ret = (int)w.best_seen;
	} else {
		snprintf(why, why_size, "%s: %s", esc(w.worst_file[0] ? w.worst_file : path),
			 w.worst_file[0] ? esc(w.worst_why) : "no CUDA use");
		ret = (int)w.worst;
	}
out_release:
	walk_release(&w);
	return ret;
}
