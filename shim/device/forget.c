/*
 * forget: what the device layer drops when a context it made handles in
 * is gone, after a device reset (device_forget) and in a fork child
 * (device_atfork_child). Each file of the layer forgets its own state:
 * device.c its retained contexts, batch.c its legacy-stream bridges,
 * module.c its gather kernels, table.c their mapped tables; this file,
 * above them all, names the order.
 */
#include "device/device.h"

#include "device/device_impl.h"

void device_forget(int dev)
{
	if (dev < 0 || dev >= DEVICE_MAX)
		return;
	/* The bridge's stream and events died with the context: drop them. */
	device_bridge_forget(dev);
	device_kernel_forget(dev);
	device_table_forget(dev);
}

void device_atfork_child(void)
{
	/* The parent's primary contexts mean nothing in the child; the driver
	 * itself refuses them. Forget the handles so a child that uses CUDA
	 * retains its own. */
	device_ctx_atfork_child();
	device_bridge_atfork_child();
	device_kernel_atfork_child();
	device_table_atfork_child();
}
