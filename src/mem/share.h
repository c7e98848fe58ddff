/* share.h - registered memory a peer process of this host may read in place: an MR's whole
 * pages, moved onto a memfd at ibv_reg_mr, so that a packet through a shared-memory ring can name
 * its payload by place instead of carrying a copy (net/shm.c). See share.c. */
#ifndef URNIC_SHARE_H
#define URNIC_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where bytes of a shared region are, as a peer finds them: /proc/PID/fd/FD, a memfd named
 * "urnic-mr-SERIAL", at offset off. */
struct urnic_share_ref {
	uint64_t off;
	uint32_t serial;
	int32_t fd;
};

/* The name a shared region's memfd has in /proc/PID/fd links: "/memfd:urnic-mr-NONCE-SERIAL",
 * NONCE this process's (urnic_share_nonce, 16 hex digits), SERIAL the region's. */
#define URNIC_SHARE_NAME "urnic-mr-"

/* At ibv_reg_mr: shares the whole pages inside [addr, addr+len) if they are private anonymous
 * memory (or already shared for another MR) and the intra-host path is on, and if they are
 * URNIC_SHM_REF_MIN bytes or more, or small is true (an MR a peer may reach one-sided: it
 * grants remote access). Returns the region's serial for urnic_share_put, or 0 when the MR stays
 * as it was. */
uint32_t urnic_share_get(void *addr, size_t len, bool small);
/* At ibv_dereg_mr: the last MR over a region gone, its pages are private memory again, with the
 * bytes they held. */
void urnic_share_put(uint32_t serial);
/* 64 random bits of this process's, in its memfds' names: a peer that finds a memfd by fd number
 * through /proc/PID/fd knows it is this process's (PID may name another process in another PID
 * namespace, or a later one). Never 0. */
uint64_t urnic_share_nonce(void);
/* What /proc/PID/fd/FD's link reads for the memfd of region serial of the process whose nonce
 * is nonce: "/memfd:urnic-mr-NONCE-SERIAL (deleted)". The producer checks its own pages by it,
 * the consumer a peer's fd before it opens it. */
void urnic_share_link(char *out, size_t len, uint64_t nonce, uint32_t serial);
/* Whether [p, p+len) lies in one shared region; fills ref if so. */
bool urnic_share_find(const void *p, size_t len, struct urnic_share_ref *ref);

#endif
