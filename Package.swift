// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Cirrus",
    // Synchronization.Mutex (CirrusStore) needs macOS 15.
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CirrusWire", targets: ["CirrusWire"]),
        .library(name: "CirrusTLS", targets: ["CirrusTLS"]),
        .library(name: "CirrusModel", targets: ["CirrusModel"]),
        .library(name: "CirrusKit", targets: ["CirrusKit"]),
        .library(name: "CirrusStore", targets: ["CirrusStore"]),
        .library(name: "CirrusPostgres", targets: ["CirrusPostgres"]),
        .library(name: "CirrusServer", targets: ["CirrusServer"]),
        .library(name: "CirrusBench", targets: ["CirrusBench"]),
        .library(name: "CirrusCLI", targets: ["CirrusCLI"]),
        .executable(name: "cirrusd", targets: ["cirrusd"]),
        .executable(name: "cirrus", targets: ["cirrus"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.0.0"),
        // `swift package generate-documentation --target CirrusKit` (the DocC catalogs); a
        // command plugin only, nothing of it is linked into a product.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // C libraries and the shims for what Swift cannot import from them.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CProtobufC",
            pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]
        ),
        // System calls Swift's Glibc module leaves out (declared only with _GNU_SOURCE).
        .systemLibrary(name: "CSystemShims"),
        // The allocator of the two executables (see Sources/CMimalloc/shim.h).
        .systemLibrary(
            name: "CMimalloc",
            providers: [.apt(["libmimalloc-dev"])]
        ),
        // A SQLite VFS that writes each write-ahead-log transaction with one call (wal_vfs.c), and a
        // page cache that keeps the locking page's number out of SQLite's own (page_cache.c).
        .target(
            name: "CSQLiteWAL",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        // protoc-c output for Protos/, committed; Scripts/generate-protos.sh regenerates it.
        .target(
            name: "CCirrusProto",
            dependencies: ["CProtobufC"]
        ),

        // Frame codec, protocol value types, connection state machine.
        .target(
            name: "CirrusWire",
            dependencies: [
                "CCirrusProto",
                "COpenSSL",
                "CProtobufC",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // TLS over OpenSSL memory BIOs as a SwiftNIO channel handler.
        .target(
            name: "CirrusTLS",
            dependencies: [
                "COpenSSL",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        // Value types both sides share: CKRecord, IDs, zones, references, assets, CKError …
        .target(
            name: "CirrusModel",
            dependencies: ["CirrusWire"]
        ),
        // The client library: CKContainer, CKDatabase, CKOperation and its subclasses.
        .target(
            name: "CirrusKit",
            dependencies: [
                "CirrusModel",
                "CirrusWire",
                "CirrusTLS",
                "CSystemShims",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The storage protocol and its SQLite engine.
        .target(
            name: "CirrusStore",
            dependencies: [
                "CirrusWire",
                "CSQLiteWAL",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the rows the writer binds itself (RawStatement).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // The PostgreSQL storage engine (in progress: see README → PostgreSQL).
        .target(
            name: "CirrusPostgres",
            dependencies: [
                "CirrusStore",
                "CirrusWire",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // ConnectionPoolError, to tell a pool that gave up connecting from other failures.
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Connection handling and the listener.
        .target(
            name: "CirrusServer",
            dependencies: [
                "CirrusWire",
                "CirrusTLS",
                "CirrusStore",
                "CSystemShims",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // Running cirrusd: the metrics and health endpoint, backups, configuration files.
        // Prometheus stays here, out of CirrusKit and CirrusServer.
        .target(
            name: "CirrusOperations",
            dependencies: [
                "CirrusServer",
                "CirrusStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "cirrusd",
            dependencies: [
                "CMimalloc",
                "CirrusOperations",
                "CirrusPostgres",
                "CirrusServer",
                "CirrusStore",
                "CirrusTLS",
                "CirrusWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // `cirrus bench`: the load generator over CirrusKit, its results and their rendering.
        .target(
            name: "CirrusBench",
            dependencies: [
                "CirrusKit",
                "CirrusModel",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The rest of the `cirrus` CLI as a library: import (CSV, JSON Lines, resume state),
        // export, record rendering, exit codes.
        .target(
            name: "CirrusCLI",
            dependencies: ["CirrusKit", "CirrusModel"]
        ),
        .executableTarget(
            name: "cirrus",
            dependencies: [
                "CMimalloc",
                "CirrusBench",
                "CirrusCLI",
                "CirrusKit",
                "CirrusModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // A device process for CirrusCLITests' SyncEngineKillTests (killed with SIGKILL mid-send).
        .executableTarget(
            name: "SyncEngineKillDevice",
            dependencies: ["CirrusKit"],
            path: "Tests/SyncEngineKillDevice"
        ),

        // What several test targets share (not a product: nothing outside the tests uses it).
        .target(
            name: "CirrusTestSupport",
            dependencies: ["COpenSSL"],
            path: "Tests/CirrusTestSupport"
        ),
        .testTarget(
            name: "CirrusWireTests",
            dependencies: [
                "CirrusTestSupport",
                "CirrusWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "CirrusModelTests",
            dependencies: ["CirrusModel", "CirrusTestSupport", "CirrusWire"]
        ),
        .testTarget(
            name: "CirrusStoreTests",
            dependencies: ["CirrusPostgres", "CirrusStore", "CirrusTestSupport", "CirrusWire"]
        ),
        .testTarget(
            name: "CirrusPostgresTests",
            dependencies: [
                "CirrusPostgres",
                "CirrusStore",
                "CirrusTestSupport",
                "CirrusWire",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "CirrusTLSTests",
            dependencies: [
                "CirrusTestSupport",
                "CirrusTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "CirrusKitTests",
            dependencies: [
                "CirrusTestSupport",
                "CirrusPostgres",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                "CirrusKit",
                "CirrusModel",
                "CirrusWire",
                "CirrusServer",
                "CirrusStore",
                "CirrusTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "CirrusServerTests",
            dependencies: [
                "CirrusTestSupport",
                "CirrusServer",
                "CirrusPostgres",
                "CirrusStore",
                "CirrusWire",
                "CirrusTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "CirrusOperationsTests",
            dependencies: [
                "CirrusOperations",
                "CirrusServer",
                "CirrusStore",
                "CirrusWire",
                "CirrusTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "CirrusCLITests",
            dependencies: [
                "CirrusTestSupport",
                "CirrusBench",
                "CirrusCLI",
                "CirrusKit",
                "CirrusModel",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
