import CirrusWire
import Testing

@testable import CirrusStore

/// The user directory (``UserStorage``) on every engine that keeps one: registration,
/// lookup values, administrators' changes and discovery, with the same answers everywhere.
@Suite("User directory")
struct UserStorageTests {
    private let notes = "iCloud.com.example.notes"
    private let other = "iCloud.com.example.other"

    private func at(_ seconds: Int64) -> Wire.Timestamp { Wire.Timestamp(seconds: seconds, nanos: 0) }

    @Test func registeringIsIdempotentAndRecordsWhenTheUserWasLastSeen() async throws {
        try await withDirectoryStore { storage, engine in
            let first = try await storage.registerUser("_alice", verifiedEmails: [], at: at(100))
            #expect(first.name == "_alice")
            #expect(first.createdAt == at(100), "\(engine)")
            #expect(first.lastSeenAt == at(100))
            #expect(!first.isDisabled)
            let again = try await storage.registerUser("_alice", verifiedEmails: [], at: at(250))
            #expect(again.createdAt == at(100), "created once")
            #expect(again.lastSeenAt == at(250))
            #expect(try await storage.allUsers().map(\.name) == ["_alice"])
            #expect(try await storage.user("_alice") == again)
            #expect(try await storage.user("_nobody") == nil)
        }
    }

    @Test func timesKeepTheirFractions() async throws {
        try await withDirectoryStore { storage, engine in
            let time = Wire.Timestamp(seconds: 1_700_000_000, nanos: 500_000_000)
            let user = try await storage.registerUser("_alice", verifiedEmails: [], at: time)
            #expect(user.lastSeenAt == time, "\(engine)")
        }
    }

    @Test func verifiedEmailsAreNormalizedAndTheFirstClaimantKeepsThem() async throws {
        try await withDirectoryStore { storage, engine in
            let alice = try await storage.registerUser(
                "_alice", verifiedEmails: [" Alice@Example.COM ", "not an address", "alice.work@example.com"], at: at(1))
            #expect(alice.emailAddresses == ["alice.work@example.com", "alice@example.com"], "\(engine)")
            let bob = try await storage.registerUser(
                "_bob", verifiedEmails: ["ALICE@example.com", "bob@example.com", "bob@example.com"], at: at(2))
            #expect(bob.emailAddresses == ["bob@example.com"], "alice's address stays hers")
            let again = try await storage.registerUser("_alice", verifiedEmails: ["alice@example.com"], at: at(3))
            #expect(again.emailAddresses == ["alice.work@example.com", "alice@example.com"])
        }
    }

    @Test func malformedUserNamesAreRefusedWithOneMessage() async throws {
        try await withDirectoryStore { storage, engine in
            for name in ["alice", "_", "_al ice", "_" + String(repeating: "a", count: 129), "_ä"] {
                let registering = await #expect(throws: StoreError.self) {
                    try await storage.registerUser(name, verifiedEmails: [], at: at(1))
                }
                #expect(registering?.code == .invalidArguments, "\(engine) \(name)")
                let creating = await #expect(throws: StoreError.self) { try await storage.createUser(name, at: at(1)) }
                #expect(creating?.code == .invalidArguments)
                #expect(creating?.message == registering?.message, "one check, one message")
            }
            let stored = try await storage.allUsers()
            #expect(stored.isEmpty, "nothing stored")
        }
    }

    @Test func createUserRefusesAUserThatExists() async throws {
        try await withDirectoryStore { storage, engine in
            let created = try await storage.createUser("_carol", at: at(10))
            #expect(created.createdAt == at(10), "\(engine)")
            #expect(created.lastSeenAt == nil, "an administrator's user was never seen")
            let error = await #expect(throws: StoreError.self) { try await storage.createUser("_carol", at: at(20)) }
            #expect(error?.code == .alreadyExists)
            _ = try await storage.registerUser("_dave", verifiedEmails: [], at: at(30))
            let registered = await #expect(throws: StoreError.self) { try await storage.createUser("_dave", at: at(40)) }
            #expect(registered?.code == .alreadyExists)
            #expect(try await storage.user("_carol")?.createdAt == at(10), "unchanged")
        }
    }

    @Test func administratorsAddAndRemoveLookupValues() async throws {
        try await withDirectoryStore { storage, engine in
            _ = try await storage.createUser("_alice", at: at(1))
            _ = try await storage.createUser("_bob", at: at(1))
            var alice = try await storage.updateUser("_alice", .addEmail("  ALICE@example.com"), at: at(2))
            alice = try await storage.updateUser("_alice", .addPhone("+1 (555) 010-0199"), at: at(3))
            #expect(alice.emailAddresses == ["alice@example.com"], "\(engine)")
            #expect(alice.phoneNumbers == ["+15550100199"])
            // Adding a value the user holds already changes nothing.
            #expect(try await storage.updateUser("_alice", .addEmail("alice@example.com"), at: at(4)) == alice)

            let taken = await #expect(throws: StoreError.self) {
                try await storage.updateUser("_bob", .addEmail("Alice@Example.com"), at: at(5))
            }
            #expect(taken?.code == .alreadyExists)
            let takenPhone = await #expect(throws: StoreError.self) {
                try await storage.updateUser("_bob", .addPhone("+1 555 010 0199"), at: at(5))
            }
            #expect(takenPhone?.code == .alreadyExists)
            for change in [DirectoryUserChange.addEmail("no-at-sign"), .addPhone("12"), .addPhone("call me")] {
                let malformed = await #expect(throws: StoreError.self) { try await storage.updateUser("_bob", change, at: at(6)) }
                #expect(malformed?.code == .invalidArguments, "\(change)")
            }
            let notHers = await #expect(throws: StoreError.self) {
                try await storage.updateUser("_bob", .removeEmail("alice@example.com"), at: at(7))
            }
            #expect(notHers?.code == .invalidArguments)
            #expect(try await storage.user("_bob")?.emailAddresses == [])

            alice = try await storage.updateUser("_alice", .removeEmail("ALICE@example.com "), at: at(8))
            alice = try await storage.updateUser("_alice", .removePhone("+1-555-010-0199"), at: at(9))
            #expect(alice.emailAddresses.isEmpty && alice.phoneNumbers.isEmpty)
            // A released value can be claimed again.
            let bob = try await storage.updateUser("_bob", .addEmail("alice@example.com"), at: at(10))
            #expect(bob.emailAddresses == ["alice@example.com"])

            let unknown = await #expect(throws: StoreError.self) {
                try await storage.updateUser("_nobody", .addEmail("x@example.com"), at: at(11))
            }
            #expect(unknown?.code == .unknownUser)
        }
    }

    @Test func administratorsNameAndDisableUsers() async throws {
        try await withDirectoryStore { storage, engine in
            _ = try await storage.createUser("_alice", at: at(1))
            _ = try await storage.createUser("_bob", at: at(1))
            var name = Wire.UserNameComponents()
            name.givenName = "Alice"
            name.familyName = "Liddell"
            var alice = try await storage.updateUser("_alice", .setName(name), at: at(2))
            #expect(alice.nameComponents == name, "\(engine)")
            alice = try await storage.updateUser("_alice", .setDisabled(true), at: at(3))
            #expect(alice.isDisabled)
            #expect(try await storage.disabledUsers() == ["_alice"])
            #expect(try await storage.user("_alice")?.nameComponents == name, "the name stays")
            alice = try await storage.updateUser("_alice", .setDisabled(false), at: at(4))
            #expect(!alice.isDisabled)
            #expect(try await storage.disabledUsers().isEmpty)
            alice = try await storage.updateUser("_alice", .setName(nil), at: at(5))
            #expect(alice.nameComponents == nil)
        }
    }

    @Test func discoverabilityIsPerContainer() async throws {
        try await withDirectoryStore { storage, engine in
            _ = try await storage.createUser("_alice", at: at(1))
            #expect(try await storage.discoverability(of: "_alice", in: notes) == nil, "\(engine): never asked")
            try await storage.setDiscoverability(.granted, of: "_alice", in: notes)
            try await storage.setDiscoverability(.denied, of: "_alice", in: other)
            #expect(try await storage.discoverability(of: "_alice", in: notes) == .granted)
            #expect(try await storage.discoverability(of: "_alice", in: other) == .denied)
            try await storage.setDiscoverability(.denied, of: "_alice", in: notes)
            #expect(try await storage.discoverability(of: "_alice", in: notes) == .denied)
            try await storage.setDiscoverability(nil, of: "_alice", in: notes)
            #expect(try await storage.discoverability(of: "_alice", in: notes) == nil)
            #expect(try await storage.discoverability(of: "_alice", in: other) == .denied)
            let unknown = await #expect(throws: StoreError.self) {
                try await storage.setDiscoverability(.granted, of: "_nobody", in: notes)
            }
            #expect(unknown?.code == .unknownUser)
        }
    }

    @Test func discoveryFindsOnlyGrantedEnabledUsersAndAnswersAsForNobodyOtherwise() async throws {
        try await withDirectoryStore { storage, engine in
            for (user, email) in [("_alice", "alice@example.com"), ("_bob", "bob@example.com"), ("_carol", "carol@example.com"), ("_dave", "dave@example.com")] {
                _ = try await storage.registerUser(user, verifiedEmails: [email], at: at(1))
            }
            _ = try await storage.updateUser("_alice", .addPhone("+44 20 7946 0018"), at: at(2))
            try await storage.setDiscoverability(.granted, of: "_alice", in: notes)
            try await storage.setDiscoverability(.denied, of: "_bob", in: notes)
            try await storage.setDiscoverability(.granted, of: "_carol", in: other)
            try await storage.setDiscoverability(.granted, of: "_dave", in: notes)
            _ = try await storage.updateUser("_dave", .setDisabled(true), at: at(3))

            let found = try await storage.discoverUsers(
                matching: [
                    .email("ALICE@example.com"), .phone("+442079460018"), .userRecordName("_alice"),
                    .email("bob@example.com"),  // denied
                    .email("carol@example.com"),  // granted elsewhere only
                    .userRecordName("_dave"),  // disabled
                    .email("nobody@example.com"), .email("not an address"), .userRecordName("_nobody"),
                ], in: notes)
            #expect(found.count == 9, "\(engine)")
            #expect(found[0]?.name == "_alice")
            #expect(found[0]?.phoneNumbers == ["+442079460018"])
            #expect(found[1]?.name == "_alice")
            #expect(found[2]?.name == "_alice")
            #expect(found[3...].allSatisfy { $0 == nil }, "\(found[3...])")

            #expect(try await storage.discoverableUsers(in: notes, after: nil, limit: 10).map(\.name) == ["_alice"])
            #expect(try await storage.discoverableUsers(in: other, after: nil, limit: 10).map(\.name) == ["_carol"])
            _ = try await storage.updateUser("_dave", .setDisabled(false), at: at(4))
            #expect(try await storage.discoverUsers(matching: [.email("dave@example.com")], in: notes).first??.name == "_dave")
        }
    }

    @Test func discoverableUsersPagesByName() async throws {
        try await withDirectoryStore { storage, engine in
            for user in ["_erin", "_Zed", "_alice", "_bob", "_carol"] {
                _ = try await storage.createUser(user, at: at(1))
                try await storage.setDiscoverability(.granted, of: user, in: notes)
            }
            let first = try await storage.discoverableUsers(in: notes, after: nil, limit: 2)
            #expect(first.map(\.name) == ["_Zed", "_alice"], "\(engine): byte order")
            let second = try await storage.discoverableUsers(in: notes, after: first.last?.name, limit: 2)
            #expect(second.map(\.name) == ["_bob", "_carol"])
            let third = try await storage.discoverableUsers(in: notes, after: second.last?.name, limit: 2)
            #expect(third.map(\.name) == ["_erin"])
            let zero = await #expect(throws: StoreError.self) {
                try await storage.discoverableUsers(in: notes, after: nil, limit: 0)
            }
            #expect(zero?.code == .invalidArguments)
        }
    }

    @Test func tooManyLookupsInOneRequestAreRefused() async throws {
        try await withDirectoryStore { storage, engine in
            let lookups = (0...SQLiteStorage.defaultMaxItemsPerOperation).map { UserLookup.userRecordName("_u\($0)") }
            let error = await #expect(throws: StoreError.self) {
                try await storage.discoverUsers(matching: lookups, in: notes)
            }
            #expect(error?.code == .limitExceeded, "\(engine)")
        }
    }

    @Test func allUsersAreSortedByteWise() async throws {
        try await withDirectoryStore { storage, engine in
            for user in ["_bob", "_Alice", "_alice", "_a.b", "_a-b"] { _ = try await storage.createUser(user, at: at(1)) }
            #expect(try await storage.allUsers().map(\.name) == ["_Alice", "_a-b", "_a.b", "_alice", "_bob"], "\(engine)")
        }
    }
}
