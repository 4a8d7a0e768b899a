/* journal_ids: the MESSAGE_ID of each kind of event smbtuned logs with
 * journal_event(). One 128-bit id per kind (made with `systemd-id128 new`),
 * never reused for another meaning: `journalctl MESSAGE_ID=...` finds every
 * entry of that kind on any machine, and systemd/smbtuned.catalog explains
 * each one (`journalctl -x`). A new kind gets a new id here and an entry
 * in the catalog. */
#ifndef SMBTUNE_JOURNAL_IDS_H
#define SMBTUNE_JOURNAL_IDS_H

/* socket options changed: the winner of a search written into smb.conf
 * and applied. */
#define JOURNAL_ID_COMMIT "93824c0bab924f0eb00965246bfb06d3"

/* A trial value taken back out of smb.conf (end of a live trial, a stop,
 * or recovery after a crash). */
#define JOURNAL_ID_TAKE_BACK "ebdcd335fb1147cf82b7ffdf9c486473"

/* Hands off: the socket options line no longer holds what smbtuned wrote
 * (edited by hand), the state file is damaged, or a job editing smb.conf
 * was killed and did not end; nothing is changed until `smbtuned
 * --resume`. */
#define JOURNAL_ID_HOLD "ec5b93e10bf14673b8d0108819ff6f92"

/* A search started from the configuration in force. */
#define JOURNAL_ID_SEARCH_START "c6c98c2c92274ac387f46b898d8362ad"

/* A search finished: a winner was found (a commit follows when it is not
 * the configuration in force) or the configuration in force was kept. */
#define JOURNAL_ID_SEARCH_END "7ac5b4501c044507ac18324062b6164b"

/* The rates of the configuration in force drifted from those it was
 * chosen with: a search starts again. */
#define JOURNAL_ID_DRIFT "bd2fa9426ee443f2872e1f4331cee8a1"

/* smbtuned started (or --once began): its version, mode and target. */
#define JOURNAL_ID_START "5d39a3cfc1cb4781aba752561833ecae"

/* A cycle ended: its result (done or failed) and what is in force. */
#define JOURNAL_ID_CYCLE "2c2fc37433d547ec828163698a3966e1"

/* One sample of a search: the trial's sizes and rates. */
#define JOURNAL_ID_TRIAL "fc1af4fd2195499b9de0bf3cab76954f"

/* The search moved its incumbent to a significantly faster size. */
#define JOURNAL_ID_MOVE "8b00c586b26249cbad4572ef2db5c506"

/* A verification sample of the winner matched what it was chosen with. */
#define JOURNAL_ID_VERIFY "8f0e42718ab743de9f445927bd66c35a"

/* `smbtuned --resume` ended a hold. */
#define JOURNAL_ID_RESUME "04ffd5b98058421b9fe7c0b902bdec00"

/* A restart of smbd is needed (or done) for autotuning to reach new
 * connections. */
#define JOURNAL_ID_RESTART "a37ee238616049669944ccd25f3737a2"

/* The kernel's net.core.rmem_max / wmem_max bounds the sizes tried, or the
 * winner is at that cap. */
#define JOURNAL_ID_KERNEL_CAP "7c4a6c95fc5445daa2fbc7114a68dd92"

/* Samba, the kernel or the smb.conf path changed since the last
 * measurements: before and after, and a search starts again. */
#define JOURNAL_ID_UPGRADE "b778f77fc9744455a63a53f1bac231e0"

/* Once a cycle, what smbd's real connections get: how many, how many
 * each cause holds back (the server's send or receive buffer, the
 * client's window, the network), their round trips and the largest
 * bandwidth-delay product among the buffer-limited ones. No client
 * address (`smbtuned --clients` shows each connection). */
#define JOURNAL_ID_CLIENTS "3f48cf989c17468cab2dd25544e788f9"

/* smbd's real connections are held back by the server's own buffers,
 * and more can be given: a search starts again though verification saw
 * no drift (a new population of clients, further away). */
#define JOURNAL_ID_STEER "f8514869ae9540808e9c9315530dfc70"

/* Something failed (a probe, an edit, the state file): the cycle ends
 * without a change; SMBTUNED_ERROR names what. */
#define JOURNAL_ID_ERROR "3c840023d49f444791b84621967fc684"

#endif
