// swift-tools-version:6.0
// The libFuzzer targets live in their own package so a plain `swift build` or `swift test` of
// Cirrus never builds them (they only link with `--sanitize=fuzzer`) and users never resolve
// them. Build and run them with `Scripts/fuzz.sh` from the repository root.
//
// Some targets reach internals (`OperationStream`, the store's query validation) through
// `@testable import`, so the script builds with `-enable-testing` — the same access the
// repository's own tests use, and no extra public API.
import PackageDescription

let package = Package(
    name: "CirrusFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Cirrus", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
    ],
    targets: [
        // What every target shares: input bridging, running async code to completion, seeds.
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "CirrusCLI", package: "Cirrus"),
                .product(name: "CirrusModel", package: "Cirrus"),
                .product(name: "CirrusWire", package: "Cirrus"),
            ]
        ),
        // Bytes → FrameDecoder (length prefix, size bound) → Frame decode → the server's
        // connection state machine.
        .executableTarget(
            name: "FuzzFrame",
            dependencies: [
                "FuzzSupport",
                .product(name: "CirrusWire", package: "Cirrus"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Bytes → Open decode → the real StorageExecutor over a throwaway SQLite store.
        .executableTarget(
            name: "FuzzRequest",
            dependencies: [
                "FuzzSupport",
                .product(name: "CirrusWire", package: "Cirrus"),
                .product(name: "CirrusStore", package: "Cirrus"),
                .product(name: "CirrusServer", package: "Cirrus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Text → CKPredicate(parsing:) → wire predicate → the store's query validation.
        .executableTarget(
            name: "FuzzPredicate",
            dependencies: [
                "FuzzSupport",
                .product(name: "CirrusModel", package: "Cirrus"),
                .product(name: "CirrusStore", package: "Cirrus"),
                .product(name: "CirrusWire", package: "Cirrus"),
            ]
        ),
        // Bytes → change-token unsealer (every feed) and the SQLite store's query-cursor reader.
        .executableTarget(
            name: "FuzzToken",
            dependencies: [
                "FuzzSupport",
                .product(name: "CirrusServer", package: "Cirrus"),
                .product(name: "CirrusStore", package: "Cirrus"),
                .product(name: "CirrusWire", package: "Cirrus"),
            ]
        ),
        // Text → `cirrus import` CSV parsing, type inference and record building.
        .executableTarget(
            name: "FuzzCSVImport",
            dependencies: ["FuzzSupport", .product(name: "CirrusCLI", package: "Cirrus")]
        ),
        // Text → `cirrus import` JSON Lines parsing, type inference and record building.
        .executableTarget(
            name: "FuzzJSONLImport",
            dependencies: ["FuzzSupport", .product(name: "CirrusCLI", package: "Cirrus")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
