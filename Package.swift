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
        .executable(name: "progressctl", targets: ["progressctl"]),
        .executable(name: "progression-bench", targets: ["progression-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // The system's libsqlite3 (Debian: libsqlite3-dev).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // A thin Swift layer over SQLite: connections, statements, errors, migrations. Internal to the package.
        .target(
            name: "ProgressionSQLite",
            dependencies: ["CSQLite"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Progression",
            dependencies: ["ProgressionSQLite"],
            swiftSettings: swiftSettings
        ),
        // The operator's command-line tool.
        .executableTarget(
            name: "progressctl",
            dependencies: [
                "Progression",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "progression-bench",
            dependencies: ["Progression", "ProgressionSQLite", "CSQLite"],
            path: "Sources/progression-bench",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProgressionSQLiteTests",
            dependencies: ["ProgressionSQLite"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProgressionTests",
            dependencies: ["Progression", "ProgressionSQLite"],
            swiftSettings: swiftSettings
        ),
        // Runs the built progressctl binary as a child process; depending on it makes `swift test` build it.
        .testTarget(
            name: "ProgressctlTests",
            dependencies: ["Progression", "progressctl"],
            swiftSettings: swiftSettings
        ),
    ]
)
