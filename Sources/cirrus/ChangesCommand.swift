import ArgumentParser
import CirrusBench
import CirrusCLI
import CirrusKit
import CirrusModel
import Foundation

struct Changes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a zone's changes since a token as JSON Lines.",
        discussion: """
            Each changed record is a line with "$change": "changed" and the record; each deletion \
            {"$change": "deleted", "$recordName": …, "$recordType": …}; after the changes a line \
            {"$token": "…"} holds the zone's change token (base64) for the next --since. With \
            --follow it keeps polling the zone's change feed every --interval and prints new \
            changes and tokens until interrupted. A token that is too old fails with exit 1 \
            (change token expired): fetch again without --since.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The zone.") var zone: String
    @Option(help: "A token a previous run printed (default: from the beginning).") var since: String?
    @Flag(help: "Keep polling for new changes.") var follow = false
    @Option(help: "How often --follow polls, e.g. 1s.") var interval = "1s"

    func run() async throws {
        var token: CKServerChangeToken?
        if let since = self.since {
            guard let data = Data(base64Encoded: since) else { throw CLIError.usage("--since: not a token (base64)") }
            token = CKServerChangeToken(opaqueBytes: Array(data))
        }
        guard let seconds = BenchDuration.seconds(parsing: self.interval), seconds > 0 else {
            throw CLIError.usage("--interval '\(self.interval)': expected a duration such as 1s")
        }
        let container = try self.connection.makeContainer()
        let zoneID = CKRecordZone.ID(zoneName: self.zone)
        let writer = LineWriter(handle: FileHandle.standardOutput)
        while true {
            let next = try await Self.fetch(database: container.privateCloudDatabase, zoneID: zoneID, since: token, writer: writer)
            if next != token || token == nil {
                writer.write(JSONValue.object([("$token", .string(Data(next.opaqueBytes).base64EncodedString()))]).jsonText)
            }
            writer.flush()
            token = next
            guard self.follow else { break }
            try await Task.sleep(for: .seconds(seconds))
        }
    }

    /// Writes the zone's changes after `since`; returns the zone's new token.
    static func fetch(
        database: CKDatabase, zoneID: CKRecordZone.ID, since: CKServerChangeToken?, writer: LineWriter
    ) async throws(CLIError) -> CKServerChangeToken {
        let converter = Locked(FieldConverter(zoneID: zoneID))
        let operation = CKFetchRecordZoneChangesOperation(
            recordZoneIDs: [zoneID],
            configurationsByRecordZoneID: [zoneID: .init(previousServerChangeToken: since)])
        operation.recordWasChangedBlock = { _, result in
            guard case .success(let record) = result else { return }
            let object = converter.withLock { RecordJSON.object(record, converter: $0, system: true) }
            if case .object(let members) = object {
                writer.write(JSONValue.object([("$change", .string("changed"))] + members).jsonText)
            }
        }
        operation.recordWithIDWasDeletedBlock = { id, type in
            writer.write(
                JSONValue.object([
                    ("$change", .string("deleted")), ("$recordName", .string(id.recordName)), ("$recordType", .string(type)),
                ]).jsonText)
        }
        let token = Locked<Result<CKServerChangeToken, any Error>?>(nil)
        operation.recordZoneFetchResultBlock = { _, result in
            token.withLock { $0 = result.map(\.serverChangeToken) }
        }
        return try await cli("changes of zone \(zoneID.zoneName)") {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CKServerChangeToken, any Error>) in
                operation.fetchRecordZoneChangesResultBlock = { result in
                    switch (token.withLock { $0 }, result) {
                    case (.success(let token)?, _): continuation.resume(returning: token)
                    case (.failure(let error)?, _): continuation.resume(throwing: error)
                    case (nil, .failure(let error)): continuation.resume(throwing: error)
                    case (nil, .success): continuation.resume(throwing: CKError(.internalError, message: "no token for the zone"))
                    }
                }
                database.add(operation)
            }
        }
    }
}
