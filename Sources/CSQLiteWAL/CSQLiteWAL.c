// A VFS over the system's default one that writes the frames of a WAL commit with one `write` call.
//
// SQLite appends a frame to the `-wal` file as two writes: its 24-byte header, then the page. A commit of a few jobs
// touches a dozen pages, so each commit made some 30 `pwrite` calls, each paying the kernel's fixed cost per call
// (ext4's write_begin/write_end per folio, the inode lock, the time stamps): the largest single cost on the writer's
// thread at 8 jobs in flight (18 % of its samples). This VFS keeps a transaction's appended frames in a buffer and
// writes them with one call when the commit frame is complete.
//
// Why it is safe: SQLite can read back, publish or sync WAL content only through calls this file sees.
// - Only whole frames are buffered, appended where the handle's previous write ended: a frame header (24 bytes right
//   after a whole page or the log's own header), then its page (a whole page right after it). Any other write (the
//   log's header at offset 0, a page overwritten in place, the checksum headers rewritten at commit, the parts of a
//   frame split at a sync point) first writes the buffer, then goes straight to the file.
// - The buffer is written before any other operation on the `-wal` file (read, size, sync, truncate, lock, file
//   control, close): SQLite reads back what it wrote, and a sync covers it.
// - It is written when the page of a commit frame (a header whose "database size after commit" field is not zero)
//   completes it, so a commit leaves nothing buffered: sqlite3_step returns a committed transaction only once its
//   frames are in the file, as without this VFS, and a process killed at any point leaves what SQLite alone would have.
// - As a second guard, it is written before the connection's database file publishes a new WAL index header or
//   takes or releases a WAL index lock (xShmBarrier, xShmLock), the points at which other connections could look for
//   the frames, and at the latest when a transaction ends and releases the write lock.
// - A `-wal` file whose database file this VFS cannot find (so that the second guard cannot apply) is not buffered.
// Frames of a transaction that spills its cache before committing stay buffered (up to the buffer's size) until the
// commit, or until the transaction ends without one and releases the write lock; if the process dies first, they are
// lost with the uncommitted transaction, which SQLite discards on recovery anyway.
#include "CSQLiteWAL.h"

#include <pthread.h>
#include <string.h>

enum {
    FRAME_HEADER_SIZE = 24,
    // SQLite's unix VFS writes at most 128 KiB - 1 bytes a call (it masks a write's length to 17 bits).
    BUFFER_CAPACITY = 120 * 1024,
};

/// What a file is to this VFS: only `-wal` files are buffered; main database files guard their connection's log.
typedef enum { ROLE_OTHER, ROLE_WAL, ROLE_MAIN } Role;

typedef struct WalFile WalFile;

struct WalFile {
    sqlite3_file base;
    /// The default VFS's file, allocated after this struct.
    sqlite3_file *real;
    Role role;
    /// `-wal` files: pending bytes, to be written at `bufferStart`.
    unsigned char *buffer;
    int bufferLength;
    sqlite3_int64 bufferStart;
    /// `-wal` files: where the handle's last write (buffered or not) ended.
    sqlite3_int64 end;
    /// `-wal` files: the last buffered write is a frame header (its page comes next), and that header marks a commit.
    int headerPending;
    int commitPending;
    /// `-wal` files: the handle's last write was a whole page or the log's header (a frame header may follow).
    int afterPageOrLogHeader;
    /// `-wal` files: SQLite's `xWrite` calls, and the writes made to the file for them.
    sqlite3_int64 sqliteWrites;
    sqlite3_int64 fileWrites;
    /// Main database files: the name SQLite opened them with (a pointer its WAL's name leads back to), the open
    /// `-wal` file of the same connection, and the list of open main database files.
    const char *name;
    WalFile *wal;
    WalFile *next;
    /// `-wal` files: the main database file of the same connection, if found.
    WalFile *database;
};

static sqlite3_vfs *underlying;
static sqlite3_vfs vfs;
static pthread_once_t registerOnce = PTHREAD_ONCE_INIT;
static int registerResult = SQLITE_OK;

static pthread_mutex_t mainFilesLock = PTHREAD_MUTEX_INITIALIZER;
static WalFile *mainFiles;

// MARK: - The buffer

static int flushBuffer(WalFile *p) {
    if (p->bufferLength == 0) return SQLITE_OK;
    int length = p->bufferLength;
    p->bufferLength = 0;
    p->headerPending = 0;
    p->commitPending = 0;
    p->fileWrites += 1;
    return p->real->pMethods->xWrite(p->real, p->buffer, length, p->bufferStart);
}

/// Writes what `file` (a main database file) has buffered in its connection's `-wal` file.
static int flushConnection(WalFile *p) {
    if (p->role != ROLE_MAIN || p->wal == NULL) return SQLITE_OK;
    return flushBuffer(p->wal);
}

static int isPageSize(int amount) {
    return amount >= 512 && amount <= 65536 && (amount & (amount - 1)) == 0;
}

static int writeThrough(WalFile *p, const void *data, int amount, sqlite3_int64 offset) {
    p->fileWrites += 1;
    p->end = offset + amount;
    p->afterPageOrLogHeader = isPageSize(amount) || (offset == 0 && amount == 32);
    return p->real->pMethods->xWrite(p->real, data, amount, offset);
}

static int walWrite(WalFile *p, const void *data, int amount, sqlite3_int64 offset) {
    p->sqliteWrites += 1;
    int appends = offset == p->end && p->database != NULL;
    int header = appends && amount == FRAME_HEADER_SIZE && p->afterPageOrLogHeader;
    int page = appends && p->headerPending && isPageSize(amount);
    if (!header && !page) {
        int rc = flushBuffer(p);
        if (rc != SQLITE_OK) return rc;
        return writeThrough(p, data, amount, offset);
    }
    if (p->bufferLength + amount > BUFFER_CAPACITY) {
        int rc = flushBuffer(p);
        if (rc != SQLITE_OK) return rc;
        // The header went with the buffer: its page follows it straight to the file.
        if (page) return writeThrough(p, data, amount, offset);
    }
    if (p->buffer == NULL) {
        p->buffer = sqlite3_malloc(BUFFER_CAPACITY);
        if (p->buffer == NULL) return writeThrough(p, data, amount, offset);
    }
    if (p->bufferLength == 0) p->bufferStart = offset;
    memcpy(p->buffer + p->bufferLength, data, (size_t)amount);
    p->bufferLength += amount;
    p->end = offset + amount;
    if (header) {
        // Bytes 4-7: the database's size in pages after a commit; zero for the other frames of a transaction.
        const unsigned char *bytes = data;
        p->headerPending = 1;
        p->commitPending = (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
        p->afterPageOrLogHeader = 0;
        return SQLITE_OK;
    }
    p->headerPending = 0;
    p->afterPageOrLogHeader = 1;
    return p->commitPending ? flushBuffer(p) : SQLITE_OK;
}

// MARK: - I/O methods: each writes the buffer first, then forwards

#define REAL(file) (((WalFile *)(file))->real)
#define FLUSH_OR_RETURN(file)                                  \
    do {                                                       \
        int flushed = flushBuffer((WalFile *)(file));          \
        if (flushed != SQLITE_OK) return flushed;              \
    } while (0)

/// Undoes what vfsOpen linked: a main database file leaves the list; a `-wal` file and its database forget each other.
static void unlinkFile(WalFile *p) {
    pthread_mutex_lock(&mainFilesLock);
    if (p->role == ROLE_MAIN) {
        for (WalFile **link = &mainFiles; *link != NULL; link = &(*link)->next) {
            if (*link == p) {
                *link = p->next;
                break;
            }
        }
        if (p->wal != NULL) p->wal->database = NULL;
    } else if (p->role == ROLE_WAL && p->database != NULL) {
        p->database->wal = NULL;
    }
    pthread_mutex_unlock(&mainFilesLock);
}

static int fileClose(sqlite3_file *file) {
    WalFile *p = (WalFile *)file;
    int flushed = flushBuffer(p);
    unlinkFile(p);
    int rc = p->real->pMethods->xClose(p->real);
    sqlite3_free(p->buffer);
    p->buffer = NULL;
    return flushed != SQLITE_OK ? flushed : rc;
}

static int fileRead(sqlite3_file *file, void *data, int amount, sqlite3_int64 offset) {
    FLUSH_OR_RETURN(file);
    return REAL(file)->pMethods->xRead(REAL(file), data, amount, offset);
}

static int fileWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
    WalFile *p = (WalFile *)file;
    if (p->role == ROLE_WAL) return walWrite(p, data, amount, offset);
    return p->real->pMethods->xWrite(p->real, data, amount, offset);
}

static int fileTruncate(sqlite3_file *file, sqlite3_int64 size) {
    FLUSH_OR_RETURN(file);
    return REAL(file)->pMethods->xTruncate(REAL(file), size);
}

static int fileSync(sqlite3_file *file, int flags) {
    FLUSH_OR_RETURN(file);
    return REAL(file)->pMethods->xSync(REAL(file), flags);
}

static int fileSize(sqlite3_file *file, sqlite3_int64 *size) {
    FLUSH_OR_RETURN(file);
    return REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int fileLock(sqlite3_file *file, int level) {
    FLUSH_OR_RETURN(file);
    return REAL(file)->pMethods->xLock(REAL(file), level);
}

static int fileUnlock(sqlite3_file *file, int level) {
    FLUSH_OR_RETURN(file);
    return REAL(file)->pMethods->xUnlock(REAL(file), level);
}

static int fileCheckReservedLock(sqlite3_file *file, int *result) {
    return REAL(file)->pMethods->xCheckReservedLock(REAL(file), result);
}

static int fileControl(sqlite3_file *file, int op, void *argument) {
    WalFile *p = (WalFile *)file;
    if (op == PROGRESSION_WAL_VFS_STATISTICS && p->role == ROLE_MAIN) {
        progression_wal_vfs_statistics *statistics = argument;
        memset(statistics, 0, sizeof(*statistics));
        if (p->wal != NULL) {
            statistics->sqlite_writes = p->wal->sqliteWrites;
            statistics->file_writes = p->wal->fileWrites;
            statistics->linked = 1;
        }
        return SQLITE_OK;
    }
    FLUSH_OR_RETURN(file);
    return REAL(file)->pMethods->xFileControl(REAL(file), op, argument);
}

static int fileSectorSize(sqlite3_file *file) {
    return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int fileDeviceCharacteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

static int fileShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **pointer) {
    return REAL(file)->pMethods->xShmMap(REAL(file), region, size, extend, pointer);
}

static int fileShmLock(sqlite3_file *file, int offset, int count, int flags) {
    int flushed = flushConnection((WalFile *)file);
    // An unlock goes through whatever happened: SQLite ignores its result, and a lock it believes released must be.
    // What a failed write there held can only be frames of a transaction ending without a commit.
    if (flushed != SQLITE_OK && (flags & SQLITE_SHM_UNLOCK) == 0) return flushed;
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, count, flags);
}

static void fileShmBarrier(sqlite3_file *file) {
    // With SQLite's order of writes the buffer is already empty here (a commit frame's page wrote it); this guard is
    // for an order this file does not know. xShmBarrier cannot report an error: a failed write there leaves frames
    // missing from the file, which SQLite reports as an I/O error or corruption when it reads them.
    (void)flushConnection((WalFile *)file);
    REAL(file)->pMethods->xShmBarrier(REAL(file));
}

static int fileShmUnmap(sqlite3_file *file, int deleteFlag) {
    return REAL(file)->pMethods->xShmUnmap(REAL(file), deleteFlag);
}

static int fileFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **pointer) {
    return REAL(file)->pMethods->xFetch(REAL(file), offset, amount, pointer);
}

static int fileUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) {
    return REAL(file)->pMethods->xUnfetch(REAL(file), offset, pointer);
}

static const sqlite3_io_methods methodsVersion3 = {
    3, fileClose, fileRead, fileWrite, fileTruncate, fileSync, fileSize, fileLock, fileUnlock, fileCheckReservedLock,
    fileControl, fileSectorSize, fileDeviceCharacteristics, fileShmMap, fileShmLock, fileShmBarrier, fileShmUnmap,
    fileFetch, fileUnfetch,
};

static const sqlite3_io_methods methodsVersion2 = {
    2, fileClose, fileRead, fileWrite, fileTruncate, fileSync, fileSize, fileLock, fileUnlock, fileCheckReservedLock,
    fileControl, fileSectorSize, fileDeviceCharacteristics, fileShmMap, fileShmLock, fileShmBarrier, fileShmUnmap,
    NULL, NULL,
};

static const sqlite3_io_methods methodsVersion1 = {
    1, fileClose, fileRead, fileWrite, fileTruncate, fileSync, fileSize, fileLock, fileUnlock, fileCheckReservedLock,
    fileControl, fileSectorSize, fileDeviceCharacteristics, NULL, NULL, NULL, NULL, NULL, NULL,
};

// MARK: - VFS methods

static int realOffset(void) {
    return (int)((sizeof(WalFile) + 15) & ~(size_t)15);
}

static int vfsOpen(sqlite3_vfs *self, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    (void)self;
    WalFile *p = (WalFile *)file;
    memset(p, 0, sizeof(WalFile));
    p->real = (sqlite3_file *)((unsigned char *)file + realOffset());
    int rc = underlying->xOpen(underlying, name, p->real, flags, outFlags);
    if (p->real->pMethods == NULL) {
        p->base.pMethods = NULL;
        return rc;
    }
    int version = p->real->pMethods->iVersion;
    p->base.pMethods = version >= 3 ? &methodsVersion3 : version == 2 ? &methodsVersion2 : &methodsVersion1;
    if (rc != SQLITE_OK) return rc;
    if (flags & SQLITE_OPEN_WAL) {
        p->role = ROLE_WAL;
        // SQLite names a WAL file inside the allocation of its database's name, which leads back to it.
        const char *databaseName = name != NULL ? sqlite3_filename_database(name) : NULL;
        pthread_mutex_lock(&mainFilesLock);
        for (WalFile *main = mainFiles; main != NULL && databaseName != NULL; main = main->next) {
            if (main->name == databaseName && main->wal == NULL) {
                main->wal = p;
                p->database = main;
                break;
            }
        }
        pthread_mutex_unlock(&mainFilesLock);
    } else if ((flags & SQLITE_OPEN_MAIN_DB) && name != NULL) {
        p->role = ROLE_MAIN;
        p->name = name;
        pthread_mutex_lock(&mainFilesLock);
        p->next = mainFiles;
        mainFiles = p;
        pthread_mutex_unlock(&mainFilesLock);
    }
    return SQLITE_OK;
}

static int vfsDelete(sqlite3_vfs *self, const char *name, int syncDirectory) {
    (void)self;
    return underlying->xDelete(underlying, name, syncDirectory);
}

static int vfsAccess(sqlite3_vfs *self, const char *name, int flags, int *result) {
    (void)self;
    return underlying->xAccess(underlying, name, flags, result);
}

static int vfsFullPathname(sqlite3_vfs *self, const char *name, int size, char *output) {
    (void)self;
    return underlying->xFullPathname(underlying, name, size, output);
}

static void *vfsDlOpen(sqlite3_vfs *self, const char *name) {
    (void)self;
    return underlying->xDlOpen(underlying, name);
}

static void vfsDlError(sqlite3_vfs *self, int size, char *message) {
    (void)self;
    underlying->xDlError(underlying, size, message);
}

static void (*vfsDlSym(sqlite3_vfs *self, void *handle, const char *symbol))(void) {
    (void)self;
    return underlying->xDlSym(underlying, handle, symbol);
}

static void vfsDlClose(sqlite3_vfs *self, void *handle) {
    (void)self;
    underlying->xDlClose(underlying, handle);
}

static int vfsRandomness(sqlite3_vfs *self, int size, char *output) {
    (void)self;
    return underlying->xRandomness(underlying, size, output);
}

static int vfsSleep(sqlite3_vfs *self, int microseconds) {
    (void)self;
    return underlying->xSleep(underlying, microseconds);
}

static int vfsCurrentTime(sqlite3_vfs *self, double *time) {
    (void)self;
    return underlying->xCurrentTime(underlying, time);
}

static int vfsGetLastError(sqlite3_vfs *self, int size, char *message) {
    (void)self;
    return underlying->xGetLastError ? underlying->xGetLastError(underlying, size, message) : 0;
}

static int vfsCurrentTimeInt64(sqlite3_vfs *self, sqlite3_int64 *time) {
    (void)self;
    return underlying->xCurrentTimeInt64(underlying, time);
}

static int vfsSetSystemCall(sqlite3_vfs *self, const char *name, sqlite3_syscall_ptr call) {
    (void)self;
    return underlying->xSetSystemCall(underlying, name, call);
}

static sqlite3_syscall_ptr vfsGetSystemCall(sqlite3_vfs *self, const char *name) {
    (void)self;
    return underlying->xGetSystemCall(underlying, name);
}

static const char *vfsNextSystemCall(sqlite3_vfs *self, const char *name) {
    (void)self;
    return underlying->xNextSystemCall(underlying, name);
}

static void registerVFS(void) {
    underlying = sqlite3_vfs_find(NULL);
    if (underlying == NULL) {
        registerResult = SQLITE_ERROR;
        return;
    }
    int version = underlying->iVersion < 3 ? underlying->iVersion : 3;
    vfs.iVersion = version;
    vfs.szOsFile = realOffset() + underlying->szOsFile;
    vfs.mxPathname = underlying->mxPathname;
    vfs.zName = PROGRESSION_WAL_VFS_NAME;
    vfs.xOpen = vfsOpen;
    vfs.xDelete = vfsDelete;
    vfs.xAccess = vfsAccess;
    vfs.xFullPathname = vfsFullPathname;
    vfs.xDlOpen = vfsDlOpen;
    vfs.xDlError = vfsDlError;
    vfs.xDlSym = vfsDlSym;
    vfs.xDlClose = vfsDlClose;
    vfs.xRandomness = vfsRandomness;
    vfs.xSleep = vfsSleep;
    vfs.xCurrentTime = vfsCurrentTime;
    vfs.xGetLastError = vfsGetLastError;
    if (version >= 2) vfs.xCurrentTimeInt64 = vfsCurrentTimeInt64;
    if (version >= 3) {
        vfs.xSetSystemCall = vfsSetSystemCall;
        vfs.xGetSystemCall = vfsGetSystemCall;
        vfs.xNextSystemCall = vfsNextSystemCall;
    }
    registerResult = sqlite3_vfs_register(&vfs, 0);
}

int progression_wal_vfs_register(void) {
    pthread_once(&registerOnce, registerVFS);
    return registerResult;
}
