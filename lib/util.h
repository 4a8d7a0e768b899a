/* util: a thin umbrella over the rooms util.c was split into (err, parse,
 * files, child, jsonw), for the files still being edited while the split
 * landed (daemon/tuner.c, lib/probe.c). New code includes the room it
 * needs; this header and its old names go once nothing uses them. */
#ifndef SMBTUNE_UTIL_H
#define SMBTUNE_UTIL_H

#include "child.h"
#include "err.h"
#include "files.h"
#include "jsonw.h"
#include "parse.h"

#define util_parse_long parse_long
#define util_parse_size parse_size
#define util_read_file_err files_read
#define util_read_file(path, buf, len) files_read(path, buf, len, NULL)
#define util_write_atomic files_write_atomic
#define util_sweep_tmp files_sweep_tmp
#define util_mkdir_p files_mkdir_p
#define util_now child_now
#define util_run child_run
#define util_run_alloc child_run_alloc
#define util_json_string jsonw_string
#define UTIL_MAX_FILE FILES_MAX_SIZE
#define UTIL_TMP_PREFIX FILES_TMP_PREFIX

#endif
