// swift-tools-version:6.1
// The store's write path alone, measured in CPU time per record rather than throughput, so the
// figure holds on a machine other work is loading. Not part of Cirrus's build or CI. Run:
// `swift run -c release --package-path Scripts/store-cpu-bench store-cpu-bench [ROUNDS]`.
import PackageDescription

let package = Package(
    name: "store-cpu-bench",
    dependencies: [.package(name: "Cirrus", path: "../..")],
    targets: [
        .executableTarget(
            name: "store-cpu-bench",
            dependencies: [
                .product(name: "CirrusStore", package: "Cirrus"),
                .product(name: "CirrusWire", package: "Cirrus"),
            ])
    ],
    swiftLanguageModes: [.v6]
)
