/* compat.c - symbols rdma-core's tools import at load time (they are linked with BIND_NOW): GID
 * queries, sysfs helpers, and the extended-QP entry point urnic does not offer yet. */
#include <errno.h>
#include <string.h>

#include "urnic.h"

/* rdma-core's private enum (driver.h), as ibv_devinfo reads it */
enum urnic_gid_type_sysfs {
	URNIC_GID_TYPE_SYSFS_IB_ROCE_V1 = 0,
	URNIC_GID_TYPE_SYSFS_ROCE_V2 = 1,
};

URNIC_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				    unsigned int index, enum urnic_gid_type_sysfs *type)
{
	if (port_num != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*type = URNIC_GID_TYPE_SYSFS_ROCE_V2;
	return 0;
}

URNIC_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				   uint32_t gid_index, struct ibv_gid_entry *entry, uint32_t flags,
				   size_t entry_size)
{
	struct ibv_gid_entry e = {0};

	if (flags || entry_size < sizeof(e))
		return EINVAL;
	if (port_num != 1 || gid_index != 0)
		return ENODATA;
	e.gid = ctx_dev(context)->gid;
	e.gid_index = 0;
	e.port_num = 1;
	e.gid_type = IBV_GID_TYPE_ROCE_V2;
	e.ndev_ifindex = 0;
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/* urnic has no sysfs presence: every read fails as for an absent file. */
URNIC_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	errno = ENOENT;
	return -1;
}

URNIC_EXPORT int ibv_get_sysfs_path(char *buf, size_t size)
{
	errno = ENOENT;
	return -1;
}

/* The ibv_wr_* send API needs struct ibv_qp_ex; not offered yet. */
URNIC_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	errno = EOPNOTSUPP;
	return NULL;
}
