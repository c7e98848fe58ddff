/* urnic.c - the `urnic` command: run programs on urnic, list its devices, show live counters. */
#include "common/config.h"
#include "common/stats.h"

#include <infiniband/verbs.h> /* enum ibv_qp_state and ibv_qp_type only; nothing is linked */

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef URNIC_VERSION
#define URNIC_VERSION "unknown"
#endif

#define EXIT_USAGE 2
#define EXIT_NOEXEC 126
#define EXIT_NOTFOUND 127
#define LIB_NAME "libibverbs.so.1"
#define SHM_DIR "/dev/shm"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *args;
	const char *summary;
};

static int cmd_exec(int argc, char **argv);
static int cmd_devices(int argc, char **argv);
static int cmd_stats(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct command commands[] = {
    {"exec", cmd_exec, "[--] PROGRAM [ARGS...]", "run PROGRAM with urnic's libibverbs"},
    {"devices", cmd_devices, "[--json]", "list the configured devices"},
    {"stats", cmd_stats, "[DEVICE] [--json] [--qp] [-a] [-v]",
     "show the counters of running processes"},
    {"help", cmd_help, "[COMMAND]", "show this help, or one command's"},
    {"version", cmd_version, "", "print urnic's version"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void warn(const char *fmt, ...)
{
	va_list ap;

	fputs("urnic: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- help ---- */

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: urnic COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-8s %-36s %s\n", commands[i].name, commands[i].args,
			commands[i].summary);
	fprintf(f, "\nenvironment: URNIC_ADDR, URNIC_CONFIG; see urnic(1)\n");
}

static void command_usage(FILE *f, const struct command *c)
{
	fprintf(f, "usage: urnic %s%s%s\n  %s\n", c->name, *c->args ? " " : "", c->args,
		c->summary);
}

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "urnic %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	command_usage(stderr, find_command(cmd));
	return EXIT_USAGE;
}

static int cmd_help(int argc, char **argv)
{
	const struct command *c;

	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	c = find_command(argv[1]);
	if (!c)
		return usage_error("help", "unknown command '%s'", argv[1]);
	command_usage(stdout, c);
	return 0;
}

static int cmd_version(int argc, char **argv)
{
	if (argc > 1)
		return usage_error("version", "unexpected '%s'", argv[1]);
	printf("urnic %s\n", URNIC_VERSION);
	return 0;
}

/* ---- options shared by devices and stats ---- */

struct options {
	bool json, qp, all, verbose;
	const char *device;
};

static const struct option long_options[] = {
    {"json", no_argument, NULL, 'j'}, {"qp", no_argument, NULL, 'q'},
    {"all", no_argument, NULL, 'a'},  {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
};

static int bad_option(const char *cmd, const char *arg)
{
	if (optopt)
		return usage_error(cmd, "unknown option '-%c'", optopt);
	return usage_error(cmd, "unknown option '%s'", arg);
}

/* Parses argv (argv[0] is the command) with the short options in `allowed`; at most `max_pos`
 * positional arguments, the first of which becomes o->device. Returns -1 when done, else an exit
 * code. */
static int parse_options(int argc, char **argv, const char *allowed, int max_pos, struct options *o)
{
	int c, npos;

	opterr = 0;
	optind = 1;
	while ((optopt = 0, c = getopt_long(argc, argv, allowed, long_options, NULL)) != -1) {
		if (c != 'h' && c != '?' && strchr(allowed, c) == NULL)
			c = '?'; /* a long option this command does not take */
		switch (c) {
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->qp = true;
			break;
		case 'a':
			o->all = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			command_usage(stdout, find_command(argv[0]));
			return 0;
		default:
			return bad_option(argv[0], argv[optind - 1]);
		}
	}
	npos = argc - optind;
	if (npos > max_pos)
		return usage_error(argv[0], "unexpected '%s'", argv[optind + max_pos]);
	if (npos > 0)
		o->device = argv[optind];
	return -1;
}

/* ---- JSON output ---- */

struct json {
	FILE *f;
	int depth;
	bool need_comma;
};

static void json_string(struct json *j, const char *s)
{
	fputc('"', j->f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(j->f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", j->f);
		else if (*p == '\t')
			fputs("\\t", j->f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(j->f, "\\u%04x", *p);
		else
			fputc(*p, j->f);
	}
	fputc('"', j->f);
}

/* Starts a value: the comma after its predecessor, a new line, and its key inside objects. */
static void json_key(struct json *j, const char *key)
{
	if (j->need_comma)
		fputc(',', j->f);
	if (j->depth)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	if (key) {
		json_string(j, key);
		fputs(": ", j->f);
	}
	j->need_comma = true;
}

static void json_open(struct json *j, const char *key, char bracket)
{
	json_key(j, key);
	fputc(bracket, j->f);
	j->depth++;
	j->need_comma = false;
}

static void json_close(struct json *j, char bracket)
{
	bool empty = !j->need_comma;

	j->depth--;
	if (!empty)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	fputc(bracket, j->f);
	j->need_comma = true;
	if (j->depth == 0)
		fputc('\n', j->f);
}

static void json_str(struct json *j, const char *key, const char *value)
{
	json_key(j, key);
	if (value)
		json_string(j, value);
	else
		fputs("null", j->f);
}

static void json_u64(struct json *j, const char *key, uint64_t value)
{
	json_key(j, key);
	fprintf(j->f, "%" PRIu64, value);
}

static void json_bool(struct json *j, const char *key, bool value)
{
	json_key(j, key);
	fputs(value ? "true" : "false", j->f);
}

/* ---- exec ---- */

static int canonical_dir(const char *path, char *dir, size_t len)
{
	char *real = realpath(path, NULL);
	const char *use = real ? real : path;
	int rc = 0;

	if (strlen(use) >= len) {
		warn("path too long: %s", use);
		rc = -1;
	} else {
		memcpy(dir, use, strlen(use) + 1);
	}
	free(real);
	return rc;
}

/* The directory holding urnic's libibverbs.so.1: ../lib next to this binary (build tree), then
 * ../lib/urnic (installed). */
static int find_library_dir(char *dir, size_t len)
{
	static const char *const candidates[] = {"../lib", "../lib/urnic"};
	char exe[PATH_MAX], lib[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n < 0) {
		warn("cannot read /proc/self/exe: %s", strerror(errno));
		return -1;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		snprintf(lib, sizeof(lib), "%s/%s/%s", exe, candidates[i], LIB_NAME);
		if (access(lib, R_OK) != 0)
			continue;
		*strrchr(lib, '/') = '\0';
		return canonical_dir(lib, dir, len);
	}
	warn("cannot find urnic's %s in %s/../lib or %s/../lib/urnic", LIB_NAME, exe, exe);
	return -1;
}

static int prepend_library_path(const char *dir)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	size_t len = strlen(dir) + (old ? strlen(old) : 0) + 2;
	char *value = malloc(len);
	int rc;

	if (!value) {
		warn("out of memory");
		return -1;
	}
	if (old && *old)
		snprintf(value, len, "%s:%s", dir, old);
	else
		snprintf(value, len, "%s", dir);
	rc = setenv("LD_LIBRARY_PATH", value, 1);
	free(value);
	if (rc)
		warn("cannot set LD_LIBRARY_PATH: %s", strerror(errno));
	return rc;
}

static int cmd_exec(int argc, char **argv)
{
	char dir[PATH_MAX];
	int first = 1;

	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		command_usage(stdout, find_command("exec"));
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--") == 0)
		first = 2;
	else if (argc > 1 && argv[1][0] == '-')
		return usage_error("exec", "unknown option '%s'", argv[1]);
	if (first >= argc)
		return usage_error("exec", "no PROGRAM given");
	if (find_library_dir(dir, sizeof(dir)) || prepend_library_path(dir))
		return EXIT_FAILURE;
	execvp(argv[first], &argv[first]);
	warn("cannot run '%s': %s", argv[first], strerror(errno));
	return errno == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC;
}

/* ---- devices ---- */

static const char *addr_text(uint32_t addr, char *buf, size_t len)
{
	return inet_ntop(AF_INET, &addr, buf, (socklen_t)len);
}

static void devices_text(const char *path, bool exists, const struct urnic_dev_config *d, int n)
{
	char addr[INET_ADDRSTRLEN];

	printf("config file: %s%s\n\n", path, exists ? "" : " (not found)");
	printf("%-10s %-36s %s\n", "NAME", "ADDRESS", "SOURCE");
	for (int i = 0; i < n; i++)
		printf("%-10s %-36s %s\n", d[i].name,
		       d[i].loopback ? "loopback (per-process 127.64.x.y)"
				     : addr_text(d[i].addr, addr, sizeof(addr)),
		       d[i].source);
}

static void devices_json(const char *path, bool exists, const struct urnic_dev_config *d, int n)
{
	struct json j = {.f = stdout};
	char addr[INET_ADDRSTRLEN];

	json_open(&j, NULL, '{');
	json_open(&j, "config_file", '{');
	json_str(&j, "path", path);
	json_bool(&j, "exists", exists);
	json_close(&j, '}');
	json_open(&j, "devices", '[');
	for (int i = 0; i < n; i++) {
		json_open(&j, NULL, '{');
		json_str(&j, "name", d[i].name);
		json_bool(&j, "loopback", d[i].loopback);
		json_str(&j, "addr",
			 d[i].loopback ? NULL : addr_text(d[i].addr, addr, sizeof(addr)));
		json_str(&j, "source", d[i].source);
		json_close(&j, '}');
	}
	json_close(&j, ']');
	json_close(&j, '}');
}

static int cmd_devices(int argc, char **argv)
{
	struct urnic_dev_config devs[URNIC_MAX_DEVICES];
	struct options o = {0};
	char path[PATH_MAX], err[512];
	int rc = parse_options(argc, argv, "j", 0, &o);
	int n;

	if (rc >= 0)
		return rc;
	urnic_config_path(path, sizeof(path));
	n = urnic_config_load(devs, URNIC_MAX_DEVICES, err, sizeof(err));
	if (n < 0) {
		warn("%s", err);
		return EXIT_FAILURE;
	}
	if (o.json)
		devices_json(path, access(path, F_OK) == 0, devs, n);
	else
		devices_text(path, access(path, F_OK) == 0, devs, n);
	return 0;
}

/* ---- stats ---- */

struct stats_entry {
	unsigned pid;
	char dev[16];
	char path[sizeof(SHM_DIR) + NAME_MAX + 1];
};

/* "urnic-<pid>-<dev>.stats" -> pid and dev; false for any other name. */
static bool parse_stats_name(const char *name, struct stats_entry *e)
{
	static const char suffix[] = ".stats";
	const char *p = name + strlen("urnic-"), *dash, *dot;
	char *end;
	unsigned long pid;

	if (strncmp(name, "urnic-", strlen("urnic-")) != 0 || *p < '1' || *p > '9')
		return false;
	pid = strtoul(p, &end, 10);
	dash = end;
	if (*dash != '-' || pid > INT_MAX)
		return false;
	dot = strrchr(dash, '.');
	if (!dot || strcmp(dot, suffix) != 0 || dot == dash + 1 ||
	    (size_t)(dot - dash - 1) >= sizeof(e->dev))
		return false;
	e->pid = (unsigned)pid;
	memcpy(e->dev, dash + 1, (size_t)(dot - dash - 1));
	e->dev[dot - dash - 1] = '\0';
	snprintf(e->path, sizeof(e->path), "%s/%s", SHM_DIR, name);
	return true;
}

static int compare_entries(const void *a, const void *b)
{
	const struct stats_entry *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->dev, y->dev);
}

/* The stats files in /dev/shm, sorted by pid then device; NULL with *n = 0 when there are none. */
static struct stats_entry *list_stats_files(size_t *n)
{
	struct stats_entry *list = NULL, *grown, e;
	size_t cap = 0;
	struct dirent *de;
	DIR *dir = opendir(SHM_DIR);

	*n = 0;
	if (!dir) {
		warn("cannot open %s: %s", SHM_DIR, strerror(errno));
		return NULL;
	}
	while ((de = readdir(dir))) {
		if (!parse_stats_name(de->d_name, &e))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(list, cap * sizeof(*list));
			if (!grown)
				break;
			list = grown;
		}
		list[(*n)++] = e;
	}
	closedir(dir);
	if (*n)
		qsort(list, *n, sizeof(*list), compare_entries);
	return list;
}

enum read_result { READ_OK, READ_EMPTY, READ_BAD };

/* Copies the live mapping into *s so that the checks and the printout see one snapshot.
 * READ_EMPTY: a file its writer has not sized yet. */
static enum read_result read_stats_file(const struct stats_entry *e, struct urnic_stats_file *s,
					char *why, size_t len)
{
	struct stat st;
	void *map;
	int fd = open(e->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(why, len, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return READ_BAD;
	}
	if ((size_t)st.st_size < sizeof(*s)) {
		snprintf(why, len, "%lld bytes, expected %zu", (long long)st.st_size, sizeof(*s));
		close(fd);
		return st.st_size == 0 ? READ_EMPTY : READ_BAD;
	}
	map = mmap(NULL, sizeof(*s), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		snprintf(why, len, "mmap: %s", strerror(errno));
		return READ_BAD;
	}
	memcpy(s, map, sizeof(*s));
	munmap(map, sizeof(*s));
	return READ_OK;
}

static const char *check_stats(const struct stats_entry *e, struct urnic_stats_file *s, char *why,
			       size_t len)
{
	if (s->magic != URNIC_STATS_MAGIC)
		snprintf(why, len, "bad magic %#" PRIx64, s->magic);
	else if (s->version != URNIC_STATS_VERSION)
		snprintf(why, len, "layout version %u, this urnic reads %u", s->version,
			 URNIC_STATS_VERSION);
	else if (s->counter_count != URNIC_C_COUNT)
		snprintf(why, len, "%u counters, expected %u", s->counter_count, URNIC_C_COUNT);
	else if (s->qp_slots > URNIC_STATS_QP_SLOTS)
		snprintf(why, len, "%u QP slots, at most %u", s->qp_slots, URNIC_STATS_QP_SLOTS);
	else if (s->pid != e->pid)
		snprintf(why, len, "holds pid %u", s->pid);
	else
		return NULL;
	return why;
}

static const char *qp_state_name(uint32_t state)
{
	static const char *const names[] = {
	    [IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
	    [IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",	[IBV_QPS_SQE] = "SQE",
	    [IBV_QPS_ERR] = "ERR",
	};

	return state < sizeof(names) / sizeof(names[0]) && names[state] ? names[state] : "UNKNOWN";
}

static const char *qp_type_name(uint32_t type)
{
	switch (type) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_RAW_PACKET:
		return "RAW_PACKET";
	case IBV_QPT_XRC_SEND:
		return "XRC_SEND";
	case IBV_QPT_XRC_RECV:
		return "XRC_RECV";
	default:
		return "UNKNOWN";
	}
}

static void process_name(unsigned pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	buf[0] = '\0';
	f = fopen(path, "re");
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

static void counters_text(const uint64_t *c, bool all, const char *indent)
{
	bool any = false;

	for (int i = 0; i < URNIC_C_COUNT; i++) {
		if (!c[i] && !all)
			continue;
		printf("%s%-32s %20" PRIu64 "\n", indent, urnic_counter_names[i], c[i]);
		any = true;
	}
	if (!any)
		printf("%s(all counters zero)\n", indent);
}

static void stats_text(const struct urnic_stats_file *s, const struct options *o)
{
	char comm[32], addr[INET_ADDRSTRLEN];
	uint64_t c[URNIC_C_COUNT];

	process_name(s->pid, comm, sizeof(comm));
	printf("%s  pid %u (%s)  addr %s\n", s->dev_name, s->pid, *comm ? comm : "?",
	       addr_text(s->addr, addr, sizeof(addr)));
	urnic_stats_fold(s, c);
	counters_text(c, o->all, "  ");
	for (uint32_t i = 0; o->qp && i < s->qp_slots; i++) {
		const struct urnic_stats_qp *q = &s->qp[i];

		if (!q->qpn)
			continue;
		printf("  qp %u  %s %s  dest qp %u  peer %s\n", q->qpn, qp_type_name(q->type),
		       qp_state_name(q->state), q->dest_qpn,
		       addr_text(q->peer_addr, addr, sizeof(addr)));
		counters_text(q->c, o->all, "    ");
	}
	printf("\n");
}

static void counters_json(struct json *j, const uint64_t *c)
{
	json_open(j, "counters", '{');
	for (int i = 0; i < URNIC_C_COUNT; i++)
		json_u64(j, urnic_counter_names[i], c[i]);
	json_close(j, '}');
}

static void qp_json(struct json *j, const struct urnic_stats_qp *q)
{
	char addr[INET_ADDRSTRLEN];

	json_open(j, NULL, '{');
	json_u64(j, "qpn", q->qpn);
	json_str(j, "type", qp_type_name(q->type));
	json_str(j, "state", qp_state_name(q->state));
	json_u64(j, "dest_qpn", q->dest_qpn);
	json_str(j, "peer_addr", addr_text(q->peer_addr, addr, sizeof(addr)));
	counters_json(j, q->c);
	json_close(j, '}');
}

static void stats_json(struct json *j, const struct urnic_stats_file *s, const struct options *o)
{
	char comm[32], addr[INET_ADDRSTRLEN];
	uint64_t c[URNIC_C_COUNT];

	process_name(s->pid, comm, sizeof(comm));
	urnic_stats_fold(s, c);
	json_open(j, NULL, '{');
	json_u64(j, "pid", s->pid);
	json_str(j, "comm", *comm ? comm : NULL);
	json_str(j, "device", s->dev_name);
	json_str(j, "addr", addr_text(s->addr, addr, sizeof(addr)));
	counters_json(j, c);
	if (o->qp) {
		json_open(j, "qps", '[');
		for (uint32_t i = 0; i < s->qp_slots; i++)
			if (s->qp[i].qpn)
				qp_json(j, &s->qp[i]);
		json_close(j, ']');
	}
	json_close(j, '}');
}

/* Loads one file into *s; false (with a note on stderr where one is due) to skip it. */
static bool load_entry(const struct stats_entry *e, struct urnic_stats_file *s, bool verbose)
{
	enum read_result r;
	char why[128];

	if (kill((pid_t)e->pid, 0) < 0 && errno == ESRCH) {
		if (verbose)
			warn("%s: skipped, process %u has exited", e->path, e->pid);
		return false;
	}
	r = read_stats_file(e, s, why, sizeof(why));
	if (r == READ_OK && !check_stats(e, s, why, sizeof(why))) {
		s->dev_name[sizeof(s->dev_name) - 1] = '\0';
		return true;
	}
	/* An empty file or a zero magic: its writer is still creating it. */
	if (verbose || (r == READ_BAD || (r == READ_OK && s->magic != 0)))
		warn("%s: skipped, %s", e->path, why);
	return false;
}

static int show_stats(const struct stats_entry *list, size_t n, const struct options *o)
{
	struct urnic_stats_file *s = malloc(sizeof(*s));
	struct json j = {.f = stdout};
	int shown = 0;

	if (!s) {
		warn("out of memory");
		return EXIT_FAILURE;
	}
	if (o->json) {
		json_open(&j, NULL, '{');
		json_open(&j, "stats", '[');
	}
	for (size_t i = 0; i < n; i++) {
		if (o->device && strcmp(list[i].dev, o->device) != 0)
			continue;
		if (!load_entry(&list[i], s, o->verbose))
			continue;
		if (o->json)
			stats_json(&j, s, o);
		else
			stats_text(s, o);
		shown++;
	}
	if (o->json) {
		json_close(&j, ']');
		json_close(&j, '}');
	} else if (!shown) {
		printf("no running process has %s open\n",
		       o->device ? o->device : "a urnic device");
	}
	free(s);
	return 0;
}

static int cmd_stats(int argc, char **argv)
{
	struct options o = {0};
	struct stats_entry *list;
	size_t n;
	int rc = parse_options(argc, argv, "jqav", 1, &o);

	if (rc >= 0)
		return rc;
	list = list_stats_files(&n);
	rc = show_stats(list, n, &o);
	free(list);
	return rc;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	const struct command *c;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return cmd_help(1, argv + 1);
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(1, argv + 1);
	c = find_command(argv[1]);
	if (!c) {
		warn("unknown command '%s'", argv[1]);
		usage(stderr);
		return EXIT_USAGE;
	}
	return c->run(argc - 1, argv + 1);
}
