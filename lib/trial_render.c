/* trial_render: the shadow smbd's config text (pure). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trial.h"
#include "trial_int.h"

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"

int trial_path_check(const char *what, const char *p, struct err *e)
{
    /* Samba substitutes %-macros in paths and a newline would end the
     * parameter: refuse both rather than quote them (Samba has no quoting). */
    if (p == NULL || p[0] != '/' || strpbrk(p, "%\n\r") != NULL)
        return err_set(e, -EINVAL, "%s '%s' is not absolute or has %% or a newline", what,
                       p ? p : "(null)");
    return 0;
}

/* The own share's lines, malloc'ed: *glob the [global] overrides that make
 * the shadow a stand-alone server of its own, *share the share. */
static int own_share_lines(const char *run_dir, const struct trial_share *own, char **glob,
                           char **share)
{
    /* Every directory smbd writes is the run directory's, private dir and
     * state directory too: a guest share needs no production account, so
     * the shadow opens nothing of production's for writing (under the
     * unit's ProtectSystem=strict /var/lib/samba may be read-only, and
     * production's secrets.tdb is none of our business). Hence a server
     * role of its own: production may be a domain member, whose logons
     * need production's secrets; ours are guests only, mapped from any
     * name (map to guest), also where production restricts anonymous
     * sessions. Usershares are production's to offer, not ours. A guest
     * session has no key to encrypt with, so production's `server smb
     * encrypt = required` (or its synonym `smb encrypt`) would refuse
     * every probe: the shadow has Samba's default, if_required, under
     * which a client that does not ask for encryption gets none ("desired"
     * sets the share's encrypt flag, and libsmbclient, unable to encrypt
     * as a guest, then fails the tree connect). Its share holds only probe
     * files and only 127.0.0.1 reaches it; the rates are those of
     * unencrypted transfers (see smbtuned.conf(5), url).
     *
     * Not `hosts allow`: smbd checks the [global] hosts lists when a
     * connection arrives, and a production [global] that refuses 127.0.0.1
     * shuts these shadows out too (smbtuned.conf(5) says so). Admitting it
     * here would also admit it to production's shares on this shadow that
     * admit 127.0.0.1 themselves, which production's connection check
     * keeps closed; closing those shares would mean reading smb.conf in
     * the event loop and every %-include's variant. */
    if (asprintf(glob,
                 "\tstate directory = %s/state\n"
                 "\tprivate dir = %s/private\n"
                 "\tsecurity = user\n"
                 "\tserver role = standalone server\n"
                 "\tpassdb backend = tdbsam:%s/private/passdb.tdb\n"
                 "\tmap to guest = bad user\n"
                 "\trestrict anonymous = 0\n"
                 "\tusershare max shares = 0\n"
                 "\tserver smb encrypt = if_required\n",
                 run_dir, run_dir, run_dir) < 0) {
        *glob = NULL;
        return -ENOMEM;
    }
    /* The directory is STATE_DIR/share, inside a state directory of mode
     * 0700 that the guest account (nobody) cannot traverse, and must stay
     * so (it holds smb.conf's backups). So the share's sessions run as
     * root (force user), on a share that only 127.0.0.1 reaches, that is
     * not listed (browseable), on a shadow that lives for one trial, in
     * a directory that holds nothing but probe files, under a name only
     * smbtuned knows (trial.h). No vfs objects:
     * production's global recycle bin or snapshots would keep a copy of
     * every probe file in our state directory. The share is defined
     * after both [global]s and copies their values of every share
     * parameter it does not set, production's among them: the lists of
     * who may log on and the vetoed names are emptied, as a production
     * `valid users = @staff`, `invalid users = nobody` or a `veto files`
     * of dot files would refuse the guest or the probe's files
     * (.smbtuned-probe-*). No dfree command: the free space the probe
     * asks for (probe_room) is the state directory's file system's, not
     * what a script of production's says of its shares. */
    if (asprintf(share,
                 "[%s]\n"
                 "\tcomment = smbtuned's probe share (shadow smbds only)\n"
                 "\tpath = %s\n"
                 "\tread only = no\n"
                 "\tguest ok = yes\n"
                 "\tguest only = yes\n"
                 "\tforce user = root\n"
                 "\tbrowseable = no\n"
                 "\thosts allow = 127.0.0.1\n"
                 "\tvalid users = \n"
                 "\tinvalid users = \n"
                 "\tveto files = \n"
                 "\tvfs objects = \n"
                 "\tdfree command = \n",
                 own->name, own->dir) < 0) {
        free(*glob);
        *glob = *share = NULL;
        return -ENOMEM;
    }
    return 0;
}

int trial_shadow_render(const char *prod_conf, const char *run_dir, int port,
                        const char *sockopts_value, const struct trial_share *own, char **text,
                        struct err *e)
{
    char *glob = NULL, *share = NULL;
    size_t vlen;
    int n;

    *text = NULL;
    if (trial_path_check("production config path", prod_conf, e) < 0 ||
        trial_path_check("run directory", run_dir, e) < 0 ||
        (own != NULL && trial_path_check("own share directory", own->dir, e) < 0))
        return -EINVAL;
    /* A name of its own shape: no ']' to end the header, nothing Samba
     * would substitute or a client would quote. */
    if (own != NULL && (own->name == NULL || own->name[0] == '\0' ||
                        strspn(own->name, NAME_CHARS) != strlen(own->name)))
        return err_set(e, -EINVAL, "own share name '%s' is not letters, digits and '-'",
                       own->name ? own->name : "(null)");
    if (port <= 0 || port > 65535)
        return err_set(e, -ERANGE, "port %d out of range", port);
    if (sockopts_value == NULL || strpbrk(sockopts_value, "\n\r") != NULL)
        return err_set(e, -EINVAL, "socket options value has a newline");
    vlen = strlen(sockopts_value);
    /* A final backslash would continue the line into whatever follows. */
    if (vlen > 0 && sockopts_value[vlen - 1] == '\\')
        return err_set(e, -EINVAL, "socket options value ends in a backslash");
    if (own != NULL && own_share_lines(run_dir, own, &glob, &share) < 0)
        return err_set(e, -ENOMEM, "out of memory");

    /* The include comes first so that everything after it wins: Samba
     * keeps the last occurrence of a parameter. The second [global] is
     * needed because the production file may end inside a share section,
     * and an included file's section goes on after the include line.
     *
     * Private always: the per-instance runtime, every directory smbd
     * writes on its own account: the pid file (smbd refuses to start
     * while another holds it, and smbcontrol finds smbd through it), lock
     * directory (messaging sockets, serverid, locking, brlock, leases,
     * session tdbs: shared, production's reload-config would reach the
     * shadow and one instance's cleanup would purge the other's records),
     * cache directory (gencache, smbprofile), ncalrpc and the log. So
     * share modes and oplocks are not coordinated between the two: a
     * probe works on its own file.
     *
     * With a url (a share of production's, logons perhaps with a
     * password), private dir and state directory stay production's: users
     * and passwords (passdb.tdb, secrets.tdb: a domain member's machine
     * account) live in the one, and the other holds what decides who may
     * do what (share ACLs in share_info.tdb, account policy, group
     * mapping): a private one would let any local user past production's
     * share ACLs on the shadow's port. Sharing those tdb files is safe:
     * tdb is built for many processes with fcntl locks (every production
     * smbd child, pdbedit and net open them the same way); the shadow
     * reads them to authenticate, and its one CLEAR_IF_FIRST database
     * there (netlogon_creds_cli.tdb, a cache) is cleared only when no
     * other process has it open. smbd opens them read-write, so the unit
     * keeps /var/lib/samba writable. With the own share (no url) the
     * shadow has both of its own: own_share_lines().
     *
     * Not clustered either (`clustering = no`): with production's
     * `clustering = yes` smbd opens its volatile databases (locking,
     * brlock, smbXsrv, serverid ...) through ctdbd by name, ignoring the
     * lock directory above, and joins the cluster's messaging: the
     * shadow would share production's cluster-wide lock state after all
     * (and where no ctdbd runs, it does not start). The catch, with a url
     * on a cluster node: production's persistent databases (passdb, share
     * ACLs, registry shares) are ctdb's too, and the shadow reads the
     * node's local tdb files in their place, so a share defined in the
     * registry or a tdbsam user may be missing there.
     *
     * No printing, RPC helpers, NetBIOS or mDNS: a measurement needs file
     * I/O only, and every extra process is one more thing to clean up or
     * to announce on the network. No panic action and no core file: smbd
     * panics when its port was taken (a retry, not an event to mail an
     * admin about, as Debian's panic-action does). */
    n = asprintf(text,
                 "# smbtuned shadow smbd: one candidate `socket options`, tried on a\n"
                 "# private port of 127.0.0.1. Written by smbtuned, removed after the trial.\n"
                 "[global]\n"
                 "\tinclude = %s\n"
                 "[global]\n"
                 "\tsmb ports = %d\n"
                 "\tinterfaces = 127.0.0.1\n"
                 "\tbind interfaces only = yes\n"
                 "\tdisable netbios = yes\n"
                 "\tmulticast dns register = no\n"
                 "\tclustering = no\n"
                 "\tpid directory = %s/pid\n"
                 "\tlock directory = %s/lock\n"
                 "\tcache directory = %s/cache\n"
                 "\tncalrpc dir = %s/ncalrpc\n"
                 "%s"
                 "\tlog file = %s/log.smbd\n"
                 "\tmax log size = 0\n"
                 "\tload printers = no\n"
                 "\tprinting = bsd\n"
                 "\tprintcap name = /dev/null\n"
                 "\tdisable spoolss = yes\n"
                 "\trpc start on demand helpers = no\n"
                 "\tpanic action = \n"
                 "\tenable core files = no\n"
                 "\tsocket options = %s\n"
                 "%s",
                 prod_conf, port, run_dir, run_dir, run_dir, run_dir, glob ? glob : "", run_dir,
                 sockopts_value, share ? share : "");
    free(glob);
    free(share);
    if (n < 0) {
        *text = NULL;
        return err_set(e, -ENOMEM, "out of memory");
    }
    return 0;
}
