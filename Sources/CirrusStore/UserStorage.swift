public import CirrusWire
import Foundation

/// The user directory: every user the server knows, the lookup info others may find them by
/// (email addresses, phone numbers), their name, whether an administrator disabled them, and,
/// per container, whether they made themselves discoverable (CKContainer's
/// `userDiscoverability` permission).
///
/// Users come from two places: an authenticated connection registers its user (and the email
/// addresses its client certificate vouches for) with ``registerUser(_:verifiedEmails:at:)``;
/// an administrator adds, changes and disables them (`cirrusd users …`). A lookup value belongs
/// to one user at most. Discovery only ever returns users who granted discoverability in that
/// container and are not disabled: for anyone else the answer is the same as for nobody.
///
/// For example:
/// ```swift
/// _ = try await storage.registerUser("_alice", verifiedEmails: ["alice@example.com"], at: now)
/// try await storage.setDiscoverability(.granted, of: "_alice", in: "iCloud.com.example.notes")
/// let found = try await storage.discoverUsers(matching: [.email("alice@example.com")], in: "iCloud.com.example.notes")
/// ```
public protocol UserStorage: Sendable {
    /// Creates `user` if it is new, records when it was last seen, and adds each of
    /// `verifiedEmails` (normalized) that no other user holds as its lookup info.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a malformed name.
    @discardableResult
    func registerUser(_ user: String, verifiedEmails: [String], at time: Wire.Timestamp) async throws -> DirectoryUser

    /// Creates `user` for an administrator.
    ///
    /// - throws: ``StoreError`` `.alreadyExists` when it exists, `.invalidArguments` for a
    ///   malformed name.
    @discardableResult
    func createUser(_ user: String, at time: Wire.Timestamp) async throws -> DirectoryUser

    /// The user named `user`, or nil.
    ///
    /// - throws: ``StoreError``.
    func user(_ user: String) async throws -> DirectoryUser?

    /// Every user, by name.
    ///
    /// - throws: ``StoreError``.
    func allUsers() async throws -> [DirectoryUser]

    /// Applies `change` to `user`.
    ///
    /// - throws: ``StoreError`` `.unknownUser`, `.alreadyExists` (a lookup value another user
    ///   holds), `.invalidArguments` (a malformed email address or phone number).
    @discardableResult
    func updateUser(_ user: String, _ change: DirectoryUserChange, at time: Wire.Timestamp) async throws -> DirectoryUser

    /// The names of the disabled users.
    ///
    /// - throws: ``StoreError``.
    func disabledUsers() async throws -> Set<String>

    /// Sets (`nil`: clears) whether `user` may be discovered by others in `container`.
    ///
    /// - throws: ``StoreError`` `.unknownUser`.
    func setDiscoverability(_ status: Discoverability?, of user: String, in container: String) async throws

    /// Whether `user` may be discovered in `container`; nil when never asked.
    ///
    /// - throws: ``StoreError``.
    func discoverability(of user: String, in container: String) async throws -> Discoverability?

    /// One answer per lookup, in order: the user it finds, or nil when it finds nobody who is
    /// discoverable in `container` and enabled.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` for more lookups than one request may carry.
    func discoverUsers(matching lookups: [UserLookup], in container: String) async throws -> [DirectoryUser?]

    /// The discoverable, enabled users of `container` after `user` (nil: from the first), by
    /// name, at most `limit`.
    ///
    /// - throws: ``StoreError``.
    func discoverableUsers(in container: String, after user: String?, limit: Int) async throws -> [DirectoryUser]
}

/// A user as the directory holds it.
public struct DirectoryUser: Sendable, Hashable {
    /// The user record name, e.g. `_alice`.
    public var name: String
    /// Normalized (lowercased) email addresses, sorted.
    public var emailAddresses: [String]
    /// Phone numbers as given (digits and a leading `+`), sorted.
    public var phoneNumbers: [String]
    /// The user's name; nil when nobody set it.
    public var nameComponents: Wire.UserNameComponents?
    public var isDisabled: Bool
    public var createdAt: Wire.Timestamp
    /// When a connection of the user last authenticated; nil when never.
    public var lastSeenAt: Wire.Timestamp?

    public init(
        name: String, emailAddresses: [String] = [], phoneNumbers: [String] = [],
        nameComponents: Wire.UserNameComponents? = nil, isDisabled: Bool = false, createdAt: Wire.Timestamp,
        lastSeenAt: Wire.Timestamp? = nil
    ) {
        self.name = name
        self.emailAddresses = emailAddresses
        self.phoneNumbers = phoneNumbers
        self.nameComponents = nameComponents
        self.isDisabled = isDisabled
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
    }
}

/// An administrator's change to a user.
public enum DirectoryUserChange: Sendable, Hashable {
    case addEmail(String)
    case removeEmail(String)
    case addPhone(String)
    case removePhone(String)
    /// Sets the name; nil clears it.
    case setName(Wire.UserNameComponents?)
    /// Disables (true) or enables (false) the user.
    case setDisabled(Bool)
}

/// A user's answer to the `userDiscoverability` permission in one container.
public enum Discoverability: Int, Sendable, Hashable {
    case denied = 2
    case granted = 3
}

/// How to find a user (CKUserIdentity.LookupInfo).
public enum UserLookup: Sendable, Hashable {
    case email(String)
    case phone(String)
    case userRecordName(String)
}

extension UserLookup {
    /// An email address in the form the directory keeps it (lowercased, trimmed), or nil when
    /// it is not an address (`local@domain`, at most 254 bytes, no spaces or controls).
    public static func normalizedEmail(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let parts = trimmed.split(separator: "@", omittingEmptySubsequences: false)
        guard (3...254).contains(trimmed.utf8.count), parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
            trimmed.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F })
        else { return nil }
        return trimmed
    }

    /// A phone number in the form the directory keeps it (digits, an optional leading `+`;
    /// spaces, dashes, dots and parentheses dropped), or nil when it is not one (4…20 digits).
    public static func normalizedPhone(_ text: String) -> String? {
        var result = ""
        for (index, character) in text.trimmingCharacters(in: .whitespaces).enumerated() {
            switch character {
            case "0"..."9": result.append(character)
            case "+" where index == 0: result.append(character)
            case " ", "-", ".", "(", ")": continue
            default: return nil
            }
        }
        let digits = result.filter(\.isNumber).count
        guard (4...20).contains(digits) else { return nil }
        return result
    }

    /// Whether `name` can be a user record name: `_` and then 1…128 letters, digits, `.`, `-`,
    /// `_`, `@`.
    public static func isValidUserRecordName(_ name: String) -> Bool {
        guard name.hasPrefix("_") else { return false }
        let rest = name.utf8.dropFirst()
        guard (1...128).contains(rest.count) else { return false }
        return rest.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"),
                UInt8(ascii: "_"), UInt8(ascii: "@"):
                true
            default:
                false
            }
        }
    }
}
