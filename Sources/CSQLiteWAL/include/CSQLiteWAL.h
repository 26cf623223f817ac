#ifndef PROGRESSION_CSQLITE_WAL_H
#define PROGRESSION_CSQLITE_WAL_H

#include <sqlite3.h>

/// The name of the VFS that `progression_wal_vfs_register` adds: the system's default VFS, with the frames that one
/// transaction appends to a `-wal` file written by one `write` call instead of two per page.
#define PROGRESSION_WAL_VFS_NAME "progression-wal"

/// Registers the VFS named `PROGRESSION_WAL_VFS_NAME` (not as the default) over the default VFS. Idempotent and
/// thread-safe. Returns `SQLITE_OK`, or SQLite's error when there is no default VFS or registering fails.
int progression_wal_vfs_register(void);

/// The file control (`sqlite3_file_control(db, "main", PROGRESSION_WAL_VFS_STATISTICS, &statistics)`) that fills a
/// `progression_wal_vfs_statistics` for the connection's `-wal` file. It returns `SQLITE_NOTFOUND` on a database not
/// opened with this VFS. The number is outside the range of SQLite's own file controls.
#define PROGRESSION_WAL_VFS_STATISTICS 0x50524757

typedef struct progression_wal_vfs_statistics {
    /// The `xWrite` calls SQLite made on the connection's `-wal` file (two a frame).
    sqlite3_int64 sqlite_writes;
    /// The writes this VFS made to the file for them.
    sqlite3_int64 file_writes;
    /// 1 when the connection's `-wal` file is open and known to its database file (the second guard applies).
    int linked;
} progression_wal_vfs_statistics;

#endif
