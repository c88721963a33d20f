// Bytes → the opaque tokens a client hands back: the change-token unsealer for each feed
// (ChangeTokenSealer.open, what every change-feed request runs first) and the SQLite store's
// query-cursor reader (continueQuery, what a CKQueryOperation with a cursor runs), against a
// store holding a live cursor so that mutated positions reach the paging code too.
import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import FuzzSupport

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: FuzzArgc, _ argv: FuzzArgv) -> CInt {
    SeedWriter.writeIfRequested { TokenHarness.shared.seeds }
    _ = TokenHarness.shared
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzToken(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    TokenHarness.shared.run(FuzzInput.bytes(start, count))
    return 0
}

/// A sealer with a fixed key, and a store with records and a live query cursor.
final class TokenHarness: Sendable {
    static let shared = TokenHarness()

    static let user = "_fuzzer"
    let sealer = ChangeTokenSealer(secret: Array("fuzz".utf8))
    let database = DatabaseKey.private(container: SampleRequests.container, user: TokenHarness.user)
    let directory: String
    let storage: SQLiteStorage
    /// A cursor the store issued, after the first page of a query.
    let cursor: [UInt8]

    private init() {
        self.directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("cirrus-fuzz-token-\(ProcessInfo.processInfo.processIdentifier)").path
        do {
            self.storage = try SQLiteStorage(directory: self.directory)
        } catch {
            fatalError("cannot create the fuzzing store in \(self.directory): \(error)")
        }
        let storage = self.storage
        let database = self.database
        let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: Self.user)
        let records = (0..<5).map { index in
            Wire.Record(
                recordID: Wire.RecordID(recordName: "note-\(index)", zoneID: zone),
                recordType: "Note",
                fields: [Wire.RecordField(key: "count", value: Wire.FieldValue(kind: .int64Value(Int64(index))))]
            )
        }
        let cursor = runBlocking { () -> [UInt8]? in
            do {
                _ = try await storage.modifyRecords(RecordModification(saving: records), in: database, by: Self.user)
                let query = Wire.Query(recordType: "Note", predicate: Wire.QueryPredicate(node: .truePredicate(.init())))
                return try await storage.queryRecords(query, in: zone, of: database, desiredKeys: nil, limit: 2).cursor
            } catch {
                return nil
            }
        }
        guard let cursor else { fatalError("the fuzzing store issued no query cursor") }
        self.cursor = cursor
        atexit { try? FileManager.default.removeItem(atPath: TokenHarness.shared.directory) }
    }

    func run(_ bytes: [UInt8]) {
        let token = Wire.ServerChangeToken(opaque: bytes)
        for feed in [ChangeTokenSealer.Feed.zone("_defaultZone"), .database, .notifications] {
            _ = try? self.sealer.open(token, feed, in: self.database)
        }
        self.continueQuery(bytes)
        // Query cursors are sealed keyset positions: a mutated cursor must fail the seal check
        // (what a peer reaches). An input of a cursor's length also runs with the live
        // cursor's leading bytes, so mutations of the sealed body and tag are tried too.
        if bytes.count == self.cursor.count, bytes.count > 17 {
            self.continueQuery([bytes[0]] + self.cursor[1..<17] + bytes[17...])
        }
    }

    private func continueQuery(_ bytes: [UInt8]) {
        let storage = self.storage
        let database = self.database
        _ = runBlocking {
            try? await storage.continueQuery(bytes, in: database, desiredKeys: .sameAsQuery, limit: 2)
        }
    }

    /// Real tokens of every feed and the live cursor, plus a cursor one page further on.
    var seeds: [[UInt8]] {
        var seeds = [
            self.sealer.seal(.zone("_defaultZone"), in: self.database, incarnation: 1, seq: 5, floor: 0).opaque,
            self.sealer.seal(.database, in: self.database, incarnation: 0, seq: 2, floor: 0).opaque,
            self.sealer.seal(.notifications, in: self.database, incarnation: 0, seq: 7, floor: 3).opaque,
            self.cursor,
        ]
        var later = self.cursor
        later[later.count - 1] = 4
        seeds.append(later)
        return seeds
    }
}
