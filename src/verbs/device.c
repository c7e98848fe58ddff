/* device.c - the device list, opening and closing contexts, and the query verbs. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/engine.h"
#include "verbs/verbs_ops.h"

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct urnic_ibdev ibdevs[URNIC_MAX_DEVICES];
static struct urnic_dev *running[URNIC_MAX_DEVICES];
static int nibdevs = -1;
static pid_t devices_pid;

struct urnic_ibdev *urnic_ibdev_of(struct ibv_device *device)
{
	return container_of(device, struct urnic_ibdev, ibdev);
}

/* The loopback device gives each process its own address in 127.64.0.0/10, from its pid. */
static uint32_t loopback_addr(unsigned attempt)
{
	uint32_t v = ((uint32_t)getpid() + attempt * 0x9e37u) & 0x3fffff;

	return htonl(0x7f400000u | v);
}

static uint64_t guid_for(const struct urnic_dev_config *cfg, int index)
{
	uint32_t addr = cfg->loopback ? loopback_addr(0) : cfg->addr;

	/* a locally administered EUI-64 made of the IPv4 address and the device index */
	return (uint64_t)0x02 << 56 | (uint64_t)ntohl(addr) << 8 | (uint64_t)(index & 0xff);
}

/* Called with devices_lock held. A forked child starts over: its parent's threads are gone. */
static int load_devices(void)
{
	struct urnic_dev_config cfg[URNIC_MAX_DEVICES];
	char err[160];

	if (nibdevs >= 0 && devices_pid == getpid())
		return nibdevs;
	memset(running, 0, sizeof(running));
	int n = urnic_config_load(cfg, URNIC_MAX_DEVICES, err, sizeof(err));

	if (n < 0) {
		fprintf(stderr, "urnic: %s\n", err);
		return n;
	}
	for (int i = 0; i < n; i++) {
		struct urnic_ibdev *d = &ibdevs[i];

		memset(d, 0, sizeof(*d));
		d->cfg = cfg[i];
		d->index = i;
		d->guid = guid_for(&cfg[i], i);
		d->ibdev.node_type = IBV_NODE_CA;
		d->ibdev.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%.15s", cfg[i].name);
		snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", i);
		snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
			 "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
			 "/sys/class/infiniband/%.15s", cfg[i].name);
	}
	nibdevs = n;
	devices_pid = getpid();
	return n;
}

URNIC_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	pthread_mutex_lock(&devices_lock);
	int n = load_devices();
	struct ibv_device **list = n >= 0 ? calloc((size_t)n + 1, sizeof(*list)) : NULL;

	for (int i = 0; list && i < n; i++)
		list[i] = &ibdevs[i].ibdev;
	pthread_mutex_unlock(&devices_lock);
	if (!list) {
		errno = n < 0 ? -n : ENOMEM;
		if (num_devices)
			*num_devices = 0;
		return NULL;
	}
	if (num_devices)
		*num_devices = n;
	return list;
}

URNIC_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

URNIC_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

URNIC_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return urnic_ibdev_of(device)->index;
}

/* ---------------- running devices ---------------- */

static int active_mtu_for(uint32_t addr)
{
	struct ifaddrs *ifa, *i;
	int mtu = 65536;

	if (getifaddrs(&ifa) == 0) {
		for (i = ifa; i; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
			    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr != addr)
				continue;
			struct ifreq ifr = {0};
			int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

			snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->ifa_name);
			if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &ifr) == 0)
				mtu = ifr.ifr_mtu;
			if (fd >= 0)
				close(fd);
			break;
		}
		freeifaddrs(ifa);
	}
	/* room for IPv4, UDP, the largest IB headers and the ICRC */
	int room = mtu - 20 - 8 - URNIC_MAX_HDR_LEN - URNIC_ICRC_LEN;

	for (int m = URNIC_MAX_MTU_ENUM; m > IBV_MTU_256; m--)
		if ((int)urnic_mtu_bytes(m) <= room)
			return m;
	return IBV_MTU_256;
}

static void register_at_exit(void);

static void stats_open(struct urnic_dev *dev)
{
	size_t sz = sizeof(struct urnic_stats_file);
	int fd;

	snprintf(dev->stats_path, sizeof(dev->stats_path), "/dev/shm/urnic-%d-%s.stats",
		 (int)getpid(), dev->ibdev->cfg.name);
	fd = open(dev->stats_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0 && ftruncate(fd, (off_t)sz) == 0)
		dev->stats = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (!dev->stats || dev->stats == MAP_FAILED) {
		/* no /dev/shm: count anyway, privately */
		dev->stats_path[0] = 0;
		dev->stats = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
				  0);
	}
	memset(dev->stats, 0, sz);
	dev->stats->version = URNIC_STATS_VERSION;
	dev->stats->pid = (uint32_t)getpid();
	snprintf(dev->stats->dev_name, sizeof(dev->stats->dev_name), "%s", dev->ibdev->cfg.name);
	dev->stats->addr = dev->addr;
	dev->stats->counter_count = URNIC_C_COUNT;
	dev->stats->qp_slots = URNIC_STATS_QP_SLOTS;
	dev->stats->shard_count = URNIC_STATS_SHARDS;
	static pthread_once_t at_exit_once = PTHREAD_ONCE_INIT;

	pthread_once(&at_exit_once, register_at_exit);
	atomic_thread_fence(memory_order_release);
	dev->stats->magic = URNIC_STATS_MAGIC;
}

/* URNIC_STATS_DUMP=1: the device's non-zero counters on stderr when it closes. */
static void stats_dump(const struct urnic_dev *dev)
{
	const char *v = getenv("URNIC_STATS_DUMP");
	uint64_t c[URNIC_C_COUNT];

	if (!v || !*v || *v == '0')
		return;
	urnic_stats_fold(dev->stats, c);
	fprintf(stderr, "urnic: %s (pid %d) counters:", dev->ibdev->cfg.name, (int)getpid());
	for (int i = 0; i < URNIC_C_COUNT; i++)
		if (c[i])
			fprintf(stderr, " %s=%llu", urnic_counter_names[i], (unsigned long long)c[i]);
	fputc('\n', stderr);
}

/* A process may exit without closing its devices: what is still open sends the ACKs it owes
 * (urnic_engine_flush_acks) and dumps its counters. */
static void devices_at_exit(void);

static void register_at_exit(void)
{
	atexit(devices_at_exit);
}

static void devices_at_exit(void)
{
	for (int i = 0; i < URNIC_MAX_DEVICES; i++)
		if (running[i] && devices_pid == getpid()) {
			/* a peer's request this process saw complete is acknowledged */
			urnic_engine_flush_acks(running[i]);
			stats_dump(running[i]);
		}
}

static void stats_close(struct urnic_dev *dev)
{
	stats_dump(dev);
	munmap(dev->stats, sizeof(struct urnic_stats_file));
	if (dev->stats_path[0])
		unlink(dev->stats_path);
}

static int open_net(struct urnic_dev *dev)
{
	if (!dev->ibdev->cfg.loopback) {
		dev->addr = dev->ibdev->cfg.addr;
		return urnic_net_open(&dev->net, dev->addr);
	}
	for (unsigned attempt = 0; attempt < 64; attempt++) {
		dev->addr = loopback_addr(attempt);
		int err = urnic_net_open(&dev->net, dev->addr);

		if (err != -EADDRINUSE)
			return err;
	}
	return -EADDRINUSE;
}

static void dev_free(struct urnic_dev *dev)
{
	free(dev->qp_table);
	free(dev->qps);
	free(dev->mr_buckets);
	pthread_mutex_destroy(&dev->qp_lock);
	pthread_rwlock_destroy(&dev->mr_lock);
	free(dev);
}

static int dev_start(struct urnic_ibdev *ibdev, struct urnic_dev **out)
{
	struct urnic_dev *dev = calloc(1, sizeof(*dev));
	int err;

	if (!dev)
		return -ENOMEM;
	dev->ibdev = ibdev;
	pthread_mutex_init(&dev->qp_lock, NULL);
	pthread_rwlock_init(&dev->mr_lock, NULL);
	dev->qp_table = calloc(URNIC_MAX_QP, sizeof(*dev->qp_table));
	dev->qps = calloc(URNIC_MAX_QP, sizeof(*dev->qps));
	dev->mr_buckets = calloc(4096, sizeof(*dev->mr_buckets));
	if (!dev->qp_table || !dev->qps || !dev->mr_buckets) {
		dev_free(dev);
		return -ENOMEM;
	}
	err = open_net(dev);
	if (err) {
		dev_free(dev);
		return err;
	}
	dev->active_mtu = active_mtu_for(dev->addr);
	urnic_gid_from_ipv4(dev->addr, &dev->gid);
	stats_open(dev);
	dev->net.stats = dev->stats;
	err = urnic_engine_start(dev);
	if (err) {
		stats_close(dev);
		urnic_net_close(&dev->net);
		dev_free(dev);
		return err;
	}
	*out = dev;
	return 0;
}

int urnic_dev_get(struct urnic_ibdev *ibdev, struct urnic_dev **out)
{
	int err = 0;

	pthread_mutex_lock(&devices_lock);
	if (load_devices() < 0) {
		err = -ENODEV;
	} else if (!running[ibdev->index]) {
		err = dev_start(ibdev, &running[ibdev->index]);
	}
	if (!err) {
		running[ibdev->index]->refcnt++;
		*out = running[ibdev->index];
	}
	pthread_mutex_unlock(&devices_lock);
	return err;
}

void urnic_dev_put(struct urnic_dev *dev)
{
	pthread_mutex_lock(&devices_lock);
	if (--dev->refcnt == 0) {
		running[dev->ibdev->index] = NULL;
		urnic_engine_stop(dev);
		stats_close(dev);
		urnic_net_close(&dev->net);
		dev_free(dev);
	}
	pthread_mutex_unlock(&devices_lock);
}

/* ---------------- contexts ---------------- */

URNIC_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct urnic_context *uctx = calloc(1, sizeof(*uctx));
	int fds[2], err;

	if (!uctx) {
		errno = ENOMEM;
		return NULL;
	}
	err = urnic_dev_get(urnic_ibdev_of(device), &uctx->dev);
	if (err) {
		free(uctx);
		errno = -err;
		return NULL;
	}
	if (pipe2(fds, O_CLOEXEC) != 0) {
		err = errno;
		urnic_dev_put(uctx->dev);
		free(uctx);
		errno = err;
		return NULL;
	}
	struct ibv_context *ctx = &uctx->vctx.context;

	ctx->device = device;
	ctx->cmd_fd = -1;
	ctx->async_fd = fds[0];
	uctx->async_wfd = fds[1];
	fcntl(uctx->async_wfd, F_SETFL, O_NONBLOCK); /* the engine must never block on it */
	ctx->num_comp_vectors = URNIC_NUM_COMP_VECTORS;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	urnic_verbs_set_ops(uctx);
	return ctx;
}

URNIC_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct urnic_context *uctx = to_uctx(context);

	close(context->async_fd);
	close(uctx->async_wfd);
	urnic_dev_put(uctx->dev);
	pthread_mutex_destroy(&context->mutex);
	free(uctx);
	return 0;
}

/* ---------------- queries ---------------- */

URNIC_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a)
{
	struct urnic_ibdev *d = urnic_ibdev_of(context->device);

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", URNIC_FW_VER);
	a->node_guid = htobe64(d->guid);
	a->sys_image_guid = htobe64(d->guid);
	a->max_mr_size = URNIC_MAX_MR_SIZE;
	a->page_size_cap = URNIC_PAGE_SIZE_CAP;
	a->vendor_id = URNIC_VENDOR_ID;
	a->vendor_part_id = URNIC_VENDOR_PART_ID;
	a->hw_ver = URNIC_HW_VER;
	a->max_qp = URNIC_MAX_QP;
	a->max_qp_wr = URNIC_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	a->max_sge = URNIC_MAX_SGE;
	a->max_sge_rd = URNIC_MAX_SGE;
	a->max_cq = URNIC_MAX_CQ;
	a->max_cqe = URNIC_MAX_CQE;
	a->max_mr = URNIC_MAX_MR;
	a->max_pd = URNIC_MAX_PD;
	a->max_qp_rd_atom = URNIC_MAX_QP_RD_ATOM;
	a->max_qp_init_rd_atom = URNIC_MAX_QP_RD_ATOM;
	a->max_res_rd_atom = URNIC_MAX_QP * URNIC_MAX_QP_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = URNIC_MAX_AH;
	a->max_srq = URNIC_MAX_SRQ;
	a->max_srq_wr = URNIC_MAX_QP_WR;
	a->max_srq_sge = URNIC_MAX_SGE;
	a->max_pkeys = URNIC_PORT_PKEY_TBL_LEN;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	return 0;
}

static int fill_port_attr(struct ibv_context *context, uint8_t port, struct ibv_port_attr *a,
			  size_t len)
{
	struct ibv_port_attr full = {0};

	if (port != 1)
		return EINVAL;
	full.state = IBV_PORT_ACTIVE;
	full.max_mtu = URNIC_MAX_MTU_ENUM;
	full.active_mtu = (enum ibv_mtu)ctx_dev(context)->active_mtu;
	full.gid_tbl_len = URNIC_PORT_GID_TBL_LEN;
	full.max_msg_sz = URNIC_MAX_MSG_SIZE;
	full.pkey_tbl_len = URNIC_PORT_PKEY_TBL_LEN;
	full.active_width = 1;  /* 1X */
	full.active_speed = 4;  /* QDR: urnic makes no claim about its speed */
	full.phys_state = 5;    /* LinkUp */
	full.link_layer = IBV_LINK_LAYER_ETHERNET;
	memcpy(a, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

/* The extended form the header's inline ibv_query_port calls through verbs_context. */
int urnic_query_port_ex(struct ibv_context *context, uint8_t port, struct ibv_port_attr *a,
			size_t len)
{
	return fill_port_attr(context, port, a, len);
}

/* The exported symbol takes rdma-core's older, shorter port attribute struct. */
#undef ibv_query_port
URNIC_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port,
				struct _compat_ibv_port_attr *a)
{
	return fill_port_attr(context, port, (struct ibv_port_attr *)(void *)a,
			      offsetof(struct ibv_port_attr, port_cap_flags2));
}

URNIC_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port, int index,
			       union ibv_gid *gid)
{
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*gid = ctx_dev(context)->gid;
	return 0;
}

URNIC_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port, int index,
				__be16 *pkey)
{
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(URNIC_DEFAULT_PKEY);
	return 0;
}

URNIC_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return htobe64(urnic_ibdev_of(device)->guid);
}
