import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusPostgres

/// What a node's long-lived observers heard, in order.
private final class HeardSignals: Sendable {
    private let heard = Mutex<[LongLivedOperationSignal]>([])

    init(_ storage: PostgresStorage) {
        storage.observeLongLivedOperations { [self] signal in self.heard.withLock { $0.append(signal) } }
    }

    var all: [LongLivedOperationSignal] { heard.withLock { $0 } }
}

private func event(_ name: String) -> Wire.Event.Payload {
    .fetchRecords(
        Wire.FetchRecordsEvent(
            callback: .perRecordResult(Wire.RecordOutcome(recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone"))))))
}

/// The signals of long-lived operations between nodes (``PostgresLongLivedSignals``): what one
/// node commits, every node's observers hear through `LISTEN`/`NOTIFY`, also after the
/// listening connection was lost; a payload too long to send is left out, never failing the
/// write it reports.
@Suite("PostgreSQL long-lived operation signals across nodes")
struct PostgresLongLivedSignalTests {
    let open = Wire.Open(operationID: "op", databaseScope: .private, containerIdentifier: container)

    private func withTwoNodes(_ body: (PostgresStorage, PostgresStorage, PostgresURL) async throws -> Void) async throws {
        let url = try newDatabase()
        try await withPostgresStore(url) { first in
            try await withPostgresStore(url) { second in
                try await body(first, second, url)
            }
        }
    }

    @Test func payloadsSayWhatHappenedAndNothingElse() {
        let key = LongLivedOperationKey(owner: "_alice \"quoted\"", operationID: "op/ü")
        for signal in [LongLivedOperationSignal.journaled(key, lastSeq: 7), .journaled(key, lastSeq: 0), .cancelRequested(key)] {
            let payload = PostgresLongLivedSignals.payload(signal)
            #expect(payload.flatMap(PostgresLongLivedSignals.signal(payload:)) == signal, "\(String(describing: payload))")
        }
        for payload in ["", "{}", "[1,2]", #"{"o":"_alice","i":"op"}"#, #"{"c":"_alice","f":1,"h":2,"u":"x"}"#] {
            #expect(PostgresLongLivedSignals.signal(payload: payload) == nil, "\(payload)")
        }
        let long = LongLivedOperationKey(owner: "_alice", operationID: String(repeating: "x", count: 8_000))
        #expect(PostgresLongLivedSignals.payload(.journaled(long, lastSeq: 1)) == nil)
    }

    @Test func whatOneNodeCommitsTheOtherHears() async throws {
        try await withTwoNodes { first, second, _ in
            let heard = HeardSignals(second)
            let key = LongLivedOperationKey(owner: "_alice", operationID: "op")
            _ = try await first.registerLongLivedOperation(key, open: open, at: Wire.Timestamp(seconds: 1))
            _ = try await first.appendLongLivedEvents([event("1"), event("2")], to: key, checkpoint: nil)
            try await eventually(timeout: .seconds(60), "node 2 hears the append") { heard.all.contains(.journaled(key, lastSeq: 2)) }
            #expect(try await first.requestLongLivedCancellation(key))
            try await eventually(timeout: .seconds(60), "node 2 hears the cancellation") { heard.all.contains(.cancelRequested(key)) }

            // An operation ID too long for a NOTIFY: its writes succeed, unsignalled.
            let long = LongLivedOperationKey(owner: "_alice", operationID: String(repeating: "x", count: 8_000))
            let longOpen = Wire.Open(operationID: long.operationID, databaseScope: .private, containerIdentifier: container)
            _ = try await first.registerLongLivedOperation(long, open: longOpen, at: Wire.Timestamp(seconds: 1))
            #expect(try await first.appendLongLivedEvents([event("1")], to: long, checkpoint: nil).map(\.seq) == [1])
            let completed = try await first.completeLongLivedOperation(long, complete: Wire.Complete(), at: Wire.Timestamp(seconds: 2))
            #expect(completed.lastSeq == 1)
            // The next signal still comes, after nothing of the long one.
            _ = try await first.completeLongLivedOperation(key, complete: Wire.Complete(), at: Wire.Timestamp(seconds: 2))
            try await eventually(timeout: .seconds(60), "node 2 hears the completion") { heard.all.count == 3 }
            #expect(heard.all.allSatisfy { $0.key == key })
        }
    }

    @Test func aNodeWhoseListenerReconnectedHearsSignalsAgain() async throws {
        try await withTwoNodes { first, second, _ in
            let heard = HeardSignals(second)
            let key = LongLivedOperationKey(owner: "_alice", operationID: "op")
            _ = try await first.registerLongLivedOperation(key, open: open, at: Wire.Timestamp(seconds: 1))
            let pid = try #require(second.listener.backendPID)
            let listens = second.listener.listens
            try TemporaryPostgres.shared().psql("SELECT pg_terminate_backend(\(pid))")
            try await eventually(timeout: .seconds(60), "node 2's listener listens again") {
                second.listener.listens > listens && second.listener.backendPID != nil
            }
            _ = try await first.appendLongLivedEvents([event("1")], to: key, checkpoint: nil)
            try await eventually(timeout: .seconds(60), "node 2 hears the append") { heard.all.contains(.journaled(key, lastSeq: 1)) }
        }
    }
}
