public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage: UserStorage {
    /// Kinds of `user_lookup` rows.
    enum LookupKind: Int {
        case email = 1
        case phone = 2
    }

    /// Who vouched for a `user_lookup` row.
    private enum LookupSource: Int {
        case certificate = 1
        case administrator = 2
    }

    @discardableResult
    public func registerUser(_ user: String, verifiedEmails: [String], at time: Wire.Timestamp) async throws
        -> DirectoryUser
    {
        guard UserLookup.isValidUserRecordName(user) else {
            throw StoreError(.invalidArguments, "'\(user)' is not a user record name")
        }
        let emails = verifiedEmails.compactMap(UserLookup.normalizedEmail)
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
        guard UserLookup.isValidUserRecordName(user) else {
            throw StoreError(.invalidArguments, "'\(user)' is not a user record name (like _alice)")
        }
        let seconds = RecordCodec.seconds(time)
        return try await write(weight: 1) { db in
            guard try Self.directoryUser(user, db) == nil else {
                throw StoreError(.alreadyExists, "user \(user) exists")
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
            guard try Self.directoryUser(user, db) != nil else {
                throw StoreError(.unknownUser, "no user \(user)")
            }
            switch change {
            case .addEmail(let text):
                guard let email = UserLookup.normalizedEmail(text) else {
                    throw StoreError(.invalidArguments, "'\(text)' is not an email address")
                }
                try Self.addLookup(.email, email, to: user, db)
            case .addPhone(let text):
                guard let phone = UserLookup.normalizedPhone(text) else {
                    throw StoreError(.invalidArguments, "'\(text)' is not a phone number")
                }
                try Self.addLookup(.phone, phone, to: user, db)
            case .removeEmail(let text):
                try Self.removeLookup(.email, UserLookup.normalizedEmail(text) ?? text, from: user, db)
            case .removePhone(let text):
                try Self.removeLookup(.phone, UserLookup.normalizedPhone(text) ?? text, from: user, db)
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
            guard try Self.directoryUser(user, db) != nil else {
                throw StoreError(.unknownUser, "no user \(user)")
            }
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
                switch lookup {
                case .userRecordName(let user):
                    name = user
                case .email(let text):
                    name = try UserLookup.normalizedEmail(text).flatMap { try Self.lookupOwner(.email, $0, db) }
                case .phone(let text):
                    name = try UserLookup.normalizedPhone(text).flatMap { try Self.lookupOwner(.phone, $0, db) }
                }
                guard let name, try Self.isDiscoverable(name, in: container, db) else { return nil }
                return try Self.directoryUser(name, db)
            }
        }
    }

    public func discoverableUsers(in container: String, after user: String?, limit: Int) async throws -> [DirectoryUser] {
        guard limit > 0 else { throw StoreError(.invalidArguments, "limit must be positive, not \(limit)") }
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
        var user = DirectoryUser(name: name, createdAt: timestamp(seconds: row["created_at"] as Double? ?? 0))
        user.lastSeenAt = (row["last_seen_at"] as Double?).map { timestamp(seconds: $0) }
        user.isDisabled = (row["disabled_at"] as Double?) != nil
        if let data = row["name_components"] as Data? {
            do {
                user.nameComponents = try Wire.UserNameComponents(serializedBytes: [UInt8](data))
            } catch {
                throw StoreError(.corruptData, "the name of user \(name) does not decode: \(error)")
            }
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
        guard let user = try directoryUser(name, db) else { throw StoreError(.unknownUser, "no user \(name)") }
        return user
    }

    static func timestamp(seconds: Double) -> Wire.Timestamp {
        let whole = seconds.rounded(.down)
        return Wire.Timestamp(seconds: Int64(whole), nanos: Int32(min(999_999_999, (seconds - whole) * 1_000_000_000)))
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
            guard owner == user else { throw StoreError(.alreadyExists, "\(value) belongs to another user") }
            return
        }
        try db.run(
            sql: "INSERT INTO user_lookup (kind, value, user, source) VALUES (?, ?, ?, ?)",
            arguments: [kind.rawValue, value, user, LookupSource.administrator.rawValue])
    }

    private static func removeLookup(_ kind: LookupKind, _ value: String, from user: String, _ db: Database) throws {
        try db.run(
            sql: "DELETE FROM user_lookup WHERE kind = ? AND value = ? AND user = ?", arguments: [kind.rawValue, value, user])
        guard db.changesCount > 0 else { throw StoreError(.invalidArguments, "user \(user) has no \(value)") }
    }
}
