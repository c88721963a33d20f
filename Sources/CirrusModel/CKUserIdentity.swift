import CirrusWire
import Foundation

/// A user found by discovery (CloudKit's `CKUserIdentity`): their user record ID, the lookup
/// info they were found by, and their name when they set one. Only users who granted the
/// `userDiscoverability` permission are ever found.
///
/// For example:
/// ```swift
/// let identity = try await container.userIdentity(forEmailAddress: "bob@example.com")
/// print(identity?.userRecordID?.recordName ?? "not discoverable")
/// ```
public final class CKUserIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The user's record ID (record name like `_bob`, default zone); nil for someone without
    /// an account.
    public let userRecordID: CKRecord.ID?
    /// The email address, phone number or user record ID this identity was found by.
    public let lookupInfo: LookupInfo?
    /// The user's name, when they set one and are discoverable.
    public let nameComponents: PersonNameComponents?
    /// Whether the user has an account on the server (always true for a discovered user).
    public let hasiCloudAccount: Bool
    /// Contact identifiers on the device (never set by the server).
    public let contactIdentifiers: [String]

    public init(
        userRecordID: CKRecord.ID?, lookupInfo: LookupInfo?, nameComponents: PersonNameComponents?,
        hasiCloudAccount: Bool, contactIdentifiers: [String] = []
    ) {
        self.userRecordID = userRecordID
        self.lookupInfo = lookupInfo
        self.nameComponents = nameComponents
        self.hasiCloudAccount = hasiCloudAccount
        self.contactIdentifiers = contactIdentifiers
    }

    public static func == (lhs: CKUserIdentity, rhs: CKUserIdentity) -> Bool {
        lhs.userRecordID == rhs.userRecordID && lhs.lookupInfo == rhs.lookupInfo
            && lhs.nameComponents == rhs.nameComponents && lhs.hasiCloudAccount == rhs.hasiCloudAccount
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(userRecordID)
        hasher.combine(lookupInfo)
    }

    public var description: String {
        "CKUserIdentity(\(userRecordID?.recordName ?? "no account"), lookup: \(lookupInfo.map(String.init(describing:)) ?? "none"))"
    }
}

extension CKUserIdentity {
    /// How to look a user up (CloudKit's `CKUserIdentity.LookupInfo`): one email address,
    /// phone number or user record ID.
    ///
    /// For example:
    /// ```swift
    /// let infos = CKUserIdentity.LookupInfo.lookupInfos(withEmails: ["bob@example.com"])
    /// let operation = CKDiscoverUserIdentitiesOperation(userIdentityLookupInfos: infos)
    /// ```
    public struct LookupInfo: Hashable, Sendable, CustomStringConvertible {
        public let emailAddress: String?
        public let phoneNumber: String?
        public let userRecordID: CKRecord.ID?

        public init(emailAddress: String) {
            self.emailAddress = emailAddress
            self.phoneNumber = nil
            self.userRecordID = nil
        }

        public init(phoneNumber: String) {
            self.emailAddress = nil
            self.phoneNumber = phoneNumber
            self.userRecordID = nil
        }

        public init(userRecordID: CKRecord.ID) {
            self.emailAddress = nil
            self.phoneNumber = nil
            self.userRecordID = userRecordID
        }

        public static func lookupInfos(withEmails emails: [String]) -> [LookupInfo] {
            emails.map(LookupInfo.init(emailAddress:))
        }

        public static func lookupInfos(withPhoneNumbers phoneNumbers: [String]) -> [LookupInfo] {
            phoneNumbers.map(LookupInfo.init(phoneNumber:))
        }

        public static func lookupInfos(with recordIDs: [CKRecord.ID]) -> [LookupInfo] {
            recordIDs.map(LookupInfo.init(userRecordID:))
        }

        public var description: String {
            emailAddress ?? phoneNumber ?? userRecordID?.recordName ?? "empty"
        }
    }
}

// MARK: - Wire

extension CKUserIdentity.LookupInfo {
    /// The lookup info a server sent; nil when it sets none of its three parts or a malformed
    /// record ID.
    package init?(wire: Wire.UserIdentityLookupInfo) {
        if !wire.emailAddress.isEmpty {
            self.init(emailAddress: wire.emailAddress)
        } else if !wire.phoneNumber.isEmpty {
            self.init(phoneNumber: wire.phoneNumber)
        } else if let id = wire.userRecordID, let recordID = try? CKRecord.ID(wire: id) {
            self.init(userRecordID: recordID)
        } else {
            return nil
        }
    }

    package var wireLookupInfo: Wire.UserIdentityLookupInfo {
        Wire.UserIdentityLookupInfo(
            emailAddress: emailAddress ?? "", phoneNumber: phoneNumber ?? "", userRecordID: userRecordID?.wireRecordID)
    }
}

extension CKUserIdentity {
    /// The identity a server sent; parts that do not decode are left out.
    package convenience init(wire: Wire.UserIdentity) {
        self.init(
            userRecordID: wire.userRecordID.flatMap { try? CKRecord.ID(wire: $0) },
            lookupInfo: wire.lookupInfo.flatMap(LookupInfo.init(wire:)),
            nameComponents: wire.nameComponents.map(Self.nameComponents),
            hasiCloudAccount: wire.hasIcloudAccount,
            contactIdentifiers: wire.contactIdentifiers
        )
    }

    static func nameComponents(_ wire: Wire.UserNameComponents) -> PersonNameComponents {
        var components = PersonNameComponents()
        func part(_ text: String) -> String? { text.isEmpty ? nil : text }
        components.namePrefix = part(wire.namePrefix)
        components.givenName = part(wire.givenName)
        components.middleName = part(wire.middleName)
        components.familyName = part(wire.familyName)
        components.nameSuffix = part(wire.nameSuffix)
        components.nickname = part(wire.nickname)
        return components
    }
}

extension CKUserIdentity {
    /// The identity as a wire message (the name goes only where the server sent one).
    package var wireIdentity: Wire.UserIdentity {
        Wire.UserIdentity(
            userRecordID: userRecordID?.wireRecordID,
            lookupInfo: lookupInfo?.wireLookupInfo,
            nameComponents: nameComponents.map { components in
                Wire.UserNameComponents(
                    namePrefix: components.namePrefix ?? "", givenName: components.givenName ?? "",
                    middleName: components.middleName ?? "", familyName: components.familyName ?? "",
                    nameSuffix: components.nameSuffix ?? "", nickname: components.nickname ?? "")
            },
            hasIcloudAccount: hasiCloudAccount,
            contactIdentifiers: contactIdentifiers)
    }
}
