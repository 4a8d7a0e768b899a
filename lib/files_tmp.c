/* files_tmp: the names of files.c's temporary files and the sweeps that
 * remove what a killed run left under them (files.h, FILES_TMP_PREFIX):
 * a random name, or for an exchange one that records the only two files
 * that may be under it, so that a file someone renamed over the target
 * while a kill cut the exchange short is kept, and said. */
#include "files.h"
#include "files_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a temporary name of the exchange's shape records (files.h's
 * FILES_TMP_PREFIX): the only files that may legitimately be under it. */
struct tmp_ids {
    uint64_t ours;   /* N: our new file's inode number */
    uint64_t judged; /* L: the inode number of the file the caller judged */
    uint64_t mtime;  /* M: that file's mtime as the caller judged it (mtime_ns) */
};

/* st's mtime in nanoseconds. Unsigned, so that a time before 1970 wraps
 * the same way when the name is made and when it is checked: the number
 * is only ever compared for equality. */
static uint64_t mtime_ns(const struct stat *st)
{
    return (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

static const char tmp_set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* A temporary name for base: the prefix, base, a dot and six random
 * letters or digits, as mkstemp made them; with ids, the numbers between
 * base and the letters (FILES_TMP_PREFIX's two shapes, sweep_at's). */
static int tmp_name(char *out, size_t size, const char *base, const struct tmp_ids *ids)
{
    unsigned char rnd[6];
    char suf[7];
    int n;

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -EIO;
    for (size_t i = 0; i < 6; i++)
        suf[i] = tmp_set[rnd[i] % (sizeof(tmp_set) - 1)];
    suf[6] = '\0';
    if (ids == NULL)
        n = snprintf(out, size, FILES_TMP_PREFIX "%s.%s", base, suf);
    else
        n = snprintf(out, size, FILES_TMP_PREFIX "%s.%" PRIx64 "-%" PRIx64 "-%" PRIx64 ".%s", base,
                     ids->ours, ids->judged, ids->mtime, suf);
    if (n < 0 || (size_t)n >= size || (size_t)n > NAME_MAX)
        return -ENAMETOOLONG;
    return 0;
}

/* Rename from to to in dfd, never over a file already at to: -EEXIST
 * then. A filesystem without RENAME_NOREPLACE (NFS, OpenZFS before 2.2,
 * FUSE before protocol 7.23) gets a link and an unlink, which never
 * replace either. */
static int rename_noreplace(int dfd, const char *from, const char *to)
{
    if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return -errno;
    if (linkat(dfd, from, dfd, to, 0) < 0)
        return -errno;
    if (unlinkat(dfd, from, 0) < 0) {
        int r = -errno;

        /* Two names for our new file would give the target two links
         * once it is swapped in: the new one is taken back, the file
         * keeps from. (Should that fail too, the edit after this one
         * refuses the hard-linked file, saying so: nothing is lost.) */
        unlinkat(dfd, to, 0);
        return r;
    }
    return 0;
}

/* Give our new file (fd, under tmp in dfd) the exchange's name, tmp
 * updated to it: the numbers of the only two files swap_in can leave
 * under it, ours and like's (see sweep_at). Made before anything is
 * written, so that a kill at any later step leaves a name of this shape.
 * When the name cannot be given (too long for NAME_MAX with the numbers,
 * or neither a rename without replacing nor a link works here), the
 * random name stays: the write goes on as it did before names carried
 * numbers, and a sweep after a kill between the two exchanges would
 * remove whatever the first one left there, as it did then. */
int files_tmp_name_by_inodes(int dfd, int fd, char *tmp, size_t size, const char *base,
                             const struct stat *like)
{
    char named[NAME_MAX + 1];
    struct tmp_ids ids;
    struct stat st;
    int r;

    if (fstat(fd, &st) < 0)
        return -errno;
    ids.ours = st.st_ino;
    ids.judged = like->st_ino;
    ids.mtime = mtime_ns(like);
    for (int tries = 0; tries <= 100; tries++) {
        r = tmp_name(named, sizeof(named), base, &ids);
        if (r == -ENAMETOOLONG)
            return 0;
        if (r < 0)
            return r;
        r = rename_noreplace(dfd, tmp, named);
        if (r == 0) {
            snprintf(tmp, size, "%s", named);
            return 0;
        }
        /* -EEXIST: a file has that name already (the six letters
         * differ at each try). Any other failure is no reason to fail
         * the write: see above. */
        if (r != -EEXIST)
            return 0;
    }
    return 0;
}

int files_tmp_name(char *out, size_t size, const char *base)
{
    return tmp_name(out, size, base, NULL);
}

/* A character of tmp_set's: a letter or a digit, in any locale. */
static bool tmp_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A digit of the numbers' "%" PRIx64: lowercase. */
static bool hex_digit(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Whether name (len bytes) ends the way a name of the exchange's shape
 * does, ".N-L-M.XXXXXX" (tmp_name with ids): then the numbers into *ids
 * and the length of what comes before that tail (the prefix and the
 * target's name); -1 otherwise. Read from the end: a target's name may
 * hold any character, the tail only lowercase hex digits, '-' and '.'. */
static ssize_t ids_tail(const char *name, size_t len, struct tmp_ids *ids)
{
    uint64_t *field[3] = {&ids->ours, &ids->judged, &ids->mtime};
    size_t i;

    if (len < 7 || name[len - 7] != '.')
        return -1;
    for (i = len - 6; i < len; i++)
        if (!tmp_char(name[i]))
            return -1;
    i = len - 7;
    for (int f = 2; f >= 0; f--) {
        size_t end = i;
        uint64_t v = 0;

        /* at most 16 digits: a 17th is left for the separator check */
        while (i > 0 && end - i < 16 && hex_digit(name[i - 1]))
            i--;
        if (i == end || i == 0 || name[i - 1] != (f > 0 ? '-' : '.'))
            return -1;
        for (size_t k = i; k < end; k++)
            v = v << 4 | (uint64_t)(name[k] <= '9' ? name[k] - '0' : name[k] - 'a' + 10);
        *field[f] = v;
        i--;
    }
    return (ssize_t)i;
}

/* Only next to the file being written, relative to its directory fd,
 * only regular files of our own uid, never following a link: a file of
 * that shape that someone else made (in a 1777 directory, say) is theirs.
 * base NULL: the temporary files of any target in the directory.
 *
 * A random name alone (`.smbtuned-BASE.XXXXXX`) only ever held our new
 * file: a kill before its rename or exchange left it (or an older
 * smbtuned's, whose names were all of that shape). It goes.
 *
 * A name with numbers (`.smbtuned-BASE.N-L-M.XXXXXX`) was under an
 * exchange, which can leave there any file someone renamed over BASE just
 * before it (swap_in). It goes only when it holds one of the two files
 * the name records: ours (inode N), or the one the caller judged and we
 * replaced (inode L, with the mtime M it had then; another mtime is an
 * edit made in place after the judgment, which the exchange back would
 * have kept). Any other file was alive, in the same directory, at the
 * same time as both of those (it came in by a rename over BASE before
 * the exchange, while ours was under the temporary name and the judged
 * one open in our hands): it cannot share their inode numbers, it is
 * someone else's (an admin's edit), and it stays: kept (may be NULL) is
 * told its name. A name of that shape is read as that shape even
 * where it could be a random name of a target whose own name ends in
 * ".N-L-M" (x.1-2-3): such a leftover is never removed as a random name,
 * only as its numbers allow, so that no target's sweep removes another
 * target's exchanged file by reading its name the other way. */
static void sweep_at(int dfd, const char *base, files_kept_fn kept, void *ctx)
{
    char stem[NAME_MAX + 16];
    struct dirent *de;
    size_t slen;
    DIR *d;
    int fd;

    if ((size_t)snprintf(stem, sizeof(stem), FILES_TMP_PREFIX "%s", base ? base : "") >=
        sizeof(stem))
        return;
    slen = strlen(stem);
    fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        struct tmp_ids ids;
        struct stat st;
        size_t len = strlen(de->d_name);
        ssize_t at;

        if (strncmp(de->d_name, stem, slen) != 0)
            continue;
        /* Only names of exactly our shapes: the stem (any target's: the
         * prefix and a name) then the numbers' tail, or a '.' and six
         * characters. */
        at = ids_tail(de->d_name, len, &ids);
        if (at >= 0 ? (base ? (size_t)at != slen : (size_t)at <= slen)
                    : (base ? len != slen + 7 || de->d_name[slen] != '.'
                            : len < slen + 8 || de->d_name[len - 7] != '.'))
            continue;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if (at >= 0 && st.st_ino != ids.ours &&
            (st.st_ino != ids.judged || mtime_ns(&st) != ids.mtime)) {
            if (kept != NULL)
                kept(ctx, de->d_name);
            continue;
        }
        unlinkat(dfd, de->d_name, 0);
    }
    closedir(d);
}

void files_target_sweep(struct files_target *t, files_kept_fn kept, void *ctx)
{
    if (t->dfd >= 0)
        sweep_at(t->dfd, t->base, kept, ctx);
}

void files_sweep_tmp_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (dfd < 0)
        return;
    sweep_at(dfd, NULL, NULL, NULL);
    close(dfd);
}

void files_sweep_tmp(const char *path)
{
    const char *base;
    int dfd = files_open_parent(path, &base, NULL);

    if (dfd < 0)
        return;
    sweep_at(dfd, base, NULL, NULL);
    close(dfd);
}
