import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// One user by email address, phone number or user record ID, on
/// `CKDiscoverUserIdentitiesOperation` (CloudKit's `discoverUserIdentity(with…)`).
///
/// For example:
/// ```swift
/// if let bob = try await container.userIdentity(forEmailAddress: "bob@example.com") {
///     print(bob.userRecordID?.recordName ?? "")
/// }
/// ```
extension CKContainer {
    /// Looks up the user with `email`; the handler gets nil (and no error) when nobody
    /// discoverable has it.
    public func discoverUserIdentity(
        withEmailAddress email: String, completionHandler: @escaping @Sendable (CKUserIdentity?, (any Error)?) -> Void
    ) {
        self.discoverOne(CKUserIdentity.LookupInfo(emailAddress: email), completionHandler)
    }

    /// Looks up the user with `phoneNumber` (see `discoverUserIdentity(withEmailAddress:completionHandler:)`).
    public func discoverUserIdentity(
        withPhoneNumber phoneNumber: String, completionHandler: @escaping @Sendable (CKUserIdentity?, (any Error)?) -> Void
    ) {
        self.discoverOne(CKUserIdentity.LookupInfo(phoneNumber: phoneNumber), completionHandler)
    }

    /// Looks up the user with `userRecordID` (see `discoverUserIdentity(withEmailAddress:completionHandler:)`).
    public func discoverUserIdentity(
        withUserRecordID userRecordID: CKRecord.ID,
        completionHandler: @escaping @Sendable (CKUserIdentity?, (any Error)?) -> Void
    ) {
        self.discoverOne(CKUserIdentity.LookupInfo(userRecordID: userRecordID), completionHandler)
    }

    /// The discoverable user with `email`, or nil.
    ///
    /// - throws: `CKError`, e.g. `.invalidArguments` for a malformed address.
    public func userIdentity(forEmailAddress email: String) async throws -> CKUserIdentity? {
        try await self.discoverOne(CKUserIdentity.LookupInfo(emailAddress: email))
    }

    /// The discoverable user with `phoneNumber`, or nil.
    ///
    /// - throws: `CKError`.
    public func userIdentity(forPhoneNumber phoneNumber: String) async throws -> CKUserIdentity? {
        try await self.discoverOne(CKUserIdentity.LookupInfo(phoneNumber: phoneNumber))
    }

    /// The discoverable user with `userRecordID`, or nil.
    ///
    /// - throws: `CKError`.
    public func userIdentity(forUserRecordID userRecordID: CKRecord.ID) async throws -> CKUserIdentity? {
        try await self.discoverOne(CKUserIdentity.LookupInfo(userRecordID: userRecordID))
    }

    private func discoverOne(_ info: CKUserIdentity.LookupInfo) async throws -> CKUserIdentity? {
        try await withCheckedThrowingContinuation { continuation in
            self.discoverOne(info) { identity, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: identity) }
            }
        }
    }

    private func discoverOne(
        _ info: CKUserIdentity.LookupInfo, _ completionHandler: @escaping @Sendable (CKUserIdentity?, (any Error)?) -> Void
    ) {
        let found = NIOLockedValueBox<CKUserIdentity?>(nil)
        let operation = CKDiscoverUserIdentitiesOperation(userIdentityLookupInfos: [info])
        operation.userIdentityDiscoveredBlock = { identity, _ in found.withLockedValue { $0 = identity } }
        operation.discoverUserIdentitiesResultBlock = { result in
            switch result {
            case .success: completionHandler(found.withLockedValue { $0 }, nil)
            case .failure(let error): completionHandler(nil, error)
            }
        }
        ConvenienceScope.apply(to: operation)
        self.add(operation)
    }
}
