import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusStore

let container = "iCloud.com.example.tests"
let alice = DatabaseKey.private(container: container, user: "_alice")
let bob = DatabaseKey.private(container: container, user: "_bob")
let publicDB = DatabaseKey.public(container: container)

/// A fresh directory under the system temporary directory.
func temporaryDirectory() -> String {
    (NSTemporaryDirectory() as NSString).appendingPathComponent("cirrus-store-\(UUID().uuidString)")
}

/// Runs `body` with a storage in a fresh temporary directory, removed afterwards.
func withStore(
    clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock,
    _ body: (SQLiteStorage, String) async throws -> Void
) async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let storage = try SQLiteStorage(directory: directory, clock: clock)
    try await body(storage, directory)
    try storage.close()
}

func zoneID(_ name: String, in key: DatabaseKey = alice) -> Wire.RecordZoneID {
    Wire.RecordZoneID(zoneName: name, ownerName: key.owner)
}

func recordID(_ name: String, zone: String = "_defaultZone", in key: DatabaseKey = alice) -> Wire.RecordID {
    Wire.RecordID(recordName: name, zoneID: zoneID(zone, in: key))
}

func field(_ key: String, _ kind: Wire.FieldValue.Kind?) -> Wire.RecordField {
    Wire.RecordField(key: key, value: kind.map { Wire.FieldValue(kind: $0) })
}

func note(
    _ name: String, zone: String = "_defaultZone", in key: DatabaseKey = alice, tag: String = "",
    _ fields: [Wire.RecordField] = []
) -> Wire.Record {
    Wire.Record(recordID: recordID(name, zone: zone, in: key), recordType: "Note", recordChangeTag: tag, fields: fields)
}

func reference(_ target: Wire.RecordID, deleteSelf: Bool = true) -> Wire.FieldValue.Kind {
    .referenceValue(Wire.Reference(recordID: target, action: deleteSelf ? .deleteSelf : .none))
}

extension Wire.Record {
    func value(_ key: String) -> Wire.FieldValue.Kind? {
        fields.first { $0.key == key }?.value?.kind
    }
    var keys: Set<String> { Set(fields.map(\.key)) }
}

extension RecordModificationResult {
    func saved(_ index: Int) -> Wire.Record? {
        guard saves.indices.contains(index), case .record(let record) = saves[index].outcome else { return nil }
        return record
    }
    func saveError(_ index: Int) -> Wire.OperationError? {
        guard saves.indices.contains(index), case .error(let error) = saves[index].outcome else { return nil }
        return error
    }
}

extension Wire.RecordOutcome {
    var record: Wire.Record? { if case .record(let record) = outcome { record } else { nil } }
    var error: Wire.OperationError? { if case .error(let error) = outcome { error } else { nil } }
}

extension Wire.RecordZoneOutcome {
    var zone: Wire.RecordZone? { if case .zone(let zone) = outcome { zone } else { nil } }
    var error: Wire.OperationError? { if case .error(let error) = outcome { error } else { nil } }
}

extension SQLiteStorage {
    /// Saves records with the default policy and expects every one to succeed.
    @discardableResult
    func saveAll(_ records: [Wire.Record], in key: DatabaseKey = alice, by user: String = "_alice") async throws -> [Wire.Record] {
        let result = try await modifyRecords(RecordModification(saving: records), in: key, by: user)
        return try result.saves.indices.map { try #require(result.saved($0), "save \($0): \(result.saves[$0])") }
    }

    func createZone(_ name: String, in key: DatabaseKey = alice) async throws {
        let result = try await modifyZones(saving: [Wire.RecordZone(zoneID: zoneID(name, in: key))], deleting: [], in: key)
        #expect(result.saves.first?.zone != nil)
    }

    func fetch(_ id: Wire.RecordID, desiredKeys: [String]? = nil, in key: DatabaseKey = alice) async throws -> Wire.RecordOutcome {
        try #require(try await fetchRecords([id], desiredKeys: desiredKeys, in: key).first)
    }

    func count(_ table: String) async throws -> Int { try await rowCount(of: table) }
}

/// A clock that advances one second per call, starting at `start`.
final class SteppingClock: Sendable {
    private let next: Mutex<Int64>
    init(start: Int64 = 1_700_000_000) { next = Mutex(start) }
    var clock: @Sendable () -> Wire.Timestamp {
        { [self] in next.withLock { value in defer { value += 1 }; return Wire.Timestamp(seconds: value, nanos: 0) } }
    }
}
