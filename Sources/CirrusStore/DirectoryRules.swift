package import CirrusWire

/// The checks and conversions of the user directory (``UserStorage``) and bearer tokens
/// (``TokenStorage``) that do not depend on the storage engine, in one place every engine
/// calls: the same input is refused with the same error, and a lookup value is stored in the
/// same form, whichever engine keeps it.
package enum DirectoryRules {
    /// Kinds of lookup values, as every engine stores them.
    package enum LookupKind: Int, Sendable {
        case email = 1
        case phone = 2
    }

    /// Who vouched for a lookup value, as every engine stores it.
    package enum LookupSource: Int, Sendable {
        /// A client certificate (``UserStorage/registerUser(_:verifiedEmails:at:)``).
        case certificate = 1
        /// An administrator (``UserStorage/updateUser(_:_:at:)``).
        case administrator = 2
    }

    /// A lookup value as stored: its kind and normalized value.
    package typealias StoredLookup = (kind: LookupKind, value: String)

    /// Whether `name` can be a user record name.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` otherwise.
    package static func checkUserName(_ name: String) throws(StoreError) {
        guard UserLookup.isValidUserRecordName(name) else {
            throw StoreError(.invalidArguments, "'\(name.prefix(160))' is not a user record name (like _alice)")
        }
    }

    /// The normalized form of the certificate's email addresses that are addresses at all,
    /// without repeats, in their order.
    package static func verifiedEmails(_ emails: [String]) -> [String] {
        var seen = Set<String>()
        return emails.compactMap(UserLookup.normalizedEmail).filter { seen.insert($0).inserted }
    }

    /// What an administrator's lookup change adds: its kind and normalized value.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a malformed email address or phone number.
    package static func lookupToAdd(_ change: DirectoryUserChange) throws(StoreError) -> StoredLookup? {
        switch change {
        case .addEmail(let text):
            guard let email = UserLookup.normalizedEmail(text) else {
                throw StoreError(.invalidArguments, "'\(text.prefix(260))' is not an email address")
            }
            return (kind: .email, value: email)
        case .addPhone(let text):
            guard let phone = UserLookup.normalizedPhone(text) else {
                throw StoreError(.invalidArguments, "'\(text.prefix(40))' is not a phone number")
            }
            return (kind: .phone, value: phone)
        case .removeEmail, .removePhone, .setName, .setDisabled:
            return nil
        }
    }

    /// What an administrator's lookup change removes: its kind and value (normalized when it
    /// can be, as given otherwise, so a value stored before normalization can still go).
    package static func lookupToRemove(_ change: DirectoryUserChange) -> StoredLookup? {
        switch change {
        case .removeEmail(let text): (kind: .email, value: UserLookup.normalizedEmail(text) ?? text)
        case .removePhone(let text): (kind: .phone, value: UserLookup.normalizedPhone(text) ?? text)
        case .addEmail, .addPhone, .setName, .setDisabled: nil
        }
    }

    /// A lookup (email, phone) as stored: its kind and normalized value; nil when it cannot
    /// find anyone (malformed) or names the user directly.
    package static func storedLookup(_ lookup: UserLookup) -> StoredLookup? {
        switch lookup {
        case .email(let text): UserLookup.normalizedEmail(text).map { (kind: LookupKind.email, value: $0) }
        case .phone(let text): UserLookup.normalizedPhone(text).map { (kind: LookupKind.phone, value: $0) }
        case .userRecordName: nil
        }
    }

    /// The error for a lookup value another user holds.
    package static func taken(_ value: String) -> StoreError {
        StoreError(.alreadyExists, "\(value) belongs to another user")
    }

    /// The error for an administrator's removal of a value the user does not hold.
    package static func notHeld(_ value: String, by user: String) -> StoreError {
        StoreError(.invalidArguments, "user \(user) has no \(value.prefix(260))")
    }

    /// The error for a user the directory does not know.
    package static func unknownUser(_ user: String) -> StoreError {
        StoreError(.unknownUser, "no user \(user.prefix(160))")
    }

    /// The error for ``UserStorage/createUser(_:at:)`` of a user that exists.
    package static func userExists(_ user: String) -> StoreError {
        StoreError(.alreadyExists, "user \(user) exists")
    }

    /// The error for a non-positive page size of ``UserStorage/discoverableUsers(in:after:limit:)``.
    package static func checkLimit(_ limit: Int) throws(StoreError) {
        guard limit > 0 else { throw StoreError(.invalidArguments, "limit must be positive, not \(limit)") }
    }

    /// The error for a token ID in use.
    package static func tokenExists(_ id: String) -> StoreError {
        StoreError(.alreadyExists, "token \(id.prefix(64)) exists")
    }

    /// The error for revoking a token that does not exist.
    package static func unknownToken(_ id: String) -> StoreError {
        StoreError(.invalidArguments, "no token \(id.prefix(64))")
    }

    /// A time as the engines store it (seconds since 1970, ``RecordCodec/seconds(_:)``) back as
    /// a timestamp.
    package static func timestamp(seconds: Double) -> Wire.Timestamp {
        let whole = seconds.rounded(.down)
        return Wire.Timestamp(seconds: Int64(whole), nanos: Int32(min(999_999_999, (seconds - whole) * 1_000_000_000)))
    }

    /// Decodes a stored user name (``DirectoryUser/nameComponents``).
    ///
    /// - throws: ``StoreError`` `.corruptData` when it does not decode.
    package static func nameComponents(_ bytes: [UInt8], of user: String) throws(StoreError) -> Wire.UserNameComponents {
        do {
            return try Wire.UserNameComponents(serializedBytes: bytes)
        } catch {
            throw StoreError(.corruptData, "the name of user \(user) does not decode: \(error)")
        }
    }
}
