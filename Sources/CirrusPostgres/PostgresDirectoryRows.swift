import CirrusStore
import CirrusWire
import Foundation
import Logging
import PostgresNIO

/// The reads and writes of the user directory's rows (`users`, `user_lookup`,
/// `user_discoverability`) that the ``UserStorage`` calls of ``PostgresStorage`` share.
extension PostgresStorage {
    /// The users named `names` that exist, in that order (nil: every user, by name), each
    /// with its lookup values.
    static func directoryUsers(
        _ names: [String]?, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [DirectoryUser] {
        if let names, names.isEmpty { return [] }
        let columns = "name, name_components, created_at, last_seen_at, disabled_at"
        let rows =
            if let names {
                try await connection.query(
                    "SELECT \(unescaped: columns) FROM users WHERE name = ANY(\(names))", logger: logger)
            } else {
                try await connection.query("SELECT \(unescaped: columns) FROM users ORDER BY name", logger: logger)
            }
        var users: [String: DirectoryUser] = [:]
        var order: [String] = []
        for try await (name, components, created, lastSeen, disabled) in rows.decode(
            (String, Data?, Double, Double?, Double?).self)
        {
            var user = DirectoryUser(name: name, createdAt: DirectoryRules.timestamp(seconds: created))
            user.lastSeenAt = lastSeen.map(DirectoryRules.timestamp(seconds:))
            user.isDisabled = disabled != nil
            if let components { user.nameComponents = try DirectoryRules.nameComponents([UInt8](components), of: name) }
            users[name] = user
            order.append(name)
        }
        guard !users.isEmpty else { return [] }
        let lookups = try await connection.query(
            "SELECT user_name, kind, value FROM user_lookup WHERE user_name = ANY(\(order)) ORDER BY value",
            logger: logger)
        for try await (name, kind, value) in lookups.decode((String, Int, String).self) {
            switch DirectoryRules.LookupKind(rawValue: kind) {
            case .email: users[name]?.emailAddresses.append(value)
            case .phone: users[name]?.phoneNumbers.append(value)
            case nil: continue
            }
        }
        return (names ?? order).compactMap { users[$0] }
    }

    /// The user a write just touched.
    static func requireUser(_ name: String, _ connection: PostgresConnection, _ logger: Logger) async throws
        -> DirectoryUser
    {
        guard let user = try await directoryUsers([name], connection, logger).first else {
            throw DirectoryRules.unknownUser(name)
        }
        return user
    }

    /// The user holding a lookup value, or nil.
    static func lookupOwner(
        _ lookup: DirectoryRules.StoredLookup, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> String? {
        let rows = try await connection.query(
            "SELECT user_name FROM user_lookup WHERE kind = \(lookup.kind.rawValue) AND value = \(lookup.value)",
            logger: logger)
        for try await name in rows.decode(String.self) { return name }
        return nil
    }

    /// Whether `user` granted discoverability in `container` and is enabled.
    static func isDiscoverable(
        _ user: String, in container: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> Bool {
        let rows = try await connection.query(
            """
            SELECT 1 FROM user_discoverability d JOIN users u ON u.name = d.user_name
            WHERE d.container = \(container) AND d.user_name = \(user)
                AND d.status = \(Discoverability.granted.rawValue) AND u.disabled_at IS NULL
            """, logger: logger)
        for try await _ in rows.decode(Int32.self) { return true }
        return false
    }

    /// Gives `user` a lookup value an administrator adds. The value is claimed in one
    /// statement that returns its holder, new or old: another user's value stays theirs.
    ///
    /// - throws: ``StoreError`` `.alreadyExists` when another user holds it.
    static func addLookup(
        _ lookup: DirectoryRules.StoredLookup, to user: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        let rows = try await connection.query(
            """
            INSERT INTO user_lookup (kind, value, user_name, source)
            VALUES (\(lookup.kind.rawValue), \(lookup.value), \(user), \(DirectoryRules.LookupSource.administrator.rawValue))
            ON CONFLICT (kind, value) DO UPDATE SET kind = user_lookup.kind
            RETURNING user_name
            """, logger: logger)
        for try await holder in rows.decode(String.self) where holder != user {
            throw DirectoryRules.taken(lookup.value)
        }
    }

    /// Takes a lookup value from `user`.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` when the user does not hold it.
    static func removeLookup(
        _ lookup: DirectoryRules.StoredLookup, from user: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        let rows = try await connection.query(
            """
            DELETE FROM user_lookup
            WHERE kind = \(lookup.kind.rawValue) AND value = \(lookup.value) AND user_name = \(user)
            RETURNING 1
            """, logger: logger)
        var removed = false
        for try await _ in rows.decode(Int32.self) { removed = true }
        guard removed else { throw DirectoryRules.notHeld(lookup.value, by: user) }
    }
}
