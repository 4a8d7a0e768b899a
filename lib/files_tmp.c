/* files_tmp: the names of files.c's temporary files and the sweeps that
 * remove what a killed run left under them (files.h, FILES_TMP_PREFIX):
 * a random name, or for an exchange one that records the only two files
 * that may be under it (ours by inode; the replaced one by inode, mtime
 * and size). Anything else under a name of the exchange's shape (a file
 * someone renamed over the target while a kill cut the exchange short,
 * whatever its type or owner) is kept, and said. */
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
    uint64_t size;   /* S: its size then, which tells an edit in place within M's
                      * clock tick (coarse timestamps) unless it keeps the size */
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
        n = snprintf(out, size,
                     FILES_TMP_PREFIX "%s.%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64 ".%s", base,
                     ids->ours, ids->judged, ids->mtime, ids->size, suf);
    if (n < 0 || (size_t)n >= size || (size_t)n > NAME_MAX)
        return -ENAMETOOLONG;
    return 0;
}

/* Give our new file (fd, under tmp in dfd) the exchange's name, tmp
 * updated to it: the numbers of the only two files swap_in can leave
 * under it, ours and like's (see sweep_at). Made before anything is
 * written, so that a kill at any later step leaves a name of this shape.
 * The rename never replaces (RENAME_NOREPLACE): a name taken already is
 * tried again with other letters. When the name cannot be given, the
 * random name stays and the write goes on (0). Where RENAME_NOREPLACE is
 * refused (NFS, OpenZFS before 2.2, FUSE before protocol 7.23),
 * RENAME_EXCHANGE is too: swap_in then renames plainly, and the random
 * name only ever holds ours. No link and unlink stands in for the rename:
 * on NFS, the unlink of a name of our new file, open in our hands, is a
 * rename to .nfsXXXX (silly rename), a second link that can outlast us;
 * the target would be hard-linked once swapped in, and every later edit
 * refuses a hard-linked file. Where the name is too long for NAME_MAX
 * with the numbers, a sweep after a kill between the two exchanges
 * removes whatever the first one left there, as it did before names
 * carried numbers. */
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
    ids.size = (uint64_t)like->st_size;
    for (int tries = 0; tries <= 100; tries++) {
        r = tmp_name(named, sizeof(named), base, &ids);
        if (r == -ENAMETOOLONG)
            return 0;
        if (r < 0)
            return r;
        if (renameat2(dfd, tmp, dfd, named, RENAME_NOREPLACE) == 0) {
            snprintf(tmp, size, "%s", named);
            return 0;
        }
        /* EEXIST: a file has that name already (the six letters differ
         * at each try). Any other failure (EINVAL, ENOSYS, EOPNOTSUPP:
         * no RENAME_NOREPLACE here) is no reason to fail the write: see
         * above. */
        if (errno != EEXIST)
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
 * does, ".N-L-M-S.XXXXXX" (tmp_name with ids): then the numbers into *ids
 * and the length of what comes before that tail (the prefix and the
 * target's name); -1 otherwise. Read from the end: a target's name may
 * hold any character, the tail only lowercase hex digits, '-' and '.'. */
static ssize_t ids_tail(const char *name, size_t len, struct tmp_ids *ids)
{
    uint64_t *field[4] = {&ids->ours, &ids->judged, &ids->mtime, &ids->size};
    size_t i;

    if (len < 7 || name[len - 7] != '.')
        return -1;
    for (i = len - 6; i < len; i++)
        if (!tmp_char(name[i]))
            return -1;
    i = len - 7;
    for (int f = 3; f >= 0; f--) {
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

/* Whether the entry name in dfd is ours to remove (1) or not (0), never
 * following a link; -ENOENT when it is gone. Only a regular file.
 *
 * Without ids (a random name), only one of our own uid: a file of that
 * shape that someone else made (in a 1777 directory, say) is theirs.
 *
 * With ids (a name with numbers), only the two files they record, of
 * whatever owner: ours (inode N), or the one the caller judged and we
 * replaced (inode L, with the mtime M and the size S it had then; another
 * mtime or size is an edit made in place after the judgment, which the
 * exchange back would have kept). The numbers are a stronger proof than
 * the owner, which is not ours to go by here: our new file takes the
 * target's owner (files_copy_meta), so a kill next to an smb.conf of an
 * admin's uid leaves files of that uid. Someone who names a file of
 * their own with its own inode number loses a file they could remove
 * themselves; a link to another's file under such a name loses only that
 * name. The size is for an edit within the tick of a coarse clock, or of
 * a filesystem that keeps whole seconds, which leaves the mtime as it
 * was; one that keeps the size too passes for the judged file (nothing
 * more is recorded). */
static int ours_to_remove(int dfd, const char *name, const struct tmp_ids *ids)
{
    struct stat st;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? -ENOENT : 0;
    if (!S_ISREG(st.st_mode))
        return 0;
    if (ids == NULL)
        return st.st_uid == geteuid();
    return st.st_ino == ids->ours || (st.st_ino == ids->judged && mtime_ns(&st) == ids->mtime &&
                                      (uint64_t)st.st_size == ids->size);
}

/* Only next to the file being written, relative to its directory fd.
 * base NULL: the temporary files of any target in the directory.
 *
 * A random name alone (`.smbtuned-BASE.XXXXXX`) only ever held our new
 * file: a kill before its rename or exchange left it (or an older
 * smbtuned's, whose names were all of that shape). It goes when
 * ours_to_remove says so; anything else there is left, and nothing is
 * said: in a shared directory it is someone else's file of that shape.
 *
 * A name with numbers (`.smbtuned-BASE.N-L-M-S.XXXXXX`) was under an
 * exchange, which can leave there any file someone renamed over BASE just
 * before it (swap_in). It goes only when it holds one of the two files
 * the name records (ours_to_remove). Anything else there is someone
 * else's: a file that came in by a rename over BASE before the exchange
 * (alive, in the same directory, at the same time as both of those, while
 * ours was under the temporary name and the judged one open in our hands,
 * it cannot share their inode numbers), or the judged file written in
 * place since. It stays, and kept (may be NULL) is told its name,
 * whatever its type or owner: the admin who saved it may be of a group
 * that can write the directory, not root, or their editor may have saved
 * a symlink, and those are the files the warning is for. A name of that
 * shape is read as that shape even where it could be a random name of a
 * target whose own name ends in ".N-L-M-S" (x.1-2-3-4): such a leftover
 * is never removed as a random name, only as its numbers allow, so that
 * no target's sweep removes another target's exchanged file by reading
 * its name the other way. */
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
        size_t len = strlen(de->d_name);
        ssize_t at;
        int r;

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
        r = ours_to_remove(dfd, de->d_name, at >= 0 ? &ids : NULL);
        if (r > 0)
            unlinkat(dfd, de->d_name, 0);
        else if (r == 0 && at >= 0 && kept != NULL)
            kept(ctx, de->d_name);
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
