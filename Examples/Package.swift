// swift-tools-version:6.0
// Programs that use Cirrus the way a user's package does: they depend on the product
// "CirrusKit" and write `import CirrusKit`, nothing else. CI builds them
// (Scripts/check-examples.sh), so the README's examples cannot stop compiling unnoticed.
import PackageDescription

let package = Package(
    name: "CirrusExamples",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Cirrus", path: "..")
    ],
    targets: [
        // README.md, "A client": the example verbatim (Scripts/check-examples.sh keeps it so).
        .executableTarget(
            name: "ReadmeClient",
            dependencies: [.product(name: "CirrusKit", package: "Cirrus")],
            path: "ReadmeClient"
        ),
        // README.md, "Sync engine": the example verbatim.
        .executableTarget(
            name: "ReadmeSyncEngine",
            dependencies: [.product(name: "CirrusKit", package: "Cirrus")],
            path: "ReadmeSyncEngine"
        ),
        // Seed 002 ("CloudKit Operations"): its 22 samples with only the import added, one file
        // per section (Scripts/check-examples.sh checks each is there as written).
        .executableTarget(
            name: "SeedSamples",
            dependencies: [.product(name: "CirrusKit", package: "Cirrus")],
            path: "SeedSamples"
        ),
        // A notes app on two devices that syncs through push and change feeds; CI runs it
        // against a cirrusd (Scripts/check-examples.sh).
        .executableTarget(
            name: "NotesSync",
            dependencies: [.product(name: "CirrusKit", package: "Cirrus")],
            path: "NotesSync"
        ),
    ],
    swiftLanguageModes: [.v6]
)
