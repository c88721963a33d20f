import CirrusStore
import CirrusWire
import Foundation
import Synchronization

// `SQLiteStorage.modifyRecords` called directly, as Benchmarks/' "Store" benchmarks do, in a
// temporary directory (WAL, synchronous = FULL). Each line: records per second of wall time,
// and the process's CPU time (user + system, all threads: the writer, the callers' tasks,
// building the records) per record saved.

/// User + system CPU seconds of the whole process so far.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

struct BenchFailure: Error {}

let key = DatabaseKey.private(container: "iCloud.bench", user: "_alice")
let counter = Atomic<Int>(0)

/// `count` new records of three fields (a string, two integers), as Benchmarks/StoreWrites.swift
/// makes them, or of five (a double and a second string besides).
func records(_ count: Int, fields: Int) -> [Wire.Record] {
    let first = counter.add(count, ordering: .relaxed).oldValue
    let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: key.owner)
    return (first..<first + count).map { index in
        var values = [
            Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Note number \(index)"))),
            Wire.RecordField(key: "count", value: Wire.FieldValue(kind: .int64Value(Int64(index)))),
            Wire.RecordField(key: "done", value: Wire.FieldValue(kind: .int64Value(Int64(index % 2)))),
        ]
        if fields > 3 {
            values.append(Wire.RecordField(key: "score", value: Wire.FieldValue(kind: .doubleValue(Double(index) / 2))))
            values.append(Wire.RecordField(key: "tag", value: Wire.FieldValue(kind: .stringValue("tag\(index % 17)"))))
        }
        return Wire.Record(
            recordID: Wire.RecordID(recordName: "r\(index)", zoneID: zone), recordType: "Note", fields: values)
    }
}

let storage = try SQLiteStorage.temporary()

func save(_ records: [Wire.Record]) async throws {
    let result = try await storage.modifyRecords(RecordModification(saving: records), in: key, by: "_alice")
    if result.hasFailures { throw BenchFailure() }
}

/// `operations` saves of `perOperation` new records each, `inFlight` outstanding at a time.
func run(_ label: String, perOperation: Int, inFlight: Int, operations: Int, fields: Int = 3) async throws {
    let batches = (0..<operations).map { _ in records(perOperation, fields: fields) }
    let cpu = cpuSeconds()
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        while next < min(inFlight, operations) {
            let batch = batches[next]
            group.addTask { try await save(batch) }
            next += 1
        }
        while try await group.next() != nil {
            guard next < operations else { continue }
            let batch = batches[next]
            group.addTask { try await save(batch) }
            next += 1
        }
    }
    let elapsed = ContinuousClock.now - start
    let wall = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let used = cpuSeconds() - cpu
    let saved = Double(perOperation * operations)
    print(String(
        format: "%@: %.0f records/s, CPU %.1f µs/record (%.2f s wall, %.2f s CPU)",
        label, saved / wall, used / saved * 1e6, wall, used))
}

let rounds = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 3
try await run("warm-up", perOperation: 400, inFlight: 1, operations: 50)
for _ in 0..<rounds {
    try await run("400 records per save, 1 in flight", perOperation: 400, inFlight: 1, operations: 100)
    try await run("400 records of 5 fields per save, 4 in flight", perOperation: 400, inFlight: 4, operations: 100, fields: 5)
    try await run("1 record per save, 64 in flight", perOperation: 1, inFlight: 64, operations: 10_000)
}
try storage.destroy()
