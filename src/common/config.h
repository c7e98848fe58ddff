/* config.h - which urnic devices exist: URNIC_ADDR, the config file, or the loopback device. */
#ifndef URNIC_CONFIG_H
#define URNIC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define URNIC_MAX_DEVICES 16

struct urnic_dev_config {
	char name[16];   /* "urnic0", "urnic1", ... in order */
	bool loopback;   /* per-process address in 127.64.0.0/10, chosen when the device opens */
	uint32_t addr;   /* IPv4, network order; 0 when loopback */
	char source[96]; /* where it came from, for `urnic devices`: "URNIC_ADDR", "FILE:LINE", "default" */
};

/* Fills devs (at most max) and returns how many, or -errno with a message in err.
 * Order of precedence: URNIC_ADDR=a.b.c.d makes urnic0; then each device line of the config
 * file ($URNIC_CONFIG, else $XDG_CONFIG_HOME/urnic.conf or ~/.config/urnic.conf, else
 * /etc/urnic.conf; a missing file is not an error, a malformed one is); with nothing configured,
 * urnic0 is the loopback device. */
int urnic_config_load(struct urnic_dev_config *devs, int max, char *err, size_t errlen);

/* The path of the config file urnic_config_load reads (may not exist). */
const char *urnic_config_path(char *buf, size_t len);

#endif
