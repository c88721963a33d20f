import ArgumentParser
import CirrusServer
import CirrusStore
import CirrusWire
import Foundation

/// `cirrusd tokens …`: bearer tokens of a data directory, issued, listed and revoked while
/// `cirrusd` runs. The server reads them every `--user-refresh-interval`: a new token works,
/// and a revoked or expired token's connections close, within that interval.
struct TokensCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "Issue, list and revoke the bearer tokens of a Cirrus data directory (works while cirrusd runs).",
        discussion: "Only a token's SHA-256 is stored: `issue` prints the token once.",
        subcommands: [Issue.self, List.self, Revoke.self]
    )

    static func describe(_ token: StoredToken, now: Wire.Timestamp) -> String {
        func date(_ time: Wire.Timestamp) -> String {
            ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(time.seconds)))
        }
        var status = "active"
        if let revoked = token.revokedAt {
            status = "revoked=" + date(revoked)
        } else if let expiry = token.expiresAt, (expiry.seconds, expiry.nanos) <= (now.seconds, now.nanos) {
            status = "expired"
        }
        var parts = [token.id, token.user, status, "created=" + date(token.createdAt)]
        parts.append("expires=" + (token.expiresAt.map(date) ?? "never"))
        if !token.label.isEmpty { parts.append("label=\"\(token.label)\"") }
        return parts.joined(separator: "  ")
    }

    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Issue a token for a user; prints the token (keep it: it is not stored) and its ID.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UsersCommand.UserArgument
        @Option(help: "How long it is valid (e.g. 30d, 12h); without it, until revoked.")
        var expiresIn: DurationArgument?
        @Option(help: "What the token is for (shown by list).")
        var label = ""

        func run() async throws {
            let name = try user.recordName
            guard label.utf8.count <= 200 else { throw ValidationError("--label is longer than 200 bytes") }
            try await UsersCommand.withStorage(location) { storage in
                let issued = BearerToken.generate()
                let now = SQLiteStorage.systemClock()
                let stored = StoredToken(
                    id: issued.id, hash: issued.hash, user: name, label: label, createdAt: now,
                    expiresAt: expiresIn.map { Wire.Timestamp(seconds: now.seconds + $0.seconds, nanos: now.nanos) })
                try await storage.saveToken(stored)
                print(issued.token)
                print(TokensCommand.describe(stored, now: now))
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tokens, one per line (never the tokens themselves).")
        @OptionGroup var location: StorageLocation
        @Option(help: "Only this user's tokens (alice or _alice).")
        var user: String?

        func run() async throws {
            let name = user.map { $0.hasPrefix("_") ? $0 : "_" + $0 }
            try await UsersCommand.withStorage(location) { storage in
                let now = SQLiteStorage.systemClock()
                for token in try await storage.tokens(of: name) {
                    print(TokensCommand.describe(token, now: now))
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a token by ID: it stops working and its connections close.")
        @OptionGroup var location: StorageLocation
        @Argument(help: "The token's ID (the first column of list).")
        var id: String

        func run() async throws {
            try await UsersCommand.withStorage(location) { storage in
                let now = SQLiteStorage.systemClock()
                print(TokensCommand.describe(try await storage.revokeToken(id, at: now), now: now))
            }
        }
    }
}
