// swift-tools-version:6.2
import PackageDescription

/// Settings shared by every Swift target: Swift 6 language mode (complete concurrency checking) plus the
/// upcoming features that make dependencies and existentials explicit.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Progression",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Progression", targets: ["Progression"]),
        // What a package that depends on this one may use: the operator's tool, the demo, and the benchmark (to
        // measure on one's own hardware). The test tools (crash, fault, fleet, chaos) and the console's benchmark are
        // library targets that no product names, run as `progression-bench <tool> …`: SwiftPM lists every executable
        // target of a root package as a product (`swift package describe`), so as executables they were seen by all.
        .executable(name: "progressctl", targets: ["progressctl"]),
        .executable(name: "progression-bench", targets: ["progression-bench"]),
        .executable(name: "progression-demo", targets: ["progression-demo"]),
        // The same store on PostgreSQL, for executors on several hosts. Built only with the `PostgreSQL` trait.
        .library(name: "ProgressionPostgres", targets: ["ProgressionPostgres"]),
        // The operator's console in a browser, on Hummingbird: routes a service mounts in its own application, and
        // `progressctl console`. Built only with the `Console` trait.
        .library(name: "ProgressionConsole", targets: ["ProgressionConsole"]),
    ],
    traits: [
        .trait(
            name: "PostgreSQL",
            description: "PostgresTaskStore (the ProgressionPostgres product) on postgres-nio, and `--db postgres://…` "
                + "in progressctl, progression-demo, the crash test and the bench. Off by default: SQLite users do "
                + "not build postgres-nio."
        ),
        .trait(
            name: "Console",
            description: "ProgressionConsole (the operator's console in a browser, on Hummingbird) and "
                + "`progressctl console`. Off by default: SQLite users and progression-demo do not build Hummingbird."
        ),
        .trait(
            name: "LatencyTimeline",
            description: "Marks along one job's way (LatencyTimeline), printed stage by stage by progression-bench's "
                + "latency scenarios. Off by default: without it a mark costs nothing."
        ),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Graceful shutdown on SIGTERM/SIGINT for the executor as a service; brings swift-log.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The run queue's heap (already built for swift-service-lifecycle's dependencies).
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // Counters and timers of the executor, a span per task: the Swift server ecosystem's observability APIs (both
        // small; no-ops until the application bootstraps a backend).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // PostgresTaskStore; only built with the `PostgreSQL` trait.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // ProgressionConsole; only built with the `Console` trait. Without its default traits: the console reads no
        // swift-configuration.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        // HTTP's field names and statuses, as Hummingbird uses them (already built for it).
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // The address the console's server listens on, for `progressctl console --port 0` (already built for it).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // The system's libsqlite3 (Debian: libsqlite3-dev).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // A VFS over SQLite's default one that writes a WAL commit's frames with one write call (C: SQLite's VFS is
        // a C interface of function pointers and struct layouts).
        .target(
            name: "CSQLiteWAL",
            dependencies: ["CSQLite"]
        ),
        // A thin Swift layer over SQLite: connections, statements, errors, migrations. Internal to the package.
        .target(
            name: "ProgressionSQLite",
            dependencies: ["CSQLite", "CSQLiteWAL"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Progression",
            dependencies: [
                "ProgressionSQLite",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the tests and the fault-injection suite share: a store that fails on purpose, temporary directories,
        // child processes run with deadlines, waits with deadlines, gates and a manual clock. Not a product; it stays
        // light (Foundation and Progression only: no postgres-nio, no Testing).
        .target(
            name: "ProgressionTestSupport",
            dependencies: ["Progression"],
            swiftSettings: swiftSettings
        ),
        // PostgresTaskStore: the TaskStore contract on PostgreSQL, for executors on several hosts. Without the
        // `PostgreSQL` trait its sources compile to nothing (they are wrapped in `#if PostgreSQL`) and postgres-nio is
        // not built.
        .target(
            name: "ProgressionPostgres",
            dependencies: [
                "Progression",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // A throwaway PostgreSQL server on this machine (initdb, pg_ctl, runuser) for the tests, the crash and chaos
        // tests and the bench, with what they do to it (restarts, killed backends, TCP on a given address). Not a
        // product: it never ships with `ProgressionPostgres`. Its sources are wrapped in `#if PostgreSQL`.
        .target(
            name: "ProgressionPostgresTestSupport",
            dependencies: [
                "Progression",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
            ],
            swiftSettings: swiftSettings
        ),
        // What progressctl and the console share: opening a database by path or URL, reading it as `--json` shows it,
        // and changing tasks through the one control path (TaskControl). Not a product; no HTTP in it.
        .target(
            name: "ProgressionOperator",
            dependencies: [
                "Progression",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
            ],
            swiftSettings: swiftSettings
        ),
        // The operator's console in a browser: server-rendered pages, a JSON API and live updates (Server-Sent Events)
        // on Hummingbird, changing tasks through ProgressionOperator's TaskControl. Without the `Console` trait its
        // sources compile to nothing (they are wrapped in `#if Console`) and Hummingbird is not built.
        .target(
            name: "ProgressionConsole",
            dependencies: [
                "Progression", "ProgressionOperator",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Console"])),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Console"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Console"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The operator's command-line tool (`progressctl console` with the `Console` trait).
        .executableTarget(
            name: "progressctl",
            dependencies: [
                "Progression", "ProgressionOperator",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .target(name: "ProgressionConsole", condition: .when(traits: ["Console"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // `progression-bench crash-test`: kills a batch worker with SIGKILL at random moments and checks nothing was
        // lost or redone (run by .ci/run); its worker mode is also the child process of the recovery tests.
        .target(
            name: "ProgressionCrashTest",
            dependencies: [
                "Progression",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .target(name: "ProgressionPostgresTestSupport", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/crash-test",
            swiftSettings: swiftSettings
        ),
        // `progression-bench fault-test`: runs jobs on a store that fails at random (full disk, I/O errors, locks held
        // too long) and checks that nothing is lost, stuck, failed or redone (run by .ci/run with a fixed seed).
        .target(
            name: "ProgressionFaultTest",
            dependencies: [
                "Progression", "ProgressionTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/fault-test",
            swiftSettings: swiftSettings
        ),
        // `progression-bench fleet-test`: the fleet's processes for tests: workers that run test kinds and fire
        // schedules (on an accelerated clock when asked), and a producer that only enqueues through JobClient.
        .target(
            name: "ProgressionFleetTest",
            dependencies: [
                "Progression", "ProgressionTestSupport",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/fleet-test",
            swiftSettings: swiftSettings
        ),
        // `progression-bench chaos-test`: three workers on one PostgreSQL server that is restarted and whose backends
        // are killed at random, and a network partition of one worker (network namespaces); checks that every job
        // completes once, no worker freezes and all stop gracefully (run by .ci/run). Without the `PostgreSQL` trait
        // it only says so.
        .target(
            name: "ProgressionChaosTest",
            dependencies: [
                "Progression", "ProgressionTestSupport",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .target(name: "ProgressionPostgresTestSupport", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/chaos-test",
            swiftSettings: swiftSettings
        ),
        // Measures the performance targets side by side in one run (release builds only); not part of `swift test`.
        // `progression-bench <tool> …` runs one of the test tools (crash-test, fault-test, fleet-test, chaos-test,
        // console-bench), in any build.
        .executableTarget(
            name: "progression-bench",
            dependencies: [
                "Progression", "ProgressionSQLite", "CSQLite", .product(name: "Logging", package: "swift-log"),
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .target(name: "ProgressionPostgresTestSupport", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                "ProgressionCrashTest", "ProgressionFaultTest", "ProgressionFleetTest", "ProgressionChaosTest",
                "ProgressionConsoleBench",
            ],
            path: "Sources/progression-bench",
            swiftSettings: swiftSettings
        ),
        // `progression-bench console-bench` measures the console (issue 24): its list and job pages on a large
        // database, and live pages on a busy worker (release builds; a debug build with --quick only checks that it
        // runs). Without the `Console` trait it only says so.
        .target(
            name: "ProgressionConsoleBench",
            dependencies: [
                "Progression", "ProgressionSQLite", "ProgressionOperator",
                .target(name: "ProgressionConsole", condition: .when(traits: ["Console"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/console-bench",
            swiftSettings: swiftSettings
        ),
        // The example batch service: checksums a directory tree as a resumable job, with a live progress tree.
        .executableTarget(
            name: "progression-demo",
            dependencies: [
                "Progression",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/progression-demo",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProgressionSQLiteTests",
            dependencies: ["ProgressionSQLite", "ProgressionTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProgressionTests",
            dependencies: [
                "Progression", "ProgressionSQLite", "ProgressionTestSupport", "progression-bench", "progressctl",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .target(name: "ProgressionPostgresTestSupport", condition: .when(traits: ["PostgreSQL"])),
            ],
            swiftSettings: swiftSettings
        ),
        // Runs the built progressctl binary as a child process; depending on it makes `swift test` build it.
        .testTarget(
            name: "ProgressctlTests",
            dependencies: ["Progression", "ProgressionOperator", "ProgressionTestSupport", "progressctl"],
            swiftSettings: swiftSettings
        ),
        // Runs the built progression-demo (and progressctl) binaries as child processes.
        .testTarget(
            name: "DemoTests",
            dependencies: ["Progression", "ProgressionSQLite", "ProgressionTestSupport", "progression-demo"],
            swiftSettings: swiftSettings
        ),
        // The console's routes through HummingbirdTesting, on SQLite and PostgreSQL: every page and API call, the
        // token, CSRF and escaping; and `progressctl console` run as a child process. Its sources are wrapped in
        // `#if Console`.
        .testTarget(
            name: "ProgressionConsoleTests",
            dependencies: [
                "Progression", "ProgressionOperator", "ProgressionTestSupport", "progressctl",
                .target(name: "ProgressionConsole", condition: .when(traits: ["Console"])),
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .target(name: "ProgressionPostgresTestSupport", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Console"])),
                .product(name: "HummingbirdTesting", package: "hummingbird", condition: .when(traits: ["Console"])),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Console"])),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // PostgresTaskStore against a real server that the tests start (initdb + pg_ctl on a Unix socket): schema,
        // query plans, notifications, and several "hosts" (progression-demo processes) on one database. Its sources
        // are wrapped in `#if PostgreSQL`.
        .testTarget(
            name: "ProgressionPostgresTests",
            dependencies: [
                "Progression", "ProgressionTestSupport", "progressctl", "progression-demo", "progression-bench",
                .target(name: "ProgressionPostgres", condition: .when(traits: ["PostgreSQL"])),
                .target(name: "ProgressionPostgresTestSupport", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
