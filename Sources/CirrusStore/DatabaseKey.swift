public import CirrusWire

/// Names one database of one container: the private database of a user, the
/// public database, or a user's shared database.
///
/// Nothing ever crosses keys: every storage call works inside exactly one.
///
/// For example:
/// ```swift
/// let alice = DatabaseKey.private(container: "iCloud.com.example", user: "_alice")
/// let shared = DatabaseKey.public(container: "iCloud.com.example")
/// ```
public struct DatabaseKey: Hashable, Sendable, CustomStringConvertible {
    public var container: String
    public var scope: Wire.DatabaseScope
    /// The user record name owning the database ("" for the public database).
    public var owner: String

    public init(container: String, scope: Wire.DatabaseScope, owner: String) {
        self.container = container
        self.scope = scope
        self.owner = owner
    }

    /// The private database of `user` (a user record name such as "_alice").
    public static func `private`(container: String, user: String) -> DatabaseKey {
        DatabaseKey(container: container, scope: .private, owner: user)
    }

    /// The public database of `container`, shared by all its users.
    public static func `public`(container: String) -> DatabaseKey {
        DatabaseKey(container: container, scope: .public, owner: "")
    }

    /// The shared database of `user` (zones others shared with them; filled later).
    public static func shared(container: String, user: String) -> DatabaseKey {
        DatabaseKey(container: container, scope: .shared, owner: user)
    }

    public var description: String { "\(container)/\(scope)/\(owner)" }

    /// Throws unless the key names a database a record operation can run against.
    package func validated() throws(StoreError) -> DatabaseKey {
        switch scope {
        case .public:
            guard owner.isEmpty else {
                throw StoreError(.badDatabase, "the public database has no owner")
            }
        case .private, .shared:
            guard !owner.isEmpty else {
                throw StoreError(.badDatabase, "a \(scope) database needs an owner")
            }
        case .unspecified, .unrecognized:
            throw StoreError(.badDatabase, "database scope \(scope) is not a database")
        }
        guard !container.isEmpty else {
            throw StoreError(.badDatabase, "empty container identifier")
        }
        return self
    }
}
