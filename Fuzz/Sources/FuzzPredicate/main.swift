// Text → CKPredicate(parsing:) (lexer and parser) → the wire predicate a client sends → the
// store's query validation (QueryValidation.compile) → evaluation against a sample record.
// The raw format string also goes to the store as the wire predicate's only content.
@_spi(CirrusTools) import CirrusModel
import CirrusWire
import Foundation
import FuzzSupport

@testable import CirrusStore

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: FuzzArgc, _ argv: FuzzArgv) -> CInt {
    SeedWriter.writeIfRequested { predicateSeeds.map(SeedWriter.utf8) }
    return 0
}

/// The arguments every format is parsed with: one of each kind `%@`/`%d`/`%f`/`%K` can take.
nonisolated(unsafe) private let arguments: [Any] = [
    "Gro", 3, 2.5, "title", Date(timeIntervalSince1970: 1_700_000_000), ["home", "work"], [1, 2, 3],
    CKLocation(latitude: 48.85, longitude: 2.35), CKRecord.Reference(recordID: CKRecord.ID(recordName: "folder-1"), action: .none),
    Data([1, 2, 3]), true, Int64.max, -0.0,
]

private let sample = SampleRequests.sampleRecord

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPredicate(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let format = FuzzInput.text(start, count) else { return 0 }
    guard let predicate = try? CKPredicate(parsing: format, argumentArray: arguments) else { return 0 }
    _ = predicate.description
    guard let wire = try? predicate.toolsWirePredicate else { return 0 }
    let query = Wire.Query(recordType: "Note", predicate: wire)
    guard let compiled = try? QueryValidation.compile(query) else { return 0 }
    let evaluator = QueryEvaluator(zoneName: "_defaultZone", databaseOwner: "_fuzzer") { _, _ in true }
    _ = try? evaluator.matches(compiled.predicate, sample, rowID: 1)
    return 0
}

private let predicateSeeds = [
    "TRUEPREDICATE",
    "FALSEPREDICATE",
    "title == %@",
    "title != 'Groceries' AND count >= %d",
    "title BEGINSWITH %@",
    "count IN %@",
    "tags CONTAINS 'home'",
    "NOT (rating < 2.5)",
    "%K == %@",
    "creationDate > %@ AND modificationDate <= %@",
    "folder == %@",
    "recordID == %@",
    "self CONTAINS 'milk bread'",
    "distanceToLocation:fromLocation:(place, %@) < 1000",
    "count BETWEEN {1, 5}",
    "title IN {'a', \"b\", 'c'}",
    "(count > 1 AND (rating >= 1.5e0 AND NOT title == \"x\\\"y\")) AND tags CONTAINS %@",
    "blob == %@",
    "count == -9223372036854775808",
    "title == 'ünïcödé 🎉'",
]
