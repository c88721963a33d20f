import Dispatch
import Foundation
import Synchronization

/// Backups a running `cirrusd` takes itself, asked for over its operations endpoint
/// (`POST /backup`): each is a ``DataDirectoryBackup`` of the server's own data directory,
/// written under a name the server chooses into the one directory it was configured with
/// (`--backup-dir`), one at a time.
///
/// The request carries nothing but the method and path, so a caller of the endpoint can
/// neither name the file nor make the server write anywhere else.
///
/// For example:
/// ```swift
/// let backups = try OnlineBackup(dataDirectory: "./cirrus-data", backupDirectory: "/backups")
/// let taken = try await backups.run()   // /backups/cirrus-20261124T093000Z.backup
/// ```
public final class OnlineBackup: Sendable {
    /// A backup that was written.
    public struct Taken: Sendable, Equatable {
        /// The backup file's path.
        public var path: String
        /// The backup file's size, in bytes.
        public var bytes: Int
        /// Whether the server secret travelled with it.
        public var includesServerSecret: Bool
        /// How long it took.
        public var seconds: Double

        /// The answer `POST /backup` gives: one JSON object.
        var json: String {
            "{\"file\":\(JSONLogHandler.quoted(self.path)),\"bytes\":\(self.bytes),"
                + "\"includesServerSecret\":\(self.includesServerSecret),"
                + "\"seconds\":\(String(format: "%.3f", self.seconds))}\n"
        }
    }

    /// Why no backup was written.
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        /// Another backup is running; nothing was started.
        case busy
        /// The backup failed; nothing was left in the backup directory.
        case failed(String)

        public var description: String {
            switch self {
            case .busy: "a backup is already running; try again when it is done"
            case .failed(let reason): reason
            }
        }
    }

    let dataDirectory: String
    /// Where backups go.
    public let backupDirectory: String
    private let running = Atomic<Bool>(false)
    /// Runs on the backup's thread before the copy begins (tests hold a backup running with it).
    let beforeCopy: (@Sendable () -> Void)?

    /// - throws: ``DataDirectoryBackup/Failure`` when `backupDirectory` cannot be created or is
    ///   not a writable directory.
    public convenience init(dataDirectory: String, backupDirectory: String) throws(DataDirectoryBackup.Failure) {
        try self.init(dataDirectory: dataDirectory, backupDirectory: backupDirectory, beforeCopy: nil)
    }

    init(
        dataDirectory: String, backupDirectory: String, beforeCopy: (@Sendable () -> Void)?
    ) throws(DataDirectoryBackup.Failure) {
        self.dataDirectory = dataDirectory
        self.backupDirectory = backupDirectory
        self.beforeCopy = beforeCopy
        do {
            try FileManager.default.createDirectory(atPath: backupDirectory, withIntermediateDirectories: true)
        } catch {
            throw DataDirectoryBackup.Failure(description: "cannot create the backup directory \(backupDirectory): \(error)")
        }
        guard access(backupDirectory, W_OK | X_OK) == 0 else {
            throw DataDirectoryBackup.Failure(description: "the backup directory \(backupDirectory) is not writable")
        }
    }

    /// Writes a backup of the data directory into the backup directory, off the caller's thread.
    ///
    /// - throws: ``Refusal/busy`` while another runs, ``Refusal/failed(_:)`` when it fails.
    public func run() async throws(Refusal) -> Taken {
        guard self.running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            throw .busy
        }
        defer { self.running.store(false, ordering: .releasing) }
        let result: Result<Taken, Refusal> = await withCheckedContinuation { continuation in
            // The copy blocks a thread for as long as it runs (seconds for a large storage):
            // a dispatch thread, not the cooperative pool or an event loop.
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(returning: self.write())
            }
        }
        return try result.get()
    }

    private func write() -> Result<Taken, Refusal> {
        self.beforeCopy?()
        let started = ContinuousClock.now
        let path = self.freshPath()
        do {
            let summary = try DataDirectoryBackup.backup(dataDirectory: self.dataDirectory, to: path)
            let elapsed = ContinuousClock.now - started
            let (seconds, attoseconds) = elapsed.components
            return .success(
                Taken(
                    path: path, bytes: summary.bytes, includesServerSecret: summary.includesServerSecret,
                    seconds: Double(seconds) + Double(attoseconds) / 1e18))
        } catch {
            return .failure(.failed(error.description))
        }
    }

    /// `cirrus-YYYYMMDDTHHMMSSZ.backup` in the backup directory, with `-2`, `-3` … when a backup
    /// of the same second exists.
    private func freshPath() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let stem = (self.backupDirectory as NSString).appendingPathComponent("cirrus-\(formatter.string(from: Date()))")
        var path = stem + ".backup"
        var suffix = 2
        while FileManager.default.fileExists(atPath: path) {
            path = "\(stem)-\(suffix).backup"
            suffix += 1
        }
        return path
    }
}
