import Foundation

/// The temporary files of one test process, all under one directory in the system's temporary
/// directory that is removed when the process exits: a run leaves nothing behind, even for
/// files no test removes itself (a process that crashes leaves that one directory).
///
/// For example:
/// ```swift
/// let source = TemporaryFiles.url(for: "photo.bin")
/// try bytes.write(to: source)
/// ```
public enum TemporaryFiles {
    /// The process's directory, created on first use.
    public static let root: URL = {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("cirrus-tests-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: TemporaryFiles.root) }
        return url
    }()

    /// A path for a new file in ``root``, unique to this call, whose name ends with `name`.
    public static func url(for name: String) -> URL {
        root.appendingPathComponent("\(UUID().uuidString)-\(name)")
    }
}
