import CirrusStore
import CirrusServer
import Foundation
import GRDB

/// Backups of a `cirrusd` data directory: one SQLite file holding a consistent copy of the
/// storage and the server's secret, taken while the server keeps serving, and the restore that
/// turns such a file back into a data directory.
///
/// The copy is SQLite's `VACUUM INTO` inside one read transaction on a connection of its own,
/// so it holds exactly the commits that had completed when the backup began: every write a
/// client saw acknowledged before then, none half-applied. Writers are not blocked while it
/// runs (the storage is in WAL mode); the copy is written next to its destination and renamed
/// into place once complete, so a destination that exists is always a whole backup.
///
/// For example:
/// ```swift
/// let summary = try DataDirectoryBackup.backup(dataDirectory: "./cirrus-data", to: "/backups/cirrus.backup")
/// try DataDirectoryBackup.restore(from: "/backups/cirrus.backup", into: "./restored-data")
/// ```
public enum DataDirectoryBackup {
    /// The table, inside a backup file only, holding what the data directory keeps beside
    /// the database (the server secret); restore moves it back out.
    static let metadataTable = "cirrus_backup"

    /// What a backup or restore wrote.
    public struct Summary: Sendable, Equatable {
        /// The size of the backup file, in bytes.
        public var bytes: Int
        /// Whether the data directory's server secret (which change tokens are sealed with)
        /// travelled with it.
        public var includesServerSecret: Bool
    }

    /// A backup or restore that could not be done; nothing was left at the destination.
    public struct Failure: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// Copies the storage in `dataDirectory` (and its server secret) to the new file `destination`.
    ///
    /// Safe while a server runs on `dataDirectory`.
    ///
    /// - throws: ``Failure`` when the data directory holds no storage, `destination` already
    ///   exists, or SQLite or the file system fails.
    public static func backup(dataDirectory: String, to destination: String) throws(Failure) -> Summary {
        let source = (dataDirectory as NSString).appendingPathComponent(SQLiteStorage.fileName)
        let manager = FileManager.default
        guard manager.fileExists(atPath: source) else {
            throw Failure(description: "\(dataDirectory) holds no Cirrus storage (no \(SQLiteStorage.fileName))")
        }
        guard !manager.fileExists(atPath: destination) else {
            throw Failure(description: "\(destination) already exists; a backup never overwrites a file")
        }
        let secret = try Self.serverSecret(in: dataDirectory)
        let partial = Self.partialPath(for: destination)
        do {
            var configuration = Configuration()
            configuration.label = "cirrusd.backup"
            configuration.busyMode = .timeout(30)
            let database = try DatabaseQueue(path: source, configuration: configuration)
            // One statement, one read transaction: a snapshot of the last commit before it began.
            try database.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM INTO ?", arguments: [partial])
            }
            try database.close()

            let copy = try DatabaseQueue(path: partial)
            try copy.write { db in
                try db.execute(sql: "CREATE TABLE \(Self.metadataTable) (name TEXT PRIMARY KEY, value BLOB NOT NULL)")
                try db.execute(
                    sql: "INSERT INTO \(Self.metadataTable) (name, value) VALUES ('created-at', ?)",
                    arguments: [Data(ISO8601DateFormatter().string(from: Date()).utf8)])
                if let secret {
                    try db.execute(
                        sql: "INSERT INTO \(Self.metadataTable) (name, value) VALUES (?, ?)",
                        arguments: [ServerSecret.fileName, Data(secret)])
                }
            }
            try copy.close()
            try Self.syncFile(atPath: partial)
            try manager.moveItem(atPath: partial, toPath: destination)
        } catch let failure as Failure {
            try? manager.removeItem(atPath: partial)
            throw failure
        } catch {
            try? manager.removeItem(atPath: partial)
            throw Failure(description: "backup of \(dataDirectory) to \(destination) failed: \(error)")
        }
        let bytes = ((try? manager.attributesOfItem(atPath: destination))?[.size] as? Int) ?? 0
        return Summary(bytes: bytes, includesServerSecret: secret != nil)
    }

    /// Makes `dataDirectory` (new, or empty) a data directory holding the backup `source`.
    ///
    /// The backup is checked (`PRAGMA integrity_check`) before anything is put in place.
    ///
    /// - throws: ``Failure`` when `source` is not a Cirrus backup or fails the check, or
    ///   `dataDirectory` already holds storage or a server secret.
    public static func restore(from source: String, into dataDirectory: String) throws(Failure) -> Summary {
        let manager = FileManager.default
        let destination = (dataDirectory as NSString).appendingPathComponent(SQLiteStorage.fileName)
        let secretPath = (dataDirectory as NSString).appendingPathComponent(ServerSecret.fileName)
        guard manager.fileExists(atPath: source) else {
            throw Failure(description: "\(source) does not exist")
        }
        for existing in [destination, destination + "-wal", secretPath] where manager.fileExists(atPath: existing) {
            throw Failure(description: "\(existing) exists; restore only into a new or empty data directory")
        }
        let partial = Self.partialPath(for: destination)
        var secret: [UInt8]?
        var wroteSecret = false
        do {
            try manager.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
            try manager.copyItem(atPath: source, toPath: partial)
            let copy = try DatabaseQueue(path: partial)
            try copy.write { db in
                let problems = try String.fetchAll(db, sql: "PRAGMA integrity_check")
                guard problems == ["ok"] else {
                    throw Failure(description: "\(source) fails SQLite's integrity check: \(problems.prefix(5).joined(separator: "; "))")
                }
                guard try db.tableExists(Self.metadataTable) else {
                    throw Failure(description: "\(source) is not a backup made by cirrusd backup")
                }
                secret = try Data.fetchOne(
                    db, sql: "SELECT value FROM \(Self.metadataTable) WHERE name = ?", arguments: [ServerSecret.fileName]
                ).map { Array($0) }
                try db.execute(sql: "DROP TABLE \(Self.metadataTable)")
            }
            try copy.close()
            try Self.syncFile(atPath: partial)
            if let secret {
                try Self.writeSecret(secret, to: secretPath)
                wroteSecret = true
            }
            try manager.moveItem(atPath: partial, toPath: destination)
        } catch {
            try? manager.removeItem(atPath: partial)
            if wroteSecret { try? manager.removeItem(atPath: secretPath) }
            if let failure = error as? Failure { throw failure }
            throw Failure(description: "restore of \(source) into \(dataDirectory) failed: \(error)")
        }
        let bytes = ((try? manager.attributesOfItem(atPath: destination))?[.size] as? Int) ?? 0
        return Summary(bytes: bytes, includesServerSecret: secret != nil)
    }

    /// The secret file's bytes, or nil when the directory has none yet.
    private static func serverSecret(in dataDirectory: String) throws(Failure) -> [UInt8]? {
        let path = (dataDirectory as NSString).appendingPathComponent(ServerSecret.fileName)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            return try ServerSecret.loadOrCreate(inDirectory: dataDirectory)
        } catch {
            throw Failure(description: error.description)
        }
    }

    /// A name beside `path` that no other backup or restore uses.
    private static func partialPath(for path: String) -> String {
        "\(path).partial-\(UUID().uuidString)"
    }

    private static func writeSecret(_ secret: [UInt8], to path: String) throws(Failure) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else {
            throw Failure(description: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let written = secret.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == secret.count, fsync(fd) == 0 else {
            throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    private static func syncFile(atPath path: String) throws(Failure) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw Failure(description: "cannot sync \(path): \(String(cString: strerror(errno)))") }
    }
}
