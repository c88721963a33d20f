import ArgumentParser
import Foundation

/// Finds the development certificates (`Certs/`) when no paths are given: in the working
/// directory, or above the executable (`.build/debug/cirrusd` inside a checkout).
struct DevelopmentCertificates {
    let directory: String?

    static func locate() -> DevelopmentCertificates {
        let fileManager = FileManager.default
        var candidates = [fileManager.currentDirectoryPath + "/Certs"]
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(directory.appendingPathComponent("Certs").path)
            directory.deleteLastPathComponent()
        }
        let found = candidates.first { fileManager.fileExists(atPath: $0 + "/server.pem") }
        return DevelopmentCertificates(directory: found)
    }

    func path(_ name: String) throws -> String {
        guard let directory else {
            throw ValidationError(
                "no Certs/ directory with development certificates found; run Scripts/generate-certs.sh or pass --cert, --key and --client-ca"
            )
        }
        return directory + "/" + name
    }
}
