import CirrusKit
import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Testing

/// Users, account status, discoverability and discovery, as CloudKit code uses them, against
/// the whole stack: alice (a certificate with email subjectAltNames), bob, and dave (whose
/// certificate names dave@example.com but who never grants discoverability).
@Suite("User identities end to end", .timeLimit(.minutes(5)))
struct IdentitiesEndToEndTests {
    @Test func theCurrentUsersRecordIDAndAccountStatus() async throws {
        try await withStack { container in
            let alice = container("alice")
            let id = try await alice.userRecordID()
            #expect(id.recordName == "_alice")
            #expect(id.zoneID == .default)
            #expect(try await alice.accountStatus() == .available)
            // The completion-handler forms.
            let fetched = NIOLockedValueBox<CKRecord.ID?>(nil)
            let done = NIOLockedValueBox(false)
            alice.fetchUserRecordID { id, _ in
                fetched.withLockedValue { $0 = id }
                done.withLockedValue { $0 = true }
            }
            try await eventually { done.withLockedValue { $0 } }
            #expect(fetched.withLockedValue { $0 }?.recordName == "_alice")
            #expect(try await container("bob").userRecordID().recordName == "_bob")
        }
    }

    @Test func theUsersRecordIsReadableByAllAndWritableOnlyByItsUser() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            let id = try await alice.userRecordID()
            let record = try await alice.publicCloudDatabase.record(for: id)
            #expect(record.recordType == "Users")
            // Alice extends it; bob reads it.
            record["nickname"] = "Al"
            _ = try await alice.publicCloudDatabase.save(record)
            #expect(try await bob.publicCloudDatabase.record(for: id)["nickname"] as? String == "Al")
            // Asking again changes nothing.
            #expect(try await alice.userRecordID() == id)
            #expect(try await alice.publicCloudDatabase.record(for: id)["nickname"] as? String == "Al")

            func refusal(_ body: () async throws -> Void) async -> CKError.Code? {
                do {
                    try await body()
                    return nil
                } catch let error as CKError {
                    return error.code
                } catch {
                    return .internalError
                }
            }
            // Bob may not write alice's record, nor one of a user who has none yet (the same
            // answer), nor may anyone delete one.
            let fetched = try await bob.publicCloudDatabase.record(for: id)
            fetched["nickname"] = "Mallory"
            #expect(await refusal { _ = try await bob.publicCloudDatabase.save(fetched) } == .permissionFailure)
            let squat = CKRecord(recordType: "Users", recordID: CKRecord.ID(recordName: "_dave"))
            #expect(await refusal { _ = try await bob.publicCloudDatabase.save(squat) } == .permissionFailure)
            #expect(await refusal { _ = try await bob.publicCloudDatabase.deleteRecord(withID: id) } == .permissionFailure)
            #expect(await refusal { _ = try await alice.publicCloudDatabase.deleteRecord(withID: id) } == .permissionFailure)
            let wrongType = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "_bob"))
            #expect(await refusal { _ = try await bob.publicCloudDatabase.save(wrongType) } == .invalidArguments)
            #expect(try await alice.publicCloudDatabase.record(for: id)["nickname"] as? String == "Al")
        }
    }

    @Test func onlyUsersWhoGrantedDiscoverabilityAreFound() async throws {
        try await withStack { container in
            let alice = container("alice-mail")
            let bob = container("bob")
            let dave = container("dave")
            // Everyone connected once, so everyone is in the directory.
            for user in [alice, bob, dave] { _ = try await user.userRecordID() }

            #expect(try await alice.applicationPermissionStatus(for: .userDiscoverability) == .initialState)
            #expect(try await bob.userIdentity(forEmailAddress: "alice@example.com") == nil)

            #expect(try await alice.requestApplicationPermission(.userDiscoverability) == .granted)
            #expect(try await alice.applicationPermissionStatus(for: .userDiscoverability) == .granted)
            // By either address of her certificate, in any case, and by user record ID.
            let byEmail = try #require(try await bob.userIdentity(forEmailAddress: "ALICE@example.com"))
            #expect(byEmail.userRecordID?.recordName == "_alice")
            #expect(byEmail.lookupInfo?.emailAddress == "ALICE@example.com")
            #expect(byEmail.hasiCloudAccount)
            #expect(try await bob.userIdentity(forEmailAddress: "alice.work@example.com")?.userRecordID?.recordName == "_alice")
            let byID = try await bob.userIdentity(forUserRecordID: CKRecord.ID(recordName: "_alice"))
            #expect(byID?.userRecordID?.recordName == "_alice")

            // dave did not grant it: his address and his record ID find the same as nobody's.
            #expect(try await bob.userIdentity(forEmailAddress: "dave@example.com") == nil)
            #expect(try await bob.userIdentity(forUserRecordID: CKRecord.ID(recordName: "_dave")) == nil)
            #expect(try await bob.userIdentity(forEmailAddress: "nobody@example.com") == nil)
            #expect(try await bob.userIdentity(forPhoneNumber: "+15550000000") == nil)

            // The operation: one event per identity found, with the lookup info that found it.
            let infos =
                CKUserIdentity.LookupInfo.lookupInfos(withEmails: ["alice@example.com", "dave@example.com", "nobody@example.com"])
                + CKUserIdentity.LookupInfo.lookupInfos(with: [CKRecord.ID(recordName: "_alice"), CKRecord.ID(recordName: "_dave")])
            let operation = CKDiscoverUserIdentitiesOperation(userIdentityLookupInfos: infos)
            let found = Recorder<(String, CKUserIdentity.LookupInfo)>()
            let result = NIOLockedValueBox<Result<Void, any Error>?>(nil)
            let completion = NIOLockedValueBox<Bool>(false)
            operation.userIdentityDiscoveredBlock = { identity, info in
                found.append((identity.userRecordID?.recordName ?? "", info))
            }
            operation.discoverUserIdentitiesResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
            operation.discoverUserIdentitiesCompletionBlock = { error in completion.withLockedValue { $0 = error == nil } }
            bob.add(operation)
            await finished(operation)
            #expect(found.values.map(\.0) == ["_alice", "_alice"])
            #expect(found.values.map(\.1) == [infos[0], infos[3]])
            #expect(throws: Never.self) { try result.withLockedValue { $0 }?.get() }
            #expect(completion.withLockedValue { $0 })

            // Discover all: the discoverable users but oneself.
            #expect(try await discoverAll(bob) == ["_alice"])
            #expect(try await discoverAll(alice) == [])
            #expect(try await bob.requestApplicationPermission(.userDiscoverability) == .granted)
            #expect(try await discoverAll(alice) == ["_bob"])
            #expect(try await discoverAll(dave) == ["_alice", "_bob"])

            // Withdrawn, alice is no longer found.
            #expect(try await alice.revokeApplicationPermission(.userDiscoverability) == .denied)
            #expect(try await bob.userIdentity(forEmailAddress: "alice@example.com") == nil)
            #expect(try await discoverAll(dave) == ["_bob"])
        }
    }

    @Test func malformedLookupInfoIsRefusedClearly() async throws {
        try await withStack { container in
            let bob = container("bob")
            for lookup in [
                CKUserIdentity.LookupInfo(emailAddress: "not-an-email"),
                CKUserIdentity.LookupInfo(phoneNumber: "call me"),
                CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: "alice")),
                CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: "_alice", zoneID: CKRecordZone.ID(zoneName: "Notes"))),
            ] {
                do {
                    _ = try await discover(bob, [lookup])
                    Issue.record("\(lookup) was accepted")
                } catch let error as CKError {
                    #expect(error.code == .invalidArguments, "\(lookup): \(error)")
                }
            }
            let tooMany = (0..<401).map { CKUserIdentity.LookupInfo(emailAddress: "u\($0)@example.com") }
            do {
                _ = try await discover(bob, tooMany)
                Issue.record("401 lookups were accepted")
            } catch let error as CKError {
                #expect(error.code == .limitExceeded)
            }
        }
    }

    @Test func aDisabledUserHasNoAccountAndIsNotDiscovered() async throws {
        try await withStack(clock: nil) { container, internals in
            let alice = container("alice-mail")
            let bob = container("bob")
            #expect(try await alice.requestApplicationPermission(.userDiscoverability) == .granted)
            #expect(try await bob.userIdentity(forEmailAddress: "alice@example.com")?.nameComponents == nil)
            // What `cirrusd users set-name alice --given Alice --family Liddell` does.
            var name = Wire.UserNameComponents()
            name.givenName = "Alice"
            name.familyName = "Liddell"
            try await internals.storage.updateUser("_alice", .setName(name), at: SQLiteStorage.systemClock())
            let named = try #require(try await bob.userIdentity(forEmailAddress: "alice@example.com"))
            #expect(named.nameComponents?.givenName == "Alice")
            #expect(named.nameComponents?.familyName == "Liddell")
            // What `cirrusd users add-phone alice "+1 (555) 123-4567"` does: found in any spelling.
            try await internals.storage.updateUser("_alice", .addPhone("+1 (555) 123-4567"), at: SQLiteStorage.systemClock())
            #expect(try await bob.userIdentity(forPhoneNumber: "+1 555 123 4567")?.userRecordID?.recordName == "_alice")
            #expect(try await bob.userIdentity(forPhoneNumber: "+15551234567")?.lookupInfo?.phoneNumber == "+15551234567")
            // What `cirrusd users disable alice` does, and what the server's watch does next.
            try await internals.storage.updateUser("_alice", .setDisabled(true), at: SQLiteStorage.systemClock())
            for user in try await internals.users.refresh().disabledUsers { internals.server?.closeConnections(of: user) }
            #expect(try await bob.userIdentity(forEmailAddress: "alice@example.com") == nil)
            try await expectRefused("a disabled user") { _ = try await alice.userRecordID() }
            #expect(try await alice.accountStatus() == .noAccount)
        }
    }

    @Test func aWebAuthTokenServesASecondClientUntilItExpires() async throws {
        let clock = ManualClock()
        try await withStack(clock: clock) { container, internals in
            let alice = container("alice")
            let operation = CKFetchWebAuthTokenOperation(apiToken: "notes-api-token")
            let result = NIOLockedValueBox<Result<String, any Error>?>(nil)
            operation.fetchWebAuthTokenResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
            alice.privateCloudDatabase.add(operation)
            await finished(operation)
            let token = try #require(result.withLockedValue { $0 }).get()
            #expect(token.hasPrefix("cirrus_"))

            // A second client, without a certificate, is alice with it.
            var configuration = TestCertificates.client(port: internals.port, user: nil)
            configuration.bearerToken = token
            let web = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration)
            #expect(try await web.userRecordID().recordName == "_alice")
            let saved = try await web.privateCloudDatabase.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "from-web")))
            #expect(try await alice.privateCloudDatabase.record(for: saved.recordID).recordType == "Note")
            // A token does not renew itself.
            let renewal = CKFetchWebAuthTokenOperation(apiToken: "notes-api-token")
            let renewed = NIOLockedValueBox<Result<String, any Error>?>(nil)
            renewal.fetchWebAuthTokenResultBlock = { outcome in renewed.withLockedValue { $0 = outcome } }
            web.privateCloudDatabase.add(renewal)
            await finished(renewal)
            #expect((renewed.withLockedValue { $0 }.flatMap { try? $0.get() }) == nil)
            // No API token: refused before anything is sent.
            let bare = CKFetchWebAuthTokenOperation()
            let refused = NIOLockedValueBox<(any Error)?>(nil)
            bare.fetchWebAuthTokenCompletionBlock = { _, error in refused.withLockedValue { $0 = error } }
            alice.privateCloudDatabase.add(bare)
            await finished(bare)
            #expect((refused.withLockedValue { $0 } as? CKError)?.code == .invalidArguments)

            // An hour later it has expired: its connection closes, and it opens no other.
            clock.advance(seconds: UserDirectory.defaultWebAuthTokenLifetime + 1)
            let revocations = try await internals.users.refresh()
            #expect(revocations.tokenIDs.count == 1)
            for id in revocations.tokenIDs { internals.server?.closeConnections(usingToken: id) }
            try await expectRefused("an expired token") { _ = try await web.userRecordID() }
            #expect(try await alice.userRecordID().recordName == "_alice")
        }
    }

    /// Runs `body` until the server refuses it with `notAuthenticated`. A request that raced
    /// the server closing its connection fails with `networkFailure` instead and is tried again;
    /// one that succeeds is a failure of the test.
    private func expectRefused(_ what: String, _ body: () async throws -> Void) async throws {
        for _ in 0..<50 {
            do {
                try await body()
                Issue.record("\(what) was served")
                return
            } catch let error as CKError where error.code == .networkFailure {
                try await Task.sleep(for: .milliseconds(100))
            } catch let error as CKError {
                #expect(error.code == .notAuthenticated, "\(what): \(error)")
                return
            }
        }
        Issue.record("\(what): never refused with notAuthenticated")
    }

    private func discoverAll(_ container: CKContainer) async throws -> [String] {
        let operation = CKDiscoverAllUserIdentitiesOperation()
        let found = Recorder<String>()
        let result = NIOLockedValueBox<Result<Void, any Error>?>(nil)
        operation.userIdentityDiscoveredBlock = { found.append($0.userRecordID?.recordName ?? "") }
        operation.discoverAllUserIdentitiesResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
        container.add(operation)
        await finished(operation)
        try #require(result.withLockedValue { $0 }).get()
        return found.values.sorted()
    }

    private func discover(_ container: CKContainer, _ infos: [CKUserIdentity.LookupInfo]) async throws -> [CKUserIdentity] {
        let operation = CKDiscoverUserIdentitiesOperation(userIdentityLookupInfos: infos)
        let found = Recorder<CKUserIdentity>()
        let result = NIOLockedValueBox<Result<Void, any Error>?>(nil)
        operation.userIdentityDiscoveredBlock = { identity, _ in found.append(identity) }
        operation.discoverUserIdentitiesResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
        container.add(operation)
        await finished(operation)
        try #require(result.withLockedValue { $0 }).get()
        return found.values
    }
}
