#ifndef PROGRESSION_CSQLITE_SHIM_H
#define PROGRESSION_CSQLITE_SHIM_H

#include <sqlite3.h>

/// `SQLITE_TRANSIENT` is a macro casting -1 to a function pointer, which Swift cannot import.
static inline sqlite3_destructor_type progression_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/// Wraps the variadic `sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL/DML, 0, NULL)`: double-quoted string literals
/// are a misfeature that turns a misspelt column name into a string; refuse them.
static inline void progression_sqlite_disable_dqs(sqlite3 *db) {
    sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, (void *)0);
    sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, (void *)0);
}

/// Wraps the variadic `sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL)`: forbids writes that can corrupt
/// the file (writable_schema and friends).
static inline void progression_sqlite_enable_defensive(sqlite3 *db) {
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (void *)0);
}

#endif
