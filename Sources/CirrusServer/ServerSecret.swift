public import CirrusStore
import Foundation

/// The server's secret key, kept so that what it signs (change tokens) stays valid across
/// restarts: in a file of its data directory (a node on SQLite), or in the storage that
/// several nodes share (``load(from:)``), so a token one node sealed opens on the others.
///
/// The file holds 32 random bytes, is created on first use with mode 0600, and is never
/// rewritten; delete it to invalidate every token handed out so far.
///
/// For example:
/// ```swift
/// let secret = try ServerSecret.loadOrCreate(inDirectory: "./cirrus-data")
/// let executor = StorageExecutor(storage: storage, tokens: ChangeTokenSealer(secret: secret))
/// ```
public enum ServerSecret {
    /// The file's name inside the data directory.
    public static let fileName = "server-secret"
    static let length = ServerSecretRules.length

    /// Errors reading or creating the secret.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The secret in `directory`, created first when there is none.
    ///
    /// - throws: ``Failure`` when the file cannot be read or created, or holds something other
    ///   than a 32-byte secret.
    public static func loadOrCreate(inDirectory directory: String) throws(Failure) -> [UInt8] {
        let path = (directory as NSString).appendingPathComponent(Self.fileName)
        let manager = FileManager.default
        if let data = manager.contents(atPath: path) {
            guard data.count == Self.length else {
                throw Failure(description: "\(path) holds \(data.count) bytes, not a \(Self.length)-byte secret")
            }
            return Array(data)
        }
        let secret = ServerSecretRules.random()
        do {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot create \(directory): \(error)")
        }
        // Create with 0600 and refuse to follow an existing file (O_EXCL): two servers starting
        // at once must not each write their own secret.
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == EEXIST, let data = manager.contents(atPath: path), data.count == Self.length {
                return Array(data)
            }
            throw Failure(description: "cannot create \(path): \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        let written = secret.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == Self.length, fsync(fd) == 0 else {
            throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return secret
    }

    /// The secret `storage` keeps for every node that shares it, created there first when
    /// there is none.
    ///
    /// For example:
    /// ```swift
    /// let secret = try await ServerSecret.load(from: postgresStorage)
    /// ```
    ///
    /// - throws: ``Failure`` when the storage fails, or holds something other than a
    ///   32-byte secret.
    public static func load(from storage: some ServerSecretStorage) async throws(Failure) -> [UInt8] {
        let secret: [UInt8]
        do {
            secret = try await storage.loadOrCreateServerSecret()
        } catch {
            throw Failure(description: "cannot load the server secret from the storage: \(error)")
        }
        guard secret.count == Self.length else {
            throw Failure(description: "the storage holds \(secret.count) bytes, not a \(Self.length)-byte secret")
        }
        return secret
    }
}
