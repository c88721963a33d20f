import Foundation

/// Writes a target's seed corpus when asked to, from values the code under test made itself
/// (encoded frames, sealed tokens, real cursors …), so the corpus follows the wire format.
///
/// `Scripts/fuzz.sh --seeds` runs every target with `CIRRUS_FUZZ_WRITE_SEEDS=DIR`; the target's
/// `LLVMFuzzerInitialize` calls ``writeIfRequested(_:)``, which writes `DIR/seed-NN` files and
/// exits before any fuzzing starts.
public enum SeedWriter {
    /// The environment variable naming the directory to write seeds into.
    public static let environmentVariable = "CIRRUS_FUZZ_WRITE_SEEDS"

    /// Writes `seeds()` and exits when ``environmentVariable`` is set; otherwise does nothing.
    public static func writeIfRequested(_ seeds: () -> [[UInt8]]) {
        guard let directory = ProcessInfo.processInfo.environment[Self.environmentVariable], !directory.isEmpty else {
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for (index, seed) in seeds().enumerated() {
                let path = (directory as NSString).appendingPathComponent(String(format: "seed-%02d", index))
                try Data(seed).write(to: URL(fileURLWithPath: path))
            }
        } catch {
            FileHandle.standardError.write(Data("cannot write seeds to \(directory): \(error)\n".utf8))
            exit(1)
        }
        exit(0)
    }

    /// `text` as seed bytes.
    public static func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }
}
