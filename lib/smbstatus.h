/* smbstatus: the files smbd has open, as `smbstatus -L --json` lists them
 * from smbd's locking database. A restart of smbd (restart_smbd = yes)
 * cuts every open file off: a client's unsaved work, a backup's write.
 * Only the count is kept: the names are the users' business. */
#ifndef SMBTUNE_SMBSTATUS_H
#define SMBTUNE_SMBSTATUS_H

#include "err.h"

/* How long smbstatus may take (it reads tdb files; a hung one is killed). */
#define SMBSTATUS_TIMEOUT_S 20.0

/* The number of files in smbstatus's JSON text (its "open_files" object;
 * none without one: no locking database yet), pure. -EINVAL, with e
 * saying what was expected, for text that is not such an object. */
int smbstatus_parse_open(const char *json, long *files, struct err *e);

/* The files the smbd of smb_conf has open: `smbstatus -s smb_conf -L
 * --json`. 0 and *files, or an error (smbstatus not run, failed, killed
 * at its deadline, or said something else) with e saying why: the caller
 * cannot tell, and does not restart. */
int smbstatus_open_files(const char *smb_conf, long *files, struct err *e);

#endif
