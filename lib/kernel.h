/* kernel: what Linux says about socket buffers and processes. */
#ifndef SMBTUNE_KERNEL_H
#define SMBTUNE_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

/* A number from /proc/sys, e.g. "net/core/rmem_max". */
int kernel_sysctl_long(const char *name, long *v, struct err *e);

/* The three numbers of net/ipv4/tcp_rmem or tcp_wmem (min default max). */
int kernel_sysctl_triple(const char *name, long v[3], struct err *e);

/* The largest SO_RCVBUF / SO_SNDBUF a process may ask for (rmem_max,
 * wmem_max): larger requests are clamped. Stock Debian: 212992. */
int kernel_buffer_caps(long *rcv_max, long *snd_max, struct err *e);

/* The smallest SO_RCVBUF / SO_SNDBUF buffer the kernel gives, whatever is
 * asked (2304 and 4608 bytes on x86-64 Linux 6.x). */
int kernel_buffer_mins(long *rcv_min, long *snd_min, struct err *e);

/* uname -r */
int kernel_release(char *buf, size_t len);

/* Start time of a process in clock ticks since boot (/proc/PID/stat field
 * 22): with the pid, it names a process even after pid reuse. */
int kernel_proc_start(pid_t pid, unsigned long long *ticks);

/* The process's command line, NUL-separated arguments joined by spaces. */
int kernel_proc_cmdline(pid_t pid, char *buf, size_t len);

/* The buffer sizes a listening TCP socket on this port has (sock_diag):
 * what an accepted connection inherits. -ENOENT when nothing listens. */
int kernel_listener_buffers(int port, long *rcvbuf, long *sndbuf, struct err *e);

/* One established TCP connection and the bytes it has moved so far (acked
 * out + received). */
struct kernel_sock_bytes {
    uint64_t cookie; /* the kernel's name for the socket */
    unsigned long long bytes;
};

/* The established connections whose local port is port (smbd's clients),
 * malloc'ed into *v. */
int kernel_port_sockets(int port, struct kernel_sock_bytes **v, size_t *n, struct err *e);

/* Bytes moved between two snapshots, connection by connection. Pure. */
unsigned long long kernel_bytes_since(const struct kernel_sock_bytes *then, size_t nthen,
                                      const struct kernel_sock_bytes *now, size_t nnow);

#endif
