// swift-tools-version:6.1
// Benchmarks live in their own package so users of Cirrus never resolve benchmark
// dependencies. Run: `swift package benchmark` in this directory.
import PackageDescription

let package = Package(
    name: "CirrusBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Cirrus", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
    ],
    targets: [
        .executableTarget(
            name: "CirrusBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "CirrusWire", package: "Cirrus"),
                .product(name: "CirrusTLS", package: "Cirrus"),
                .product(name: "CirrusServer", package: "Cirrus"),
                .product(name: "CirrusStore", package: "Cirrus"),
                .product(name: "CirrusModel", package: "Cirrus"),
                .product(name: "CirrusKit", package: "Cirrus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/CirrusBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
