import CirrusWire
import Testing

@testable import CirrusStore

/// Bearer tokens (``TokenStorage``) on every engine that keeps them.
@Suite("Bearer tokens")
struct TokenStorageTests {
    private func at(_ seconds: Int64) -> Wire.Timestamp { Wire.Timestamp(seconds: seconds, nanos: 0) }

    private func token(
        _ id: String, user: String = "_alice", created: Int64, expires: Int64? = nil, revoked: Int64? = nil
    ) -> StoredToken {
        StoredToken(
            id: id, hash: Array(id.utf8) + [0, 0xFF], user: user, label: "label of \(id)", createdAt: at(created),
            expiresAt: expires.map(at), revokedAt: revoked.map(at))
    }

    @Test func aSavedTokenReadsBackAsSavedAndRegistersItsUser() async throws {
        try await withDirectoryStore { storage, engine in
            let saved = token("t1", user: "_newcomer", created: 100, expires: 900)
            try await storage.saveToken(saved)
            #expect(try await storage.tokens(of: "_newcomer") == [saved], "\(engine)")
            let user = try #require(try await storage.user("_newcomer"), "the token's user is registered")
            #expect(user.createdAt == at(100))
            #expect(user.lastSeenAt == nil)
            // A user the directory knows keeps their row as it was.
            _ = try await storage.registerUser("_alice", verifiedEmails: [], at: at(5))
            try await storage.saveToken(token("t2", created: 200))
            #expect(try await storage.user("_alice")?.createdAt == at(5))
        }
    }

    @Test func aTokenIDInUseIsRefusedAndNothingIsStored() async throws {
        try await withDirectoryStore { storage, engine in
            try await storage.saveToken(token("t1", created: 1))
            let duplicate = await #expect(throws: StoreError.self) {
                try await storage.saveToken(token("t1", user: "_bob", created: 2))
            }
            #expect(duplicate?.code == .alreadyExists, "\(engine)")
            #expect(try await storage.tokens(of: nil).map(\.user) == ["_alice"])
            #expect(try await storage.user("_bob") == nil, "the refused token's user is not registered either")
            let malformed = await #expect(throws: StoreError.self) {
                try await storage.saveToken(token("t2", user: "bob", created: 3))
            }
            #expect(malformed?.code == .invalidArguments)
            #expect(try await storage.tokens(of: nil).count == 1)
        }
    }

    @Test func tokensAreListedPerUserOrAllOldestFirst() async throws {
        try await withDirectoryStore { storage, engine in
            try await storage.saveToken(token("c", created: 30))
            try await storage.saveToken(token("b", user: "_bob", created: 20))
            try await storage.saveToken(token("a", created: 30))
            try await storage.saveToken(token("d", created: 10, revoked: 15))
            #expect(try await storage.tokens(of: "_alice").map(\.id) == ["d", "a", "c"], "\(engine): by time, then ID")
            #expect(try await storage.tokens(of: "_bob").map(\.id) == ["b"])
            #expect(try await storage.tokens(of: nil).map(\.id) == ["d", "b", "a", "c"])
            #expect(try await storage.tokens(of: "_nobody").isEmpty)
        }
    }

    @Test func revokingIsIdempotentAndAnUnknownTokenIsRefused() async throws {
        try await withDirectoryStore { storage, engine in
            try await storage.saveToken(token("t1", created: 1))
            let revoked = try await storage.revokeToken("t1", at: at(50))
            #expect(revoked.revokedAt == at(50), "\(engine)")
            #expect(revoked.id == "t1" && revoked.hash == token("t1", created: 1).hash)
            let again = try await storage.revokeToken("t1", at: at(80))
            #expect(again.revokedAt == at(50), "the first revocation stands")
            #expect(try await storage.tokens(of: nil) == [again])
            let unknown = await #expect(throws: StoreError.self) { try await storage.revokeToken("t9", at: at(90)) }
            #expect(unknown?.code == .invalidArguments)
        }
    }

    @Test func activeTokensAreNeitherRevokedNorExpiredAtThatTime() async throws {
        try await withDirectoryStore { storage, engine in
            try await storage.saveToken(token("forever", created: 1))
            try await storage.saveToken(token("expires", created: 2, expires: 100))
            try await storage.saveToken(token("revoked", created: 3))
            #expect(Set(try await storage.activeTokens(at: at(40)).map(\.id)) == ["forever", "expires", "revoked"], "\(engine)")
            try await storage.revokeToken("revoked", at: at(50))
            #expect(Set(try await storage.activeTokens(at: at(40)).map(\.id)) == ["forever", "expires"], "revoked is revoked")
            #expect(Set(try await storage.activeTokens(at: at(60)).map(\.id)) == ["forever", "expires"])
            #expect(Set(try await storage.activeTokens(at: at(100)).map(\.id)) == ["forever"], "expired at its time")
        }
    }

    @Test func pruningDeletesTheTokensThatEndedBeforeTheCutoff() async throws {
        try await withDirectoryStore { storage, engine in
            try await storage.saveToken(token("expired-long-ago", created: 1, expires: 200))
            try await storage.saveToken(token("expired-lately", created: 2, expires: 900))
            try await storage.saveToken(token("revoked-long-ago", created: 3))
            try await storage.saveToken(token("never-expires", created: 4))
            try await storage.saveToken(token("revoked-lately", created: 5, expires: 100))
            try await storage.revokeToken("revoked-long-ago", at: at(300))
            try await storage.revokeToken("revoked-lately", at: at(950))
            #expect(try await storage.pruneTokens(endedBefore: at(500)) == 2, "\(engine)")
            #expect(
                try await storage.tokens(of: nil).map(\.id) == ["expired-lately", "never-expires", "revoked-lately"],
                "a revocation after the cutoff keeps a token that expired before it")
            #expect(try await storage.pruneTokens(endedBefore: at(500)) == 0)
            #expect(try await storage.pruneTokens(endedBefore: at(1000)) == 2)
            #expect(try await storage.tokens(of: nil).map(\.id) == ["never-expires"])
        }
    }
}
