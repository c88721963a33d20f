public import CirrusStore
public import CirrusWire
import Foundation
import Logging
import PostgresNIO

extension PostgresStorage: UserStorage {
    /// Creates `user` if it is new, records when it was last seen, and adds each of
    /// `verifiedEmails` (normalized) that no other user holds, as ``UserStorage`` describes.
    /// Nodes registering the same user or claiming the same address at once agree: the user
    /// row and each address are claimed by one `INSERT … ON CONFLICT` each, so the first
    /// claimant to commit keeps the address.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a malformed name.
    @discardableResult
    public func registerUser(_ user: String, verifiedEmails: [String], at time: Wire.Timestamp) async throws
        -> DirectoryUser
    {
        try DirectoryRules.checkUserName(user)
        let emails = DirectoryRules.verifiedEmails(verifiedEmails)
        let seconds = RecordCodec.seconds(time)
        let logger = self.logger
        return try await transaction { connection in
            try await connection.query(
                """
                INSERT INTO users (name, created_at, last_seen_at) VALUES (\(user), \(seconds), \(seconds))
                ON CONFLICT (name) DO UPDATE SET last_seen_at = excluded.last_seen_at
                """, logger: logger)
            // A value another user holds stays theirs. Claimed in byte order: two nodes
            // registering users with the same addresses lock them in the same order, so
            // neither waits on the other in a cycle.
            for email in emails.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                try await connection.query(
                    """
                    INSERT INTO user_lookup (kind, value, user_name, source)
                    VALUES (\(DirectoryRules.LookupKind.email.rawValue), \(email), \(user),
                        \(DirectoryRules.LookupSource.certificate.rawValue))
                    ON CONFLICT (kind, value) DO NOTHING
                    """, logger: logger)
            }
            return try await Self.requireUser(user, connection, logger)
        }
    }

    /// Creates `user` for an administrator.
    ///
    /// - throws: ``StoreError`` `.alreadyExists` when it exists (also when another node
    ///   created it a moment before), `.invalidArguments` for a malformed name.
    @discardableResult
    public func createUser(_ user: String, at time: Wire.Timestamp) async throws -> DirectoryUser {
        try DirectoryRules.checkUserName(user)
        let seconds = RecordCodec.seconds(time)
        let logger = self.logger
        return try await transaction { connection in
            let inserted = try await connection.query(
                """
                INSERT INTO users (name, created_at) VALUES (\(user), \(seconds))
                ON CONFLICT (name) DO NOTHING RETURNING 1
                """, logger: logger)
            var created = false
            for try await _ in inserted.decode(Int32.self) { created = true }
            guard created else { throw DirectoryRules.userExists(user) }
            return try await Self.requireUser(user, connection, logger)
        }
    }

    /// The user named `user`, or nil.
    ///
    /// - throws: ``StoreError``.
    public func user(_ user: String) async throws -> DirectoryUser? {
        let logger = self.logger
        return try await snapshot { connection in try await Self.directoryUsers([user], connection, logger).first }
    }

    /// Every user, by name.
    ///
    /// - throws: ``StoreError``.
    public func allUsers() async throws -> [DirectoryUser] {
        let logger = self.logger
        return try await snapshot { connection in try await Self.directoryUsers(nil, connection, logger) }
    }

    /// Applies `change` to `user`. Adding a lookup value claims it with one
    /// `INSERT … ON CONFLICT`: of two nodes adding the same value to different users at once,
    /// the second to commit gets `.alreadyExists`.
    ///
    /// - throws: ``StoreError`` `.unknownUser`, `.alreadyExists` (a lookup value another user
    ///   holds), `.invalidArguments` (a malformed email address or phone number, or removing a
    ///   value the user does not hold).
    @discardableResult
    public func updateUser(_ user: String, _ change: DirectoryUserChange, at time: Wire.Timestamp) async throws
        -> DirectoryUser
    {
        let seconds = RecordCodec.seconds(time)
        let logger = self.logger
        return try await transaction { connection in
            // The user's row stays locked until the change commits: changes to one user
            // take turns.
            let found = try await connection.query(
                "SELECT 1 FROM users WHERE name = \(user) FOR UPDATE", logger: logger)
            var exists = false
            for try await _ in found.decode(Int32.self) { exists = true }
            guard exists else { throw DirectoryRules.unknownUser(user) }
            switch change {
            case .addEmail, .addPhone:
                if let lookup = try DirectoryRules.lookupToAdd(change) {
                    try await Self.addLookup(lookup, to: user, connection, logger)
                }
            case .removeEmail, .removePhone:
                if let lookup = DirectoryRules.lookupToRemove(change) {
                    try await Self.removeLookup(lookup, from: user, connection, logger)
                }
            case .setName(let components):
                let bytes = components.map { Data($0.serializedBytes()) as Data }
                try await connection.query(
                    "UPDATE users SET name_components = \(bytes) WHERE name = \(user)", logger: logger)
            case .setDisabled(let disabled):
                let disabledAt: Double? = disabled ? seconds : nil
                try await connection.query(
                    "UPDATE users SET disabled_at = \(disabledAt) WHERE name = \(user)", logger: logger)
            }
            return try await Self.requireUser(user, connection, logger)
        }
    }

    /// The names of the disabled users.
    ///
    /// - throws: ``StoreError``.
    public func disabledUsers() async throws -> Set<String> {
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query("SELECT name FROM users WHERE disabled_at IS NOT NULL", logger: logger)
            var names = Set<String>()
            for try await name in rows.decode(String.self) { names.insert(name) }
            return names
        }
    }

    /// Sets (`nil`: clears) whether `user` may be discovered by others in `container`.
    ///
    /// - throws: ``StoreError`` `.unknownUser`.
    public func setDiscoverability(_ status: Discoverability?, of user: String, in container: String) async throws {
        let logger = self.logger
        try await transaction { connection in
            let found = try await connection.query("SELECT 1 FROM users WHERE name = \(user)", logger: logger)
            var exists = false
            for try await _ in found.decode(Int32.self) { exists = true }
            guard exists else { throw DirectoryRules.unknownUser(user) }
            if let status {
                try await connection.query(
                    """
                    INSERT INTO user_discoverability (container, user_name, status)
                    VALUES (\(container), \(user), \(status.rawValue))
                    ON CONFLICT (container, user_name) DO UPDATE SET status = excluded.status
                    """, logger: logger)
            } else {
                try await connection.query(
                    "DELETE FROM user_discoverability WHERE container = \(container) AND user_name = \(user)",
                    logger: logger)
            }
        }
    }

    /// Whether `user` may be discovered in `container`; nil when never asked.
    ///
    /// - throws: ``StoreError``.
    public func discoverability(of user: String, in container: String) async throws -> Discoverability? {
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                "SELECT status FROM user_discoverability WHERE container = \(container) AND user_name = \(user)",
                logger: logger)
            for try await status in rows.decode(Int.self) { return Discoverability(rawValue: status) }
            return nil
        }
    }

    /// The user `lookup` names: its record name as given, or the owner of its email address or
    /// phone number; nil when nobody claimed it (or it is not a lookup value the directory keeps).
    static func userName(
        of lookup: UserLookup, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> String? {
        if case .userRecordName(let user) = lookup { return user }
        guard let stored = DirectoryRules.storedLookup(lookup) else { return nil }
        return try await lookupOwner(stored, connection, logger)
    }

    /// One answer per lookup, in order: the user it finds, or nil when it finds nobody who is
    /// discoverable in `container` and enabled (the same answer as for nobody).
    ///
    /// - throws: ``StoreError`` `.limitExceeded` for more lookups than one request may carry.
    public func discoverUsers(matching lookups: [UserLookup], in container: String) async throws -> [DirectoryUser?] {
        try checkItemCount(lookups.count)
        let logger = self.logger
        return try await snapshot { connection in
            var answers: [DirectoryUser?] = []
            for lookup in lookups {
                let name = try await Self.userName(of: lookup, connection, logger)
                guard let name, try await Self.isDiscoverable(name, in: container, connection, logger) else {
                    answers.append(nil)
                    continue
                }
                answers.append(try await Self.directoryUsers([name], connection, logger).first)
            }
            return answers
        }
    }

    /// The discoverable, enabled users of `container` after `user` (nil: from the first), by
    /// name, at most `limit`.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a limit below 1.
    public func discoverableUsers(in container: String, after user: String?, limit: Int) async throws -> [DirectoryUser] {
        try DirectoryRules.checkLimit(limit)
        let logger = self.logger
        return try await snapshot { connection in
            let rows = try await connection.query(
                """
                SELECT d.user_name FROM user_discoverability d JOIN users u ON u.name = d.user_name
                WHERE d.container = \(container) AND d.status = \(Discoverability.granted.rawValue)
                    AND u.disabled_at IS NULL AND d.user_name > \(user ?? "")
                ORDER BY d.user_name LIMIT \(limit)
                """, logger: logger)
            var names: [String] = []
            for try await name in rows.decode(String.self) { names.append(name) }
            return try await Self.directoryUsers(names, connection, logger)
        }
    }
}
