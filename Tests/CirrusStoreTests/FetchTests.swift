import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusStore

@Suite("Fetch and assets")
struct FetchTests {
    @Test func desiredKeysNilEmptyAndSubset() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("n", [field("a", .int64Value(1)), field("b", .stringValue("x")), field("c", .doubleValue(2.5))])])
            let all = try #require(try await storage.fetch(recordID("n")).record)
            #expect(all.keys == ["a", "b", "c"])
            let none = try #require(try await storage.fetch(recordID("n"), desiredKeys: []).record)
            #expect(none.fields.isEmpty)
            #expect(none.recordChangeTag == all.recordChangeTag)
            #expect(none.recordType == "Note")
            #expect(none.creationDate != nil)
            let some = try #require(try await storage.fetch(recordID("n"), desiredKeys: ["b", "zzz"]).record)
            #expect(some.keys == ["b"])
        }
    }

    @Test func missingRecordsAreUnknownItemsInRequestOrder() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll([note("here")])
            let outcomes = try await storage.fetchRecords(
                [recordID("nope"), recordID("here"), recordID("x", zone: "Missing"), recordID("y", zone: "Z")],
                desiredKeys: nil, in: alice)
            #expect(outcomes.map(\.id) == [recordID("nope"), recordID("here"), recordID("x", zone: "Missing"), recordID("y", zone: "Z")])
            #expect(outcomes[0].failure?.code == .unknownItem)
            #expect(outcomes[1].record?.recordID == recordID("here"))
            #expect(outcomes[2].failure?.code == .zoneNotFound)
            #expect(outcomes[3].failure?.code == .unknownItem)
        }
    }

    @Test func aRecordIDWithoutZoneMeansTheDefaultZone() async throws {
        try await withSyncStore { storage, _ in
            let saved = try #require(
                try await storage.saveAll([Wire.Record(recordID: Wire.RecordID(recordName: "bare"), recordType: "Note")]).first)
            #expect(saved.recordID == recordID("bare"))
            #expect(try await storage.fetch(Wire.RecordID(recordName: "bare")).record != nil)
        }
    }

    @Test func everyValueKindRoundTrips() async throws {
        try await withSyncStore { storage, _ in
            let location = Wire.Location(latitude: 48.85, longitude: 2.35, horizontalAccuracy: 5)
            let fields = [
                field("s", .stringValue("text")), field("i", .int64Value(-7)), field("d", .doubleValue(0.5)),
                field("b", .bytesValue([0, 1, 2])), field("t", .dateValue(Wire.Timestamp(seconds: 10, nanos: 5))),
                field("r", reference(recordID("other"), deleteSelf: false)), field("l", .locationValue(location)),
                field("sl", .stringList(Wire.StringList(values: ["a", "b"]))),
                field("il", .int64List(Wire.Int64List(values: []))),
            ]
            let saved = try #require(try await storage.saveAll([note("n", fields)]).first)
            let fetched = try #require(try await storage.fetch(recordID("n")).record)
            #expect(fetched == saved)
            #expect(fetched.fields == fields)
        }
    }

    @Test func assetsAreStoredOncePerChecksumAndFetchedWithContent() async throws {
        try await withAssetStore { storage, _ in
            let content: [UInt8] = Array("hello, asset".utf8)
            let asset = Wire.Asset(sha256: Wire.SHA256.hash(content), size: UInt64(content.count), fileName: "a.txt", content: .inlineData(content))
            let saved = try await storage.saveAll([
                note("one", [field("file", .assetValue(asset))]),
                note("two", [field("files", .assetList(Wire.AssetList(values: [asset, asset])))]),
            ])
            #expect(try await storage.count("assets") == 1)
            // The saved record keeps checksum and size, not the bytes.
            guard case .assetValue(let stored) = saved[0].value("file") else {
                Issue.record("no asset")
                return
            }
            #expect(stored.content == nil)
            #expect(stored.sha256 == asset.sha256)
            let fetched = try #require(try await storage.fetch(recordID("one")).record)
            #expect(fetched.value("file") == .assetValue(asset))
            let list = try #require(try await storage.fetch(recordID("two")).record)
            #expect(list.value("files") == .assetList(Wire.AssetList(values: [asset, asset])))
        }
    }

    @Test func assetContentIsVerified() async throws {
        try await withAssetStore { storage, _ in
            let content: [UInt8] = [1, 2, 3]
            let wrongHash = Wire.Asset(sha256: Array(repeating: 0, count: 32), size: 3, content: .inlineData(content))
            let wrongSize = Wire.Asset(sha256: Wire.SHA256.hash(content), size: 4, content: .inlineData(content))
            let noHash = Wire.Asset(size: 3, content: .inlineData(content))
            let upload = Wire.Asset(sha256: Wire.SHA256.hash(content), size: 3, content: .uploadHandle("h"))
            let result = try await storage.modifyRecords(
                RecordModification(
                    saving: [
                        note("a", [field("f", .assetValue(wrongHash))]), note("b", [field("f", .assetValue(wrongSize))]),
                        note("c", [field("f", .assetValue(noHash))]), note("d", [field("f", .assetValue(upload))]),
                    ],
                    isAtomic: false),
                in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .assetFileModified)
            #expect(result.saveError(1)?.code == .assetFileModified)
            guard case .assetValue(let computed) = result.saved(2)?.value("f") else {
                Issue.record("no asset")
                return
            }
            #expect(computed.sha256 == Wire.SHA256.hash(content))
            #expect(result.saveError(3)?.code == .assetFileNotFound)
        }
    }

    /// Content the server's asset file store holds is saved by checksum and size with the
    /// file-content handle; the record comes back without inline bytes, and the user's asset
    /// bytes count it once.
    @Test func fileContentIsSavedByChecksumAndCountedOnce() async throws {
        try await withAssetStore { storage, _ in
            let digest = Wire.SHA256.hash(Array("in a file".utf8))
            let file = Wire.Asset(sha256: digest, size: 5000, content: .uploadHandle(RecordModification.fileContentHandle))
            try await storage.saveAll([note("a", [field("f", .assetValue(file))]), note("b", [field("f", .assetValue(file))])])
            let fetched = try #require(try await storage.fetch(recordID("a")).record)
            #expect(fetched.value("f") == .assetValue(Wire.Asset(sha256: digest, size: 5000)))
            #expect(try await storage.assetIsReferenced(digest))
            #expect(try await storage.assetBytes(createdBy: "_alice") == 5000)
            #expect(try await storage.dropAssetIfUnreferenced(digest) == false)
            _ = try await storage.modifyRecords(
                RecordModification(deleting: [recordID("a"), recordID("b")]), in: alice, by: "_alice")
            #expect(try await storage.assetIsReferenced(digest) == false)
            #expect(try await storage.dropAssetIfUnreferenced(digest))
            #expect(try await storage.count("assets") == 0)
        }
    }

    @Test func anAssetWithoutContentMustAlreadyBeStored() async throws {
        try await withAssetStore { storage, _ in
            let content: [UInt8] = Array("shared bytes".utf8)
            let digest = Wire.SHA256.hash(content)
            let inline = Wire.Asset(sha256: digest, size: UInt64(content.count), content: .inlineData(content))
            let byChecksum = Wire.Asset(sha256: digest, size: UInt64(content.count))
            let unknown = Wire.Asset(sha256: Wire.SHA256.hash([9]), size: 1)
            let early = try await storage.modifyRecords(
                RecordModification(saving: [note("early", [field("f", .assetValue(byChecksum))])]), in: alice, by: "_alice")
            #expect(early.saveError(0)?.code == .assetFileNotFound)

            try await storage.saveAll([note("first", [field("f", .assetValue(inline))])])
            try await storage.saveAll([note("second", [field("f", .assetValue(byChecksum))])])
            let fetched = try #require(try await storage.fetch(recordID("second")).record)
            #expect(fetched.value("f") == .assetValue(inline))
            let missing = try await storage.modifyRecords(
                RecordModification(saving: [note("third", [field("f", .assetValue(unknown))])]), in: alice, by: "_alice")
            #expect(missing.saveError(0)?.code == .assetFileNotFound)
        }
    }

    /// Content that arrives with an earlier save of the request may be named by checksum alone
    /// in a later one.
    @Test func contentArrivingWithAnEarlierSaveOfTheRequestIsKnown() async throws {
        try await withAssetStore { storage, _ in
            let content: [UInt8] = Array("arrives first".utf8)
            let digest = Wire.SHA256.hash(content)
            let inline = Wire.Asset(sha256: digest, size: UInt64(content.count), content: .inlineData(content))
            let byChecksum = Wire.Asset(sha256: digest, size: UInt64(content.count))
            try await storage.saveAll([note("first", [field("f", .assetValue(inline))]), note("second", [field("f", .assetValue(byChecksum))])])
            #expect(try #require(try await storage.fetch(recordID("second")).record).value("f") == .assetValue(inline))
            #expect(try await storage.count("assets") == 1)
        }
    }

    @Test func unreferencedAssetsArePruned() async throws {
        try await withAssetStore { storage, _ in
            let content: [UInt8] = [4, 5, 6]
            let asset = Wire.Asset(sha256: Wire.SHA256.hash(content), size: 3, content: .inlineData(content))
            try await storage.saveAll([note("a", [field("f", .assetValue(asset))]), note("b", [field("f", .assetValue(asset))])])
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("a")]), in: alice, by: "_alice")
            #expect(try await storage.pruneUnreferencedAssets() == 0)
            var b = try #require(try await storage.fetch(recordID("b")).record)
            b.fields = [field("f", nil)]
            try await storage.saveAll([b])
            #expect(try await storage.pruneUnreferencedAssets() == 1)
            #expect(try await storage.count("assets") == 0)
        }
    }

    /// A content the asset file store committed is kept, whatever refers to it, until its
    /// grace has passed; a drop runs `remove` only when it drops, and one whose `remove` fails
    /// keeps the content known.
    @Test func aCommittedContentIsKeptUntilItsGraceHasPassed() async throws {
        try await withAssetStore { storage, engine in
            let content: [UInt8] = Array("committed".utf8)
            let digest = Wire.SHA256.hash(content)
            let at = Wire.Timestamp(seconds: 1_700_000_000, nanos: 0)
            let later = Wire.Timestamp(seconds: at.seconds + 1, nanos: 0)
            let removals = Mutex(0)
            try await storage.noteAssetsCommitted([digest, digest], at: at)
            #expect(try await storage.dropAssetIfUnreferenced(digest, committedBefore: at) { removals.withLock { $0 += 1 } } == false)
            #expect(removals.withLock { $0 } == 0, "\(engine)")
            #expect(try await storage.dropAssetIfUnreferenced(digest, committedBefore: later) { removals.withLock { $0 += 1 } })
            #expect(removals.withLock { $0 } == 1, "\(engine)")

            // Referenced: kept whatever its commits.
            let inline = Wire.Asset(sha256: digest, size: UInt64(content.count), content: .inlineData(content))
            try await storage.saveAll([note("a", [field("f", .assetValue(inline))])])
            #expect(try await storage.dropAssetIfUnreferenced(digest, committedBefore: later) { removals.withLock { $0 += 1 } } == false)
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("a")]), in: alice, by: "_alice")

            // A removal that fails undoes the drop: the content is still known.
            struct Refused: Error {}
            await #expect(throws: (any Error).self) {
                try await storage.dropAssetIfUnreferenced(digest, committedBefore: later) { throw Refused() }
            }
            let byChecksum = Wire.Asset(sha256: digest, size: UInt64(content.count))
            try await storage.saveAll([note("b", [field("f", .assetValue(byChecksum))])])
            #expect(try #require(try await storage.fetch(recordID("b")).record).value("f") == .assetValue(inline))

            try await storage.noteAssetsCommitted([digest], at: later)
            #expect(try await storage.forgetAssetCommits(before: later) == 0)
            #expect(try await storage.forgetAssetCommits(before: Wire.Timestamp(seconds: later.seconds + 1, nanos: 0)) == 1)
        }
    }

    /// SQLite reads a fetch of a few records in place (on the calling thread) and a larger one
    /// on a reader's queue: both give the same outcomes, in request order, and small fetches
    /// still finish while large ones hold every reader.
    @Test func smallAndLargeFetchesAgreeAndSmallOnesFinishWhileReadersAreBusy() async throws {
        try await withSyncStore { storage, engine in
            let names = (0..<399).map { "r\($0)" }
            try await storage.saveAll(names.map { note($0, [field("n", .stringValue($0))]) })
            let ids = names.map { recordID($0) } + [recordID("missing")]
            for count in [1, 16, 17, 400] {
                let asked = Array(ids.suffix(count))
                let outcomes = try await storage.fetchRecords(asked, desiredKeys: nil, in: alice)
                #expect(outcomes.map(\.id) == asked, "\(engine), \(count) records")
                #expect(outcomes.dropLast().allSatisfy { $0.record?.value("n") == .stringValue($0.id.recordName) })
                #expect(outcomes.last?.failure?.code == .unknownItem)
            }
            let found = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await storage.fetchRecords(ids.shuffled(), desiredKeys: nil, in: alice).count }
                }
                for small in 0..<64 {
                    group.addTask {
                        let outcome = try await storage.fetchRecords([ids[small]], desiredKeys: nil, in: alice)
                        return outcome.first?.record?.recordID == ids[small] ? 1 : 0
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(found == 8 * ids.count + 64, "\(engine)")
        }
    }

    @Test func sha256MatchesKnownVectors() {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(Wire.SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(Wire.SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hex(Wire.SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            hex(Wire.SHA256.hash(Array(repeating: UInt8(ascii: "a"), count: 1_000_000)))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
