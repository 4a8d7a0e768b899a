/* smbconf_disk: the read side of the editor. smb.conf and its includes
 * read from disk as Samba reads them, and Samba's own parser (testparm)
 * asked for a parameter's value. */
#include "child.h"
#include "files.h"
#include "smbconf.h"
#include "smbconf_int.h"

#include <errno.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TESTPARM_TIMEOUT_S 60.0

static int disk_read(void *ctx, const char *path, char **buf, size_t *len, struct err *e)
{
    struct stat st;

    (void)ctx;
    /* A device or a socket is looked at, never opened: opening some has
     * effects (a tape rewinds), and Samba never reads one (file_exist()
     * reads a regular file or a FIFO only). -ENODEV: an include of one is
     * skipped, as Samba skips it (smbconf_include.c). */
    if (stat(path, &st) < 0) /* its own error: the path may change before an open */
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
        return err_set(e, -ENODEV, "%s is a device or a socket: not a file of settings", path);
    return files_read(path, buf, len, e);
}

static int disk_glob(void *ctx, const char *pattern, char ***paths, size_t *n)
{
    glob_t g;
    int r;

    (void)ctx;
    *paths = NULL;
    *n = 0;
    /* GLOB_PERIOD: a '*' matches a leading '.' too, as a macro can start
     * with one (a client may call itself ".ws01"); it matches "." and ".."
     * as well (glibc 2.36), which the caller globs as such anyway.
     * GLOB_MARK ends every directory's name with '/': a directory is no
     * file Samba reads settings from, so it is left out. */
    r = glob(pattern, GLOB_NOSORT | GLOB_PERIOD | GLOB_MARK, NULL, &g);
    if (r == GLOB_NOMATCH)
        return 0;
    if (r != 0)
        return r == GLOB_NOSPACE ? -ENOMEM : -EIO;
    *paths = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof(char *));
    if (*paths == NULL) {
        globfree(&g);
        return -ENOMEM;
    }
    r = 0;
    for (size_t i = 0; i < g.gl_pathc && r == 0; i++) {
        size_t len = strlen(g.gl_pathv[i]);

        if (len > 0 && g.gl_pathv[i][len - 1] == '/')
            continue;
        (*paths)[*n] = strdup(g.gl_pathv[i]);
        if ((*paths)[*n] == NULL)
            r = -ENOMEM;
        else
            (*n)++;
    }
    globfree(&g);
    return r;
}

static const struct smbconf_io disk_io = {disk_read, disk_glob, NULL, false};
static const struct smbconf_io disk_io_undo = {disk_read, disk_glob, NULL, true};

int smbconf_load(struct smbconf *c, const char *path, struct err *e)
{
    return smbconf_parse(c, path, &disk_io, e);
}

int smbconf_load_undo(struct smbconf *c, const char *path, struct err *e)
{
    return smbconf_parse(c, path, &disk_io_undo, e);
}

static const char *testparm_cmd(void)
{
    /* Tests point this at a wrapper to inject a parser that disagrees. */
    const char *t = getenv("SMBTUNED_TESTPARM");

    return t != NULL && t[0] != '\0' ? t : "testparm";
}

int smbconf_testparm(const char *path, const char *param, char **value, struct err *e)
{
    char *out, *errout, opt[256];
    char *argv[] = {(char *)testparm_cmd(), "-s", opt, (char *)path, NULL};
    double t0 = child_now();
    int status, r;
    size_t n;

    snprintf(opt, sizeof(opt), "--parameter-name=%s", param);
    /* The value is as long as smb.conf makes it: no fixed buffer, only a
     * bound far above any configuration (util_read_file's own). */
    r = child_run_alloc(argv, TESTPARM_TIMEOUT_S, FILES_MAX_SIZE, &out, &errout, &status);
    if (r < 0)
        return err_set(e, r, "cannot run %s: %s", argv[0],
                       r == -EFBIG ? "it printed more than 64 MiB" : strerror(-r));
    n = strcspn(out, "\n");
    out[n] = '\0';
    /* Neither a testparm that could not be started (the child's exit 127,
     * nothing said) nor one killed at its deadline judged smb.conf: the
     * error says so rather than 'cannot read' the file. */
    if ((status == 127 && errout[0] == '\0') ||
        (status == -1 && child_now() - t0 >= TESTPARM_TIMEOUT_S)) {
        if (status == 127)
            r = err_set(e, -EINVAL, "cannot run %s on %s: not found or not executable", argv[0],
                        path);
        else
            r = err_set(e, -EINVAL, "cannot run %s on %s: no answer within %.0f s, killed", argv[0],
                        path, TESTPARM_TIMEOUT_S);
        free(out);
        free(errout);
        return r;
    }
    /* An empty line is a value too: `socket options =` sets none. */
    if (status != 0) {
        /* testparm's last words say why it could not load the file; skip
         * the GnuTLS notice it prints every time. When it crashed on the
         * way out (Samba 4.17 does, after "Error loading services.", for
         * `smb ports = abc`), its last words are the panic's trailer
         * ("Can not dump core: corepath not set up"): the reason is the
         * line before the panic began, and the panic is said after it. */
        char *last = NULL, *panic = NULL, *save = NULL;
        bool crashed = false;

        for (char *l = strtok_r(errout, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            if (strstr(l, "Weak crypto") != NULL || l[0] == '\0')
                continue;
            crashed |= strncmp(l, "talloc: ", 8) == 0 || strncmp(l, "Bad talloc", 10) == 0 ||
                       strncmp(l, "=====", 5) == 0 || strncmp(l, "INTERNAL ERROR", 14) == 0 ||
                       strncmp(l, "PANIC", 5) == 0;
            if (!crashed)
                last = l;
            else if (panic == NULL && strncmp(l, "PANIC", 5) == 0)
                panic = l;
        }
        r = err_set(e, -EINVAL, "%s: Samba's testparm cannot read '%s' (%s%s%s)", path, param,
                    last ? last : "no reason given", crashed ? "; then testparm crashed: " : "",
                    crashed ? (panic ? panic : "see testparm -s") : "");
        free(out);
        free(errout);
        return r;
    }
    free(errout);
    *value = out;
    return 0;
}
