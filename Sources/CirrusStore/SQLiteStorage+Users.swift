public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage: UserStorage {
    typealias LookupKind = DirectoryRules.LookupKind
    private typealias LookupSource = DirectoryRules.LookupSource

    @discardableResult
    public func registerUser(_ user: String, verifiedEmails: [String], at time: Wire.Timestamp) async throws
        -> DirectoryUser
    {
        try DirectoryRules.checkUserName(user)
        let emails = DirectoryRules.verifiedEmails(verifiedEmails)
        let seconds = RecordCodec.seconds(time)
        return try await write(weight: 1 + emails.count) { db in
            try db.run(
                sql: """
                    INSERT INTO users (name, created_at, last_seen_at) VALUES (?1, ?2, ?2)
                    ON CONFLICT (name) DO UPDATE SET last_seen_at = ?2
                    """,
                arguments: [user, seconds])
            for email in emails {
                // A value another user holds stays theirs.
                try db.run(
                    sql: "INSERT OR IGNORE INTO user_lookup (kind, value, user, source) VALUES (?, ?, ?, ?)",
                    arguments: [LookupKind.email.rawValue, email, user, LookupSource.certificate.rawValue])
            }
            return try Self.requireUser(user, db)
        }
    }

    @discardableResult
    public func createUser(_ user: String, at time: Wire.Timestamp) async throws -> DirectoryUser {
        try DirectoryRules.checkUserName(user)
        let seconds = RecordCodec.seconds(time)
        return try await write(weight: 1) { db in
            guard try Self.directoryUser(user, db) == nil else {
                throw DirectoryRules.userExists(user)
            }
            try db.run(sql: "INSERT INTO users (name, created_at) VALUES (?, ?)", arguments: [user, seconds])
            return try Self.requireUser(user, db)
        }
    }

    public func user(_ user: String) async throws -> DirectoryUser? {
        try await read { db in try Self.directoryUser(user, db) }
    }

    public func allUsers() async throws -> [DirectoryUser] {
        try await read { db in
            let names = try String.fetchAll(db, sql: "SELECT name FROM users ORDER BY name")
            return try names.compactMap { try Self.directoryUser($0, db) }
        }
    }

    @discardableResult
    public func updateUser(_ user: String, _ change: DirectoryUserChange, at time: Wire.Timestamp) async throws
        -> DirectoryUser
    {
        let seconds = RecordCodec.seconds(time)
        return try await write(weight: 1) { db in
            guard try Self.directoryUser(user, db) != nil else { throw DirectoryRules.unknownUser(user) }
            switch change {
            case .addEmail, .addPhone:
                if let lookup = try DirectoryRules.lookupToAdd(change) {
                    try Self.addLookup(lookup.kind, lookup.value, to: user, db)
                }
            case .removeEmail, .removePhone:
                if let lookup = DirectoryRules.lookupToRemove(change) {
                    try Self.removeLookup(lookup.kind, lookup.value, from: user, db)
                }
            case .setName(let components):
                try db.run(
                    sql: "UPDATE users SET name_components = ? WHERE name = ?",
                    arguments: [components.map { Data($0.serializedBytes()) }, user])
            case .setDisabled(let disabled):
                try db.run(
                    sql: "UPDATE users SET disabled_at = ? WHERE name = ?",
                    arguments: [disabled ? seconds : nil, user])
            }
            return try Self.requireUser(user, db)
        }
    }

    public func disabledUsers() async throws -> Set<String> {
        try await read { db in
            Set(try String.fetchAll(db, sql: "SELECT name FROM users WHERE disabled_at IS NOT NULL"))
        }
    }

    public func setDiscoverability(_ status: Discoverability?, of user: String, in container: String) async throws {
        try await write(weight: 1) { db in
            guard try Self.directoryUser(user, db) != nil else { throw DirectoryRules.unknownUser(user) }
            if let status {
                try db.run(
                    sql: "INSERT OR REPLACE INTO user_discoverability (container, user, status) VALUES (?, ?, ?)",
                    arguments: [container, user, status.rawValue])
            } else {
                try db.run(
                    sql: "DELETE FROM user_discoverability WHERE container = ? AND user = ?", arguments: [container, user])
            }
        }
    }

    public func discoverability(of user: String, in container: String) async throws -> Discoverability? {
        try await read { db in
            try Int.fetchOne(
                db, sql: "SELECT status FROM user_discoverability WHERE container = ? AND user = ?",
                arguments: [container, user]
            ).flatMap(Discoverability.init(rawValue:))
        }
    }

    public func discoverUsers(matching lookups: [UserLookup], in container: String) async throws -> [DirectoryUser?] {
        try checkItemCount(lookups.count)
        return try await read { db in
            try lookups.map { lookup -> DirectoryUser? in
                let name: String?
                if case .userRecordName(let user) = lookup {
                    name = user
                } else {
                    name = try DirectoryRules.storedLookup(lookup).flatMap { try Self.lookupOwner($0.kind, $0.value, db) }
                }
                guard let name, try Self.isDiscoverable(name, in: container, db) else { return nil }
                return try Self.directoryUser(name, db)
            }
        }
    }

    public func discoverableUsers(in container: String, after user: String?, limit: Int) async throws -> [DirectoryUser] {
        try DirectoryRules.checkLimit(limit)
        return try await read { db in
            let names = try String.fetchAll(
                db,
                sql: """
                    SELECT d.user FROM user_discoverability d JOIN users u ON u.name = d.user
                    WHERE d.container = ? AND d.status = ? AND u.disabled_at IS NULL AND d.user > ?
                    ORDER BY d.user LIMIT ?
                    """,
                arguments: [container, Discoverability.granted.rawValue, user ?? "", limit])
            return try names.compactMap { try Self.directoryUser($0, db) }
        }
    }

    // MARK: - Rows

    static func directoryUser(_ name: String, _ db: Database) throws -> DirectoryUser? {
        guard let row = try db.row(sql: "SELECT * FROM users WHERE name = ?", arguments: [name]) else { return nil }
        var user = DirectoryUser(
            name: name, createdAt: DirectoryRules.timestamp(seconds: row["created_at"] as Double? ?? 0))
        user.lastSeenAt = (row["last_seen_at"] as Double?).map { DirectoryRules.timestamp(seconds: $0) }
        user.isDisabled = (row["disabled_at"] as Double?) != nil
        if let data = row["name_components"] as Data? {
            user.nameComponents = try DirectoryRules.nameComponents([UInt8](data), of: name)
        }
        let lookups = try Row.fetchAll(
            db, sql: "SELECT kind, value FROM user_lookup WHERE user = ? ORDER BY value", arguments: [name])
        for lookup in lookups {
            switch LookupKind(rawValue: lookup["kind"]) {
            case .email: user.emailAddresses.append(lookup["value"])
            case .phone: user.phoneNumbers.append(lookup["value"])
            case nil: continue
            }
        }
        return user
    }

    /// The user a write just touched.
    private static func requireUser(_ name: String, _ db: Database) throws -> DirectoryUser {
        guard let user = try directoryUser(name, db) else { throw DirectoryRules.unknownUser(name) }
        return user
    }

    static func lookupOwner(_ kind: LookupKind, _ value: String, _ db: Database) throws -> String? {
        try String.fetchOne(
            db, sql: "SELECT user FROM user_lookup WHERE kind = ? AND value = ?", arguments: [kind.rawValue, value])
    }

    private static func isDiscoverable(_ user: String, in container: String, _ db: Database) throws -> Bool {
        try Bool.fetchOne(
            db,
            sql: """
                SELECT 1 FROM user_discoverability d JOIN users u ON u.name = d.user
                WHERE d.container = ? AND d.user = ? AND d.status = ? AND u.disabled_at IS NULL
                """,
            arguments: [container, user, Discoverability.granted.rawValue]) ?? false
    }

    private static func addLookup(_ kind: LookupKind, _ value: String, to user: String, _ db: Database) throws {
        if let owner = try lookupOwner(kind, value, db) {
            guard owner == user else { throw DirectoryRules.taken(value) }
            return
        }
        try db.run(
            sql: "INSERT INTO user_lookup (kind, value, user, source) VALUES (?, ?, ?, ?)",
            arguments: [kind.rawValue, value, user, LookupSource.administrator.rawValue])
    }

    private static func removeLookup(_ kind: LookupKind, _ value: String, from user: String, _ db: Database) throws {
        try db.run(
            sql: "DELETE FROM user_lookup WHERE kind = ? AND value = ? AND user = ?", arguments: [kind.rawValue, value, user])
        guard db.changesCount > 0 else { throw DirectoryRules.notHeld(value, by: user) }
    }
}
