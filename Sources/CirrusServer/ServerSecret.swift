import Foundation

/// The server's secret key, kept in a file of its data directory so that what it signs
/// (change tokens) stays valid across restarts.
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
    static let length = 32

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
        var generator = SystemRandomNumberGenerator()
        let secret: [UInt8] = (0..<Self.length).map { _ in generator.next() }
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
}
