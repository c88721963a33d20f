public import CirrusWire

/// Bearer tokens: credentials a client presents in `Hello` instead of a client certificate.
/// The storage keeps only each token's SHA-256 (``StoredToken/hash``), never the token.
///
/// For example:
/// ```swift
/// try await storage.saveToken(StoredToken(id: "3f2a…", hash: digest, user: "_alice", label: "laptop", createdAt: now))
/// let usable = try await storage.activeTokens(at: now)
/// ```
public protocol TokenStorage: Sendable {
    /// Stores a new token, registering its user when the directory does not know them yet.
    ///
    /// - throws: ``StoreError`` `.alreadyExists` for a token ID in use, `.invalidArguments` for
    ///   a malformed user name.
    func saveToken(_ token: StoredToken) async throws

    /// The tokens of `user` (nil: of everyone), revoked and expired ones included, oldest first.
    ///
    /// - throws: ``StoreError``.
    func tokens(of user: String?) async throws -> [StoredToken]

    /// Revokes the token `id`; revoking it again changes nothing.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` when there is no such token.
    @discardableResult
    func revokeToken(_ id: String, at time: Wire.Timestamp) async throws -> StoredToken

    /// Deletes the tokens that expired or were revoked before `cutoff`; returns how many.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func pruneTokens(endedBefore cutoff: Wire.Timestamp) async throws -> Int

    /// The tokens neither revoked nor expired at `time`.
    ///
    /// - throws: ``StoreError``.
    func activeTokens(at time: Wire.Timestamp) async throws -> [StoredToken]
}

/// A bearer token as the storage keeps it.
public struct StoredToken: Sendable, Hashable {
    /// The token's public identifier.
    public var id: String
    /// SHA-256 of the whole token.
    public var hash: [UInt8]
    /// The user record name it authenticates.
    public var user: String
    /// What the administrator (or the server, for web auth tokens) called it.
    public var label: String
    public var createdAt: Wire.Timestamp
    /// nil: it never expires.
    public var expiresAt: Wire.Timestamp?
    public var revokedAt: Wire.Timestamp?

    public init(
        id: String, hash: [UInt8], user: String, label: String, createdAt: Wire.Timestamp,
        expiresAt: Wire.Timestamp? = nil, revokedAt: Wire.Timestamp? = nil
    ) {
        self.id = id
        self.hash = hash
        self.user = user
        self.label = label
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
    }
}
