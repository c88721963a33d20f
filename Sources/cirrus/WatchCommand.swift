import ArgumentParser
import CirrusCLI
import CirrusKit
import CirrusModel
import Foundation

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the notifications pushed to this user as JSON Lines, as they arrive.",
        discussion: """
            The first line is {"$token": "…"}: the position the watch starts from (--since, else \
            the end of the user's notification feed, so only notifications created from now on \
            follow). Then one line per notification as the server pushes it (see the README for \
            its fields); its "$token" is the position right after it: give the last one printed \
            to --since and a later run continues exactly there, missing and repeating nothing \
            (as long as the server still keeps it: --notification-retention). A dropped \
            connection is retried with backoff without losing anything. Notifications come from \
            subscriptions; --subscribe saves a database subscription (ID cirrus-watch) in the \
            private database first, so every change there is reported.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "A token a previous run printed: continue right after it.") var since: String?
    @Option(
        name: .customLong("scope"),
        help: "Only notifications of this database: private, public or shared (repeatable; default all).")
    var scopes: [String] = []
    @Option(help: "Exit after this many notifications (default: run until interrupted).") var count: Int?
    @Flag(help: "Save a database subscription (cirrus-watch) in the private database first.") var subscribe = false

    func run() async throws {
        var token: CKServerChangeToken?
        if let since = self.since {
            guard let data = Data(base64Encoded: since), !data.isEmpty else {
                throw CLIError.usage("--since: not a token (base64)")
            }
            token = CKServerChangeToken(opaqueBytes: Array(data))
        }
        let scopes = try self.scopes.map { name throws(CLIError) -> CKDatabase.Scope in
            switch name {
            case "private": .private
            case "public": .public
            case "shared": .shared
            default: throw CLIError.usage("--scope '\(name)': expected private, public or shared")
            }
        }
        if let count = self.count, count < 1 { throw CLIError.usage("--count \(count): expected at least 1") }
        let container = try self.connection.makeContainer()
        if self.subscribe {
            _ = try await cli("saving the cirrus-watch subscription") {
                try await container.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "cirrus-watch"))
            }
        }
        let start = try await cli("reading the notification feed") { () async throws -> CKServerChangeToken in
            if let token { return token }
            return try await Self.endOfFeed(container)
        }
        let writer = LineWriter(handle: FileHandle.standardOutput)
        writer.write(JSONValue.object([("$token", .string(NotificationJSON.text(of: start)))]).jsonText)
        writer.flush()
        let converter = FieldConverter(zoneID: .default)
        var printed = 0
        try await cli("watching notifications") {
            for try await notification in container.notifications(since: start, databaseScopes: scopes) {
                writer.write(NotificationJSON.object(notification, converter: converter).jsonText)
                writer.flush()
                printed += 1
                if let count = self.count, printed >= count { break }
            }
        }
    }

    /// The position after the user's newest kept notification.
    static func endOfFeed(_ container: CKContainer) async throws -> CKServerChangeToken {
        var token: CKServerChangeToken?
        while true {
            let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: token)
            let (next, moreComing) = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<(CKServerChangeToken, Bool), any Error>) in
                operation.fetchNotificationChangesResultBlock = { result in
                    continuation.resume(with: result.map { ($0.serverChangeToken, $0.moreComing) })
                }
                container.add(operation)
            }
            token = next
            if !moreComing { return next }
        }
    }
}
