/* files_int: what files.c and files_meta.c share; private to files. */
#ifndef SMBTUNE_FILES_INT_H
#define SMBTUNE_FILES_INT_H

#include <sys/stat.h>

/* Make fd the file like describes in all but its bytes: owner, every mode
 * bit, every extended attribute of src (the file at the name being
 * replaced, opened by the caller relative to its directory). -ESTALE when
 * src is not the file like describes; 0 or -errno. */
int files_copy_meta(int fd, int src, const struct stat *like);

#endif
