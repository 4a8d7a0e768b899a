/* kernel: what Linux says about socket buffers and processes. */
#ifndef SMBTUNE_KERNEL_H
#define SMBTUNE_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

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

/* One process as /proc/PID/stat describes it. */
struct kernel_proc {
    char state;                    /* field 3: R, S, D, Z ... */
    pid_t pgrp;                    /* field 5 */
    pid_t session;                 /* field 6 */
    unsigned long long start_time; /* field 22, clock ticks since boot */
};

/* Pure: parse the contents of /proc/PID/stat. */
int kernel_proc_parse(const char *stat_text, struct kernel_proc *p);

/* Read and parse /proc/PID/stat. */
int kernel_proc_read(pid_t pid, struct kernel_proc *p);

/* Start time of a process in clock ticks since boot (/proc/PID/stat field
 * 22): with the pid, it names a process even after pid reuse. */
int kernel_proc_start(pid_t pid, unsigned long long *ticks);

/* pid names a process that has not exited: a zombie (or a dying process,
 * state X) counts as gone. A process we may not signal counts as alive,
 * and so does one whose stat cannot be read. */
bool kernel_pid_alive(pid_t pid);

/* pid is alive (kernel_pid_alive) and is the process that started at
 * start_time, not a later one that got the same number. */
bool kernel_pid_is(pid_t pid, unsigned long long start_time);

/* Process group pgid has a member that is not a zombie. kill(-pgid, 0)
 * alone also counts zombies, which stay until their parent reaps them. */
bool kernel_pgrp_alive(pid_t pgid);

/* Process group pgid has a member that is not a zombie, and every such
 * member is in session `session` and has a name (comm) that starts with
 * one of `comms` (NULL-terminated): a group whose leader is gone is
 * someone's only by what its members are, as its number may have been
 * taken again since. */
bool kernel_pgrp_only(pid_t pgid, pid_t session, const char *const comms[]);

/* The process's name (/proc/PID/comm, without its newline). */
int kernel_proc_comm(pid_t pid, char *buf, size_t len);

/* The process's command line, NUL-separated arguments joined by spaces. */
int kernel_proc_cmdline(pid_t pid, char *buf, size_t len);

/* TCP states as sock_diag numbers them (include/net/tcp_states.h); the
 * userspace headers that name them clash with linux/tcp.h's tcp_info. */
#define KERNEL_TCP_ESTABLISHED 1
#define KERNEL_TCP_LISTEN 10

struct inet_diag_msg;

/* Visit every TCP socket of family (AF_INET, AF_INET6) in states (a mask
 * of 1 << KERNEL_TCP_*) whose local port is one of ports, asking for the
 * sock_diag extensions exts (a mask of 1 << (INET_DIAG_x - 1)): visit gets
 * each message and its length, attributes included. The kernel's errno
 * when it refuses the dump (-ENOENT: no inet_diag for TCP). */
int kernel_diag_dump(int family, unsigned states, unsigned exts, const int *ports, int nports,
                     void (*visit)(const struct inet_diag_msg *m, size_t len, void *ctx),
                     void *ctx);

/* The buffer sizes a listening TCP socket on this port has (sock_diag):
 * what an accepted connection inherits. -ENOENT when nothing listens. */
int kernel_listener_buffers(int port, long *rcvbuf, long *sndbuf, struct err *e);

/* The send buffer a connection accepted by the listener on port has once
 * established: a connection of ours to the listener's address (loopback
 * for a wildcard one), its server side read through sock_diag, then
 * closed. Linux grows an autotuned socket's buffer at once (on loopback,
 * its large segments take it to tcp_wmem's maximum), and leaves one with
 * an explicit size (SOCK_SNDBUF_LOCK, inherited from the listener) as it
 * was: what the listener's own size cannot tell for SO_SNDBUF=8192, which
 * the kernel doubles to autotuning's start size, 16384. */
int kernel_accepted_sndbuf(int port, long *sndbuf, struct err *e);

/* The inode of the socket listening on 127.0.0.1:port (sock_diag);
 * -ENOENT when nothing listens there. */
int kernel_loopback_listener(int port, unsigned long *inode);

/* pid holds a descriptor for the socket with this inode (/proc/PID/fd). */
bool kernel_pid_has_socket(pid_t pid, unsigned long inode);

/* One established TCP connection and the bytes it has moved so far (acked
 * out + received). */
struct kernel_sock_bytes {
    uint64_t cookie; /* the kernel's name for the socket */
    unsigned long long bytes;
};

/* Bytes moved between two snapshots, connection by connection. Pure. */
unsigned long long kernel_bytes_since(const struct kernel_sock_bytes *then, size_t nthen,
                                      const struct kernel_sock_bytes *now, size_t nnow);

#endif
