/* config.c - reads which urnic devices exist (URNIC_ADDR, urnic.conf) and names the counters.
 *
 * The config file is line oriented:
 *
 *	# a comment runs from '#' to the end of the line; blank lines are ignored
 *	device urnic1 addr 192.0.2.10
 *	device urnic2 loopback
 *
 * Each `device` line adds one device, in file order, after the urnic0 that URNIC_ADDR makes.
 * NAME is "urnic" and a decimal number without leading zeros; no name may appear twice, and a
 * file line naming URNIC_ADDR's urnic0 is an error. `addr` takes a dotted-quad IPv4 unicast
 * address that no other device uses; `loopback` gives the device a per-process address in
 * 127.64.0.0/10 chosen when it opens. Anything else stops the load with "FILE:LINE: reason".
 *
 * Only libc and the two headers: this file is linked into both the library and the `urnic` tool.
 */
#include "common/config.h"
#include "common/stats.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONF_NAME "urnic.conf"
#define CONF_SYSTEM "/etc/" CONF_NAME
#define CONF_LINE_MAX 1024
#define CONF_MAX_TOKENS 5

const char *const urnic_counter_names[URNIC_C_COUNT] = {
#define URNIC_COUNTER_NAME(id, name) [URNIC_C_##id] = name,
    URNIC_COUNTERS(URNIC_COUNTER_NAME)
#undef URNIC_COUNTER_NAME
};

/* The state of one urnic_config_load call. */
struct loader {
	struct urnic_dev_config *devs;
	int max;
	int n;
	char *err;
	size_t errlen;
	const char *where; /* "FILE:LINE" or "URNIC_ADDR", the prefix of messages */
};

static int fail(struct loader *ld, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct loader *ld, int rc, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ld->err && ld->errlen)
		snprintf(ld->err, ld->errlen, "%s: %s", ld->where, msg);
	return rc;
}

static const char *user_config_path(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	int n;

	if (xdg && *xdg)
		n = snprintf(buf, len, "%s/%s", xdg, CONF_NAME);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.config/%s", home, CONF_NAME);
	else
		return NULL;
	return n >= 0 && (size_t)n < len ? buf : NULL;
}

const char *urnic_config_path(char *buf, size_t len)
{
	const char *env = getenv("URNIC_CONFIG");
	const char *user;

	if (!buf || !len)
		return NULL;
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return buf;
	}
	user = user_config_path(buf, len);
	if (user && access(user, F_OK) == 0)
		return buf;
	snprintf(buf, len, "%s", CONF_SYSTEM);
	return buf;
}

/* Dotted quad only (inet_pton refuses the shorthand forms inet_aton takes), unicast only:
 * 0.0.0.0 means "loopback" in struct urnic_dev_config, and a device cannot own a group address. */
static int parse_ipv4(struct loader *ld, const char *s, uint32_t *addr)
{
	struct in_addr in;
	uint32_t host;

	if (inet_pton(AF_INET, s, &in) != 1)
		return fail(ld, -EINVAL, "bad IPv4 address '%s'", s);
	host = ntohl(in.s_addr);
	if (host == 0 || host == 0xffffffffu || (host >> 28) == 0xe)
		return fail(ld, -EINVAL, "'%s' is not a unicast IPv4 address", s);
	*addr = in.s_addr;
	return 0;
}

static bool valid_name(const char *s)
{
	const char *num = s + strlen("urnic");
	size_t len = strlen(s);

	if (strncmp(s, "urnic", strlen("urnic")) != 0 || !*num)
		return false;
	if (len >= sizeof(((struct urnic_dev_config *)0)->name))
		return false;
	if (num[0] == '0' && num[1])
		return false;
	return strspn(num, "0123456789") == strlen(num);
}

static const struct urnic_dev_config *find_name(const struct loader *ld, const char *name)
{
	for (int i = 0; i < ld->n; i++)
		if (strcmp(ld->devs[i].name, name) == 0)
			return &ld->devs[i];
	return NULL;
}

static const struct urnic_dev_config *find_addr(const struct loader *ld, uint32_t addr)
{
	for (int i = 0; i < ld->n; i++)
		if (!ld->devs[i].loopback && ld->devs[i].addr == addr)
			return &ld->devs[i];
	return NULL;
}

static int add_device(struct loader *ld, const char *name, bool loopback, uint32_t addr)
{
	const struct urnic_dev_config *other;
	struct urnic_dev_config *d;
	char text[INET_ADDRSTRLEN];

	other = find_name(ld, name);
	if (other)
		return fail(ld, -EINVAL, "device %s is already defined by %s", name, other->source);
	other = loopback ? NULL : find_addr(ld, addr);
	if (other) {
		inet_ntop(AF_INET, &addr, text, sizeof(text));
		return fail(ld, -EINVAL, "address %s is already used by %s (%s)", text, other->name,
			    other->source);
	}
	if (ld->n >= ld->max)
		return fail(ld, -E2BIG, "more than %d devices", ld->max);
	d = &ld->devs[ld->n++];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->loopback = loopback;
	d->addr = loopback ? 0 : addr;
	snprintf(d->source, sizeof(d->source), "%s", ld->where);
	return 0;
}

/* Splits a line at blanks, stopping at '#'. Returns the token count or -1 if there are too many. */
static int tokenize(char *line, char **tok, int max)
{
	int n = 0;
	char *save = NULL;

	line[strcspn(line, "#")] = '\0';
	for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
		if (n == max)
			return -1;
		tok[n++] = t;
	}
	return n;
}

/* tok[0] is "device": NAME then "addr A.B.C.D" or "loopback". */
static int parse_device(struct loader *ld, char **tok, int n)
{
	uint32_t addr = 0;
	int used, rc;

	if (n < 2)
		return fail(ld, -EINVAL, "'device' needs a name (urnicN)");
	if (!valid_name(tok[1]))
		return fail(ld, -EINVAL, "bad device name '%s' (expected urnicN)", tok[1]);
	if (n >= 3 && strcmp(tok[2], "loopback") == 0) {
		used = 3;
	} else if (n >= 3 && strcmp(tok[2], "addr") == 0) {
		if (n < 4)
			return fail(ld, -EINVAL, "'addr' needs an IPv4 address");
		rc = parse_ipv4(ld, tok[3], &addr);
		if (rc)
			return rc;
		used = 4;
	} else {
		return fail(ld, -EINVAL, "device %s: expected 'addr A.B.C.D' or 'loopback'%s%s%s",
			    tok[1], n >= 3 ? ", not '" : "", n >= 3 ? tok[2] : "",
			    n >= 3 ? "'" : "");
	}
	if (n > used)
		return fail(ld, -EINVAL, "unexpected '%s' after the device definition", tok[used]);
	return add_device(ld, tok[1], used == 3, addr);
}

static int parse_line(struct loader *ld, char *line)
{
	char *tok[CONF_MAX_TOKENS];
	int n = tokenize(line, tok, CONF_MAX_TOKENS);

	if (n < 0)
		return fail(ld, -EINVAL, "too many words");
	if (n == 0)
		return 0;
	if (strcmp(tok[0], "device") != 0)
		return fail(ld, -EINVAL, "unknown keyword '%s' (expected 'device')", tok[0]);
	return parse_device(ld, tok, n);
}

static int read_lines(struct loader *ld, FILE *f, const char *path)
{
	char where[PATH_MAX + 16];
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;

	errno = 0;
	while (!rc && (len = getline(&line, &cap, f)) >= 0) {
		snprintf(where, sizeof(where), "%s:%d", path, ++lineno);
		ld->where = where;
		if (len > CONF_LINE_MAX)
			rc = fail(ld, -EINVAL, "line longer than %d characters", CONF_LINE_MAX);
		else if (memchr(line, '\0', (size_t)len))
			rc = fail(ld, -EINVAL, "NUL byte in line");
		else
			rc = parse_line(ld, line);
	}
	if (!rc && ferror(f)) {
		ld->where = path;
		rc = fail(ld, errno ? -errno : -EIO, "%s", strerror(errno ? errno : EIO));
	}
	free(line);
	return rc;
}

static int load_file(struct loader *ld)
{
	char path[PATH_MAX];
	FILE *f;
	int rc;

	ld->where = urnic_config_path(path, sizeof(path));
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		return fail(ld, rc, "%s", strerror(-rc));
	}
	rc = read_lines(ld, f, path);
	fclose(f);
	return rc;
}

static int load_env(struct loader *ld)
{
	const char *env = getenv("URNIC_ADDR");
	uint32_t addr = 0;
	int rc;

	if (!env || !*env)
		return 0;
	ld->where = "URNIC_ADDR";
	rc = parse_ipv4(ld, env, &addr);
	if (rc)
		return rc;
	return add_device(ld, "urnic0", false, addr);
}

int urnic_config_load(struct urnic_dev_config *devs, int max, char *err, size_t errlen)
{
	struct loader ld = {
	    .devs = devs, .max = max, .err = err, .errlen = errlen, .where = "urnic_config_load"};
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!devs || max < 1)
		return fail(&ld, -EINVAL, "no room for devices");
	rc = load_env(&ld);
	if (!rc)
		rc = load_file(&ld);
	if (rc)
		return rc;
	if (ld.n == 0) {
		ld.where = "default";
		rc = add_device(&ld, "urnic0", true, 0);
	}
	return rc ? rc : ld.n;
}
