/* probe_made: the record of the probe files our probes made, kept in the
 * state directory (<state_dir>/probe/made, ours alone, 0700): a directory
 * per place probed (probe_params.place: its name is probe_made_key(), and
 * its file `place` says which), holding one file per probe file, of the
 * same name and holding the boot and start time of the probe that made
 * it, written (and made durable) before the probe file is
 * created on the share, removed once the probe file is deleted. A
 * clean-up of a place deletes there only names recorded for it whose
 * probe is gone: never a name it found in a listing, which any user of
 * the share could have given a file of their own, nor one another host
 * with the same name made; the records of other places wait for a
 * clean-up of theirs. */
#ifndef SMBTUNE_PROBE_MADE_H
#define SMBTUNE_PROBE_MADE_H

#include <stddef.h>
#include <sys/types.h>

#define PROBE_MADE_SUBDIR "made"
#define PROBE_MADE_PLACE_FILE "place"
#define PROBE_MADE_KEY_LEN 16

/* The directory name of a place's records: 16 hex digits of a hash (FNV-1a,
 * 64 bits) of place and directory (NULL: none), into out
 * (PROBE_MADE_KEY_LEN + 1 bytes). Pure. */
void probe_made_key(const char *place, const char *directory, char *out);

/* The pid of a recorded name PREFIX<host>-<pid>-<16 hex digits> (any
 * host: the record is ours wherever the name says it was made), or -1
 * when name is not exactly that shape. Pure. */
pid_t probe_made_pid(const char *name);

/* Open the record directory dir (not through a link): the fd, or -errno. */
int probe_made_open(const char *dir);

/* Record name in the directory fd, durably (the directory synced), before
 * its probe file is created: 0 or -errno (-EEXIST: recorded already). */
int probe_made_add(int fd, const char *name);

/* Forget name: 0 (also when it was not recorded) or -errno. */
int probe_made_drop(int fd, const char *name);

/* Up to max recorded names whose probe is gone (another boot's, or its
 * pid no longer the process that started then; a record without them: the
 * pid gone), into names (each of
 * len bytes): their count, or -errno when the directory cannot be read.
 * Entries that are not regular files of exactly the recorded shape are
 * passed over. */
int probe_made_dead(int fd, char (*names)[256], int max);

/* Forget the records of probes that are gone of one place (probe_made_key
 * of place, no directory), in STATE_DIR/probe/made (not through a link):
 * for the own share, whose files the daemon removes itself, without a
 * clean-up child (place_tidy). 0, also when there is no record; or
 * -errno. */
int probe_made_forget_dead(const char *state_dir, const char *place);

/* The places other than (place, directory) whose records hold names of
 * probes that are gone (a url changed since: no clean-up of ours goes
 * there now): fn is told each one's `place` text (printable only), the
 * directory of its records and how many, up to PROBE_MADE_COUNT_MAX. 0 or -errno (no record: 0). */
#define PROBE_MADE_COUNT_MAX 64
typedef void (*probe_made_place_fn)(const char *where, const char *records, int n, void *ud);
int probe_made_others(const char *state_dir, const char *place, const char *directory,
                      probe_made_place_fn fn, void *ud);

#endif
