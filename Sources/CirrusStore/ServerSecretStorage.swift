/// A storage that keeps the server's secret (what seals change tokens and query cursors)
/// itself, for the `cirrusd` nodes that share it: a token or cursor one node seals opens on
/// every other. A single node on SQLite keeps its secret in a file of its data directory
/// instead.
///
/// For example:
/// ```swift
/// let secret = try await storage.loadOrCreateServerSecret()
/// ```
public protocol ServerSecretStorage: Sendable {
    /// The secret every node of this storage shares, created (``ServerSecretRules/random()``)
    /// by the first caller when there is none: callers racing to create it all get the
    /// bytes of the one that was stored.
    ///
    /// - throws: ``StoreError``.
    func loadOrCreateServerSecret() async throws -> [UInt8]
}

/// What a server secret is, wherever it is kept: ``length`` bytes from the system's
/// cryptographically secure generator.
public enum ServerSecretRules {
    /// A secret's size in bytes.
    public static let length = 32

    /// A new secret.
    public static func random() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<length).map { _ in generator.next() }
    }
}
