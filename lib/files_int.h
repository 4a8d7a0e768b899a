/* files_int: what files.c, files_meta.c and files_tmp.c share; private to
 * files. */
#ifndef SMBTUNE_FILES_INT_H
#define SMBTUNE_FILES_INT_H

#include <stddef.h>
#include <sys/stat.h>

#include "files.h"

/* Make fd the file src is in all but its bytes: owner, every mode bit,
 * every extended attribute of src (the file at the name being replaced,
 * opened by the caller relative to its directory), as they are now.
 * -ESTALE when src is not the file like describes (another inode); 0 or
 * -errno. */
int files_copy_meta(int fd, int src, const struct stat *like);

/* Split path into its directory, resolved by realpath and opened by
 * walking each component from "/" without following links (returned, an
 * fd), and its last component (*base, inside path). files.c. */
int files_open_parent(const char *path, const char **base, const struct files_hooks *h);

/* A random temporary name for base in out (FILES_TMP_PREFIX's first
 * shape); 0 or -errno. files_tmp.c. */
int files_tmp_name(char *out, size_t size, const char *base);
/* Give our new file (fd, under the name tmp in dfd, size bytes of room)
 * the exchange's name, the numbers of the files it may hold once swap_in
 * has run (FILES_TMP_PREFIX's second shape), tmp updated to it; where
 * the name cannot be given, tmp stays as it is (0). files_tmp.c. */
int files_tmp_name_by_inodes(int dfd, int fd, char *tmp, size_t size, const char *base,
                             const struct stat *like);

#endif
