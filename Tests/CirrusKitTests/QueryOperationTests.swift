import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// `CKQueryOperation` and the query API against scripted replies.
@Suite("Query operation on the wire")
struct QueryOperationTests {
    static let zone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "_fake")

    static func wireID(_ name: String) -> Wire.RecordID {
        Wire.RecordID(recordName: name, zoneID: zone)
    }

    static func matched(_ name: String) -> Wire.Event.Payload {
        let record = Wire.Record(recordID: wireID(name), recordType: "Note", recordChangeTag: "t1")
        return .query(Wire.QueryEvent(callback: .recordMatched(Wire.RecordOutcome(recordID: wireID(name), outcome: .record(record)))))
    }

    static func unreadable(_ name: String) -> Wire.Event.Payload {
        let error = Wire.OperationError(code: .permissionFailure, message: "hidden")
        return .query(Wire.QueryEvent(callback: .recordMatched(Wire.RecordOutcome(recordID: wireID(name), outcome: .error(error)))))
    }

    static func cursor(_ bytes: [UInt8]) -> Wire.Complete.Result {
        .query(Wire.QueryResult(cursor: Wire.QueryCursor(opaque: bytes)))
    }

    /// The query request of the `index`th Open the peer received.
    static func request(_ peer: FakePeer, _ index: Int = 0) -> Wire.QueryRequest? {
        let opens = peer.opens
        guard index < opens.count, case .query(let request)? = opens[index].request else { return nil }
        return request
    }

    func container(_ peer: FakePeer) -> CKContainer {
        CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
    }

    @Test("The request carries the predicate tree, sort keys, zone, desired keys and limit")
    func request() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply() }
        defer { Task { await peer.stop() } }
        let predicate = CKPredicate(format: "category == %@ AND priority > %d", "work", 5)
        let query = CKQuery(recordType: "Note", predicate: predicate)
        query.sortDescriptors = [CKSortDescriptor(key: "createdAt", ascending: false)]
        let operation = CKQueryOperation(query: query)
        let zoneID = CKRecordZone.ID(zoneName: "Notes", ownerName: "_fake")
        operation.zoneID = zoneID
        operation.desiredKeys = ["title", "content"]
        operation.resultsLimit = 50
        await runToCompletion(operation, on: container(peer).privateCloudDatabase)
        let sent = try #require(Self.request(peer))
        #expect(peer.opens.first?.databaseScope == .private)
        #expect(sent.start == .query(try query.wireQuery))
        guard case .query(let wireQuery)? = sent.start else { return }
        #expect(wireQuery.recordType == "Note")
        #expect(wireQuery.predicate?.format == "category == %@ AND priority > %d")
        #expect(wireQuery.sortDescriptors == [Wire.QuerySortDescriptor(key: "createdAt", ascending: false)])
        #expect(sent.zoneID == zoneID.wireZoneID)
        #expect(sent.desiredKeys == ["title", "content"])
        #expect(sent.desiredKeysSpecified)
        #expect(sent.resultsLimit == 50)
    }

    @Test("Defaults: no zone, all keys, resultsLimit maximumResults (0)")
    func requestDefaults() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply() }
        defer { Task { await peer.stop() } }
        let operation = CKQueryOperation(query: CKQuery(recordType: "Note", predicate: CKPredicate(value: true)))
        #expect(operation.resultsLimit == CKQueryOperation.maximumResults)
        await runToCompletion(operation, on: container(peer).publicCloudDatabase)
        let sent = try #require(Self.request(peer))
        #expect(peer.opens.first?.databaseScope == .public)
        #expect(sent.zoneID == nil)
        #expect(sent.desiredKeys.isEmpty)
        #expect(!sent.desiredKeysSpecified)
        #expect(sent.resultsLimit == 0)
        guard case .query(let wireQuery)? = sent.start else {
            Issue.record("no query sent")
            return
        }
        #expect(wireQuery.predicate?.node == .truePredicate(Wire.TruePredicate()))
    }

    @Test("Matched records reach recordMatchedBlock in order; successes also reach recordFetchedBlock")
    func matchedInOrder() async throws {
        let names = (0..<120).map { "n\($0)" }
        var payloads = names.map(Self.matched)
        payloads.insert(Self.unreadable("secret"), at: 60)
        let peer = try await FakePeer.start { [payloads] _, _ in FakeReply(payloads: payloads) }
        defer { Task { await peer.stop() } }
        let operation = CKQueryOperation(query: CKQuery(recordType: "Note", predicate: CKPredicate(value: true)))
        let matched = Recorder<String>()
        let failed = Recorder<CKError.Code>()
        let fetched = Recorder<String>()
        let results = Recorder<Result<CKQueryOperation.Cursor?, any Error>>()
        operation.recordMatchedBlock = { id, result in
            matched.append(id.recordName)
            if let code = result.failureCode { failed.append(code) }
        }
        operation.recordFetchedBlock = { record in fetched.append(record.recordID.recordName) }
        operation.queryResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container(peer).privateCloudDatabase)
        var expected = names
        expected.insert("secret", at: 60)
        #expect(matched.values == expected)
        #expect(failed.values == [.permissionFailure])
        #expect(fetched.values == names)
        #expect(results.count == 1)
        if case .success(let cursor) = results.values.first {
            #expect(cursor == nil)
        } else {
            Issue.record("the query failed")
        }
    }

    @Test("The Complete's cursor reaches queryResultBlock and CKQueryOperation(cursor:) sends it back")
    func cursorRoundTrip() async throws {
        let peer = try await FakePeer.start { open, _ in
            guard case .query(let request)? = open.request else { return FakeReply() }
            switch request.start {
            case .query?: return FakeReply(payloads: [Self.matched("a"), Self.matched("b")], result: Self.cursor([1, 2, 3]))
            case .cursor?: return FakeReply(payloads: [Self.matched("c")])
            case nil: return FakeReply()
            }
        }
        defer { Task { await peer.stop() } }
        let database = container(peer).privateCloudDatabase
        let first = CKQueryOperation(query: CKQuery(recordType: "Note", predicate: CKPredicate(value: true)))
        let firstResult = Recorder<Result<CKQueryOperation.Cursor?, any Error>>()
        let deprecatedCursor = Recorder<CKQueryOperation.Cursor?>()
        first.queryResultBlock = { firstResult.append($0) }
        first.queryCompletionBlock = { cursor, error in
            #expect(error == nil)
            deprecatedCursor.append(cursor)
        }
        await runToCompletion(first, on: database)
        guard case .success(let cursor?)? = firstResult.values.first else {
            Issue.record("no cursor: \(firstResult.values)")
            return
        }
        #expect(cursor.data == Data([1, 2, 3]))
        #expect(deprecatedCursor.values.first == cursor)

        // Kept between launches as CloudKit apps keep it: archived with secure coding.
        let archived = try NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)
        let kept = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKQueryOperation.Cursor.self, from: archived))
        #expect(kept == cursor)
        let second = CKQueryOperation(cursor: kept)
        second.resultsLimit = 10
        let matched = Recorder<String>()
        let secondResult = Recorder<Result<CKQueryOperation.Cursor?, any Error>>()
        second.recordMatchedBlock = { id, _ in matched.append(id.recordName) }
        second.queryResultBlock = { secondResult.append($0) }
        await runToCompletion(second, on: database)
        let sent = try #require(Self.request(peer, 1))
        #expect(sent.start == .cursor(Wire.QueryCursor(opaque: [1, 2, 3])))
        #expect(sent.resultsLimit == 10)
        #expect(matched.values == ["c"])
        if case .success(let next)? = secondResult.values.first {
            #expect(next == nil)
        } else {
            Issue.record("the continued query failed")
        }
    }

    @Test("An invalid predicate fails with invalidArguments before anything is sent")
    func invalidPredicate() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply() }
        defer { Task { await peer.stop() } }
        let database = container(peer).privateCloudDatabase
        let operation = CKQueryOperation(query: CKQuery(recordType: "Note", predicate: CKPredicate(format: "a == 1 OR b == 2")))
        let results = Recorder<Result<CKQueryOperation.Cursor?, any Error>>()
        let completion = Recorder<String>()
        operation.queryResultBlock = { results.append($0) }
        operation.queryCompletionBlock = { cursor, error in
            completion.append("\(cursor == nil) \((error as? CKError)?.code == .invalidArguments)")
        }
        await runToCompletion(operation, on: database)
        #expect(results.count == 1)
        guard case .failure(let error as CKError)? = results.values.first else {
            Issue.record("the query did not fail")
            return
        }
        #expect(error.code == .invalidArguments)
        #expect(error.message == #"predicate "a == 1 OR b == 2": position 8: OR is not supported by CloudKit"#)
        #expect(completion.values == ["true true"])

        await #expect {
            _ = try await database.records(matching: CKQuery(recordType: "Note", predicate: CKPredicate(format: "priority > %d", "high")))
        } throws: { error in
            (error as? CKError)?.code == .invalidArguments
        }
        let noQuery = CKQueryOperation()
        let noQueryResult = Recorder<Result<CKQueryOperation.Cursor?, any Error>>()
        noQuery.queryResultBlock = { noQueryResult.append($0) }
        await runToCompletion(noQuery, on: database)
        #expect(noQueryResult.values.first?.failureCode == .invalidArguments)
        #expect(peer.opens.isEmpty)
    }

    @Test("A server error reaches queryResultBlock and queryCompletionBlock")
    func serverError() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(error: Wire.OperationError(code: .invalidArguments, message: "unknown field"))
        }
        defer { Task { await peer.stop() } }
        let operation = CKQueryOperation(query: CKQuery(recordType: "Note", predicate: CKPredicate(value: true)))
        let results = Recorder<Result<CKQueryOperation.Cursor?, any Error>>()
        let completion = Recorder<String>()
        operation.queryResultBlock = { results.append($0) }
        operation.queryCompletionBlock = { cursor, error in
            completion.append("\(cursor == nil) \((error as? CKError)?.message ?? "")")
        }
        await runToCompletion(operation, on: container(peer).privateCloudDatabase)
        #expect(results.values.first?.failureCode == .invalidArguments)
        #expect(completion.values == ["true unknown field"])
    }

    @Test("Async API: records(matching:) and records(continuingMatchFrom:)")
    func asyncAPI() async throws {
        let peer = try await FakePeer.start { open, _ in
            guard case .query(let request)? = open.request else { return FakeReply() }
            if case .cursor? = request.start { return FakeReply(payloads: [Self.matched("c")]) }
            return FakeReply(payloads: [Self.matched("a"), Self.unreadable("b")], result: Self.cursor([9]))
        }
        defer { Task { await peer.stop() } }
        let database = container(peer).privateCloudDatabase
        let zoneID = CKRecordZone.ID(zoneName: "Notes", ownerName: "_fake")
        let query = CKQuery(recordType: "Note", predicate: CKPredicate(format: "priority > %d", 5))
        let (matches, cursor) = try await database.records(matching: query, inZoneWith: zoneID, desiredKeys: ["title"], resultsLimit: 2)
        #expect(matches.map(\.0.recordName) == ["a", "b"])
        #expect((try? matches[0].1.get())?.recordType == "Note")
        #expect(matches[1].1.failureCode == .permissionFailure)
        let next = try #require(cursor)
        let sent = try #require(Self.request(peer))
        #expect(sent.zoneID == zoneID.wireZoneID)
        #expect(sent.desiredKeys == ["title"])
        #expect(sent.resultsLimit == 2)

        let (more, end) = try await database.records(continuingMatchFrom: next)
        #expect(more.map(\.0.recordName) == ["c"])
        #expect(end == nil)
        #expect(Self.request(peer, 1)?.start == .cursor(Wire.QueryCursor(opaque: [9])))
    }

    @Test("Completion-handler API: fetch(withQuery:), fetch(withCursor:), perform(_:inZoneWith:)")
    func completionHandlers() async throws {
        let peer = try await FakePeer.start { open, _ in
            guard case .query(let request)? = open.request else { return FakeReply() }
            if case .cursor? = request.start { return FakeReply(payloads: [Self.matched("c")]) }
            return FakeReply(payloads: [Self.matched("a"), Self.matched("b")], result: Self.cursor([7]))
        }
        defer { Task { await peer.stop() } }
        let database = container(peer).privateCloudDatabase
        let query = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
        let cursor: CKQueryOperation.Cursor? = await withCheckedContinuation { continuation in
            database.fetch(withQuery: query, resultsLimit: 2) { result in
                let value = try? result.get()
                #expect(value?.matchResults.map(\.0.recordName) == ["a", "b"])
                continuation.resume(returning: value?.queryCursor)
            }
        }
        let next = try #require(cursor)
        let names: [String] = await withCheckedContinuation { continuation in
            database.fetch(withCursor: next) { result in
                continuation.resume(returning: (try? result.get().matchResults.map(\.0.recordName)) ?? [])
            }
        }
        #expect(names == ["c"])
        let records: [CKRecord]? = await withCheckedContinuation { continuation in
            database.perform(query, inZoneWith: nil) { records, error in
                #expect(error == nil)
                continuation.resume(returning: records)
            }
        }
        #expect(records?.map(\.recordID.recordName) == ["a", "b"])
    }

    @Test("A cursor is Codable and compares by its bytes")
    func cursorValue() throws {
        let cursor = CKQueryOperation.Cursor(data: Data([0, 1, 255]))
        let decoded = try JSONDecoder().decode(CKQueryOperation.Cursor.self, from: JSONEncoder().encode(cursor))
        #expect(decoded == cursor)
        #expect(decoded.hashValue == cursor.hashValue)
        #expect(cursor.wireCursor == Wire.QueryCursor(opaque: [0, 1, 255]))
        #expect(CKQueryOperation.Cursor(wire: cursor.wireCursor) == cursor)
        #expect(CKQueryOperation.Cursor(data: Data([1])) != cursor)
    }
}

/// The query samples of the CloudKit operations reference (shared/seeds), kept as written
/// apart from `NSPredicate` → `CKPredicate`, `NSSortDescriptor` → `CKSortDescriptor` and
/// `print` going to a recorder.
@Suite("CloudKit reference samples: queries")
struct QuerySampleTests {
    /// Pages of two records: the first Open gets a, b and a cursor; each cursor the next page.
    static func pagedReply(_ open: Wire.Open) -> FakeReply {
        guard case .query(let request)? = open.request else { return FakeReply() }
        let page: Int
        switch request.start {
        case .cursor(let cursor)?: page = Int(cursor.opaque.first ?? 0)
        default: page = 0
        }
        let names = ["a", "b", "c", "d", "e"].dropFirst(page * 2).prefix(2)
        let more = page * 2 + 2 < 5
        return FakeReply(
            payloads: names.map(QueryOperationTests.matched),
            result: more ? QueryOperationTests.cursor([UInt8(page + 1)]) : nil)
    }

    @Test("CKQueryOperation with a predicate, sort, zone, desired keys and a limit; cursor pagination")
    func samples() async throws {
        let peer = try await FakePeer.start { open, _ in Self.pagedReply(open) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let database = container.privateCloudDatabase
        let log = Recorder<String>()
        func print(_ line: String) { log.append(line) }
        let oneWeekAgo = Date(timeIntervalSince1970: 1_700_000_000)
        let myZoneID = CKRecordZone.ID(zoneName: "Notes", ownerName: "_fake")
        let pages = Recorder<CKQueryOperation.Cursor>()
        func fetchNextPage(cursor: CKQueryOperation.Cursor) { pages.append(cursor) }
        func processResults(_ records: [CKRecord]) { print("processed \(records.count)") }

        // CKQueryOperation
        let predicate = CKPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
        let query = CKQuery(recordType: "Note", predicate: predicate)
        query.sortDescriptors = [CKSortDescriptor(key: "createdAt", ascending: false)]

        let operation = CKQueryOperation(query: query)
        operation.zoneID = myZoneID  // Optional: specific zone
        operation.desiredKeys = ["title", "content"]
        operation.resultsLimit = 50  // Pagination

        // Collect results
        var fetchedRecords: [CKRecord] = []

        operation.recordMatchedBlock = { recordID, result in
            if case .success(let record) = result {
                fetchedRecords.append(record)
            }
        }

        operation.queryResultBlock = { result in
            switch result {
            case .success(let cursor):
                if let cursor = cursor {
                    // More results available - fetch next page
                    fetchNextPage(cursor: cursor)
                } else {
                    // All results fetched
                    processResults(fetchedRecords)
                }
            case .failure(let error):
                print("Query failed: \(error)")
            }
        }

        await runToCompletion(operation, on: database)
        #expect(pages.count == 1)
        #expect(fetchedRecords.map(\.recordID.recordName) == ["a", "b"])
        #expect(QueryOperationTests.request(peer)?.resultsLimit == 50)

        // Cursor-based pagination
        var allRecords: [CKRecord] = []
        let done = AsyncStream<Void>.makeStream()

        func fetchAllRecords(cursor: CKQueryOperation.Cursor? = nil) {
            let operation: CKQueryOperation

            if let cursor = cursor {
                operation = CKQueryOperation(cursor: cursor)
            } else {
                let query = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
                operation = CKQueryOperation(query: query)
            }

            operation.resultsLimit = 100

            operation.recordMatchedBlock = { _, result in
                if case .success(let record) = result {
                    allRecords.append(record)
                }
            }

            operation.queryResultBlock = { result in
                if case .success(let nextCursor) = result {
                    if let nextCursor = nextCursor {
                        fetchAllRecords(cursor: nextCursor)  // Recursive
                    } else {
                        print("Fetched all \(allRecords.count) records")
                        done.continuation.finish()
                    }
                }
            }

            database.add(operation)
        }

        fetchAllRecords()
        for await _ in done.stream {}
        #expect(log.values.last == "Fetched all 5 records")
        #expect(allRecords.map(\.recordID.recordName) == ["a", "b", "c", "d", "e"])
        #expect(peer.opens.count == 4)
    }
}
