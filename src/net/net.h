/* net.h - the interface between the engine and whatever carries its packets (UDP today). */
#ifndef URNIC_NET_H
#define URNIC_NET_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/param.h"
#include "wire/wire.h"

#define URNIC_TX_MAX_IOV (URNIC_MAX_SGE + 2)
#define URNIC_RX_BUF_LEN (URNIC_MAX_HDR_LEN + 4096 + 8 + URNIC_ICRC_LEN)

/* One outgoing packet: headers in hdr, payload pointing straight into registered memory, pad and
 * ICRC in trailer. The iovecs stay valid until the send call returns. */
struct urnic_txpkt {
	uint32_t daddr; /* network order */
	uint16_t sport_idx;
	uint16_t iovcnt;
	uint32_t len; /* BTH through ICRC */
	uint8_t hdr[URNIC_MAX_HDR_LEN];
	uint8_t trailer[8];
	struct iovec iov[URNIC_TX_MAX_IOV];
};

struct urnic_rxpkt {
	uint32_t saddr, daddr; /* network order */
	uint16_t sport;
	uint32_t len;
	uint8_t *data; /* BTH through ICRC */
};

struct urnic_fault;

struct urnic_net {
	struct urnic_fault *fault; /* NULL unless URNIC_FAULT asks for injection */
	uint32_t addr; /* network order */
	int rx_fd;
	int tx_fd[URNIC_TX_SOCKETS];
	uint16_t tx_port[URNIC_TX_SOCKETS];
	/* receive ring */
	uint8_t *rx_bufs;
	struct iovec rx_iov[URNIC_RX_BATCH];
	struct sockaddr_in rx_from[URNIC_RX_BATCH];
};

int urnic_net_open(struct urnic_net *net, uint32_t addr);
void urnic_net_close(struct urnic_net *net);
/* Sends n packets (batched per source socket). Returns packets handed to the kernel. */
int urnic_net_send(struct urnic_net *net, struct urnic_txpkt *pkts, int n, uint64_t *syscalls);
/* Receives up to URNIC_RX_BATCH packets without blocking; fills out[]; returns the count. */
int urnic_net_recv(struct urnic_net *net, struct urnic_rxpkt *out);
uint16_t urnic_net_sport(const struct urnic_net *net, unsigned idx);

#endif
