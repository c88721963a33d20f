import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }.joined()
}

@Suite struct CKAssetTests {
    @Test(arguments: [
        (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
        (56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
        (63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"),
        (64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
        (65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"),
        (119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"),
        (120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"),
        (128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"),
    ])
    func sha256MatchesKnownDigestsAtBlockBoundaries(_ length: Int, _ expected: String) {
        #expect(hex(CKAsset.sha256(of: [UInt8](repeating: UInt8(ascii: "a"), count: length))) == expected)
    }

    @Test func sha256OfABC() {
        #expect(
            hex(CKAsset.sha256(of: Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hex(CKAsset.sha256(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func sha256InPiecesEqualsSha256AtOnce() {
        var generator = SplitMix64(seed: 7)
        let bytes = (0..<5_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let whole = CKAsset.sha256(of: bytes)
        for pieceSize in [1, 3, 63, 64, 65, 1_000] {
            var hasher = Wire.SHA256()
            var index = 0
            while index < bytes.count {
                hasher.update(bytes[index..<min(index + pieceSize, bytes.count)])
                index += pieceSize
            }
            #expect(hasher.finalize() == whole, "pieces of \(pieceSize)")
        }
        #expect(CKAsset.sha256(of: AnySequence(bytes)) == whole, "non-contiguous sequences")
    }

    @Test func assetContentTravelsInlineAndLandsInTheGivenDirectory() throws {
        let source = try makeTemporaryDirectory()
        let destination = try makeTemporaryDirectory()
        let content = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let file = source.appendingPathComponent("photo.jpg")
        try content.write(to: file)
        let record = CKRecord(recordType: "Photo")
        record["image"] = CKAsset(fileURL: file)
        record["thumbs"] = [CKAsset(fileURL: file)]

        let wire = try record.wireRecord
        guard case .assetValue(let wireAsset)? = wire.fields.first(where: { $0.key == "image" })?.value?.kind else {
            Issue.record("no asset on the wire")
            return
        }
        #expect(wireAsset.size == 10_000)
        #expect(wireAsset.sha256 == CKAsset.sha256(of: content))
        #expect(wireAsset.fileName == "photo.jpg")
        #expect(wireAsset.content == .inlineData([UInt8](content)))

        let back = try roundTrip(record, assetDirectory: destination)
        let asset = try #require(back["image"] as? CKAsset)
        let url = try #require(asset.fileURL)
        #expect(url.deletingLastPathComponent().standardizedFileURL == destination.standardizedFileURL)
        #expect(url.pathExtension == "jpg")
        #expect(try Data(contentsOf: url) == content)
        #expect(asset.wireAsset?.sha256 == wireAsset.sha256)
        if case .inlineData? = asset.wireAsset?.content { Issue.record("the asset kept its inline bytes in memory") }
        let list = try #require(back["thumbs"] as? [CKAsset])
        #expect(list.count == 1)
        #expect(list.first?.fileURL == url, "equal content shares one file")
    }

    @Test func aMissingFileIsAssetFileNotFound() throws {
        let record = CKRecord(recordType: "Photo")
        record["image"] = CKAsset(fileURL: URL(fileURLWithPath: "/nonexistent/\(UUID().uuidString)"))
        do {
            _ = try record.wireRecord
            Issue.record("a missing asset file was sent")
        } catch {
            #expect(error.code == .assetFileNotFound)
        }
    }

    @Test func aRecordWithAssetsIsEncodedWithThemAndErrorsComeInKeyOrder() throws {
        // A record is encoded under its lock until an asset comes up; then again, outside it,
        // with the assets read. Either way the fields and the first error (in key order) are
        // those of one pass.
        let directory = try makeTemporaryDirectory()
        let file = directory.appendingPathComponent("a.bin")
        try Data([1, 2, 3]).write(to: file)
        let record = CKRecord(recordType: "Photo")
        record["title"] = "t"
        record["image"] = CKAsset(fileURL: file)
        record["count"] = 2
        let wire = try record.wireRecord
        #expect(wire.fields.map(\.key) == ["count", "image", "title"])
        if case .assetValue(let asset)? = wire.fields[1].value?.kind, case .inlineData(let bytes)? = asset.content {
            #expect(bytes == [1, 2, 3])
        } else {
            Issue.record("the asset went without its content: \(wire.fields[1])")
        }

        let missing = CKAsset(fileURL: URL(fileURLWithPath: "/nonexistent/\(UUID().uuidString)"))
        let assetFirst = CKRecord(recordType: "Photo")
        assetFirst["a"] = missing
        assetFirst["b\u{0}"] = "nul"
        let keyFirst = CKRecord(recordType: "Photo")
        keyFirst["a\u{0}"] = "nul"
        keyFirst["b"] = missing
        for (record, code) in [(assetFirst, CKError.Code.assetFileNotFound), (keyFirst, .invalidArguments)] {
            do {
                _ = try record.wireRecord
                Issue.record("\(record) was encoded")
            } catch {
                #expect(error.code == code)
            }
        }
    }

    @Test func contentThatDoesNotMatchItsChecksumOrSizeIsRefused() throws {
        let directory = try makeTemporaryDirectory()
        let badDigest = Wire.Asset(sha256: [UInt8](repeating: 0, count: 32), size: 3, content: .inlineData([1, 2, 3]))
        let badSize = Wire.Asset(size: 4, content: .inlineData([1, 2, 3]))
        for wire in [badDigest, badSize] {
            do {
                _ = try CKAsset(wire: wire, contentDirectory: directory)
                Issue.record("a corrupt asset was accepted")
            } catch {
                #expect(error.code == .assetFileModified)
            }
        }
        let record = serverRecord(fields: [Wire.RecordField(key: "a", value: Wire.FieldValue(kind: .assetValue(badDigest)))])
        #expect(throws: CKError.self) { try CKRecord(wire: record, assetDirectory: directory) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func aFileNameFromTheServerNeverLeavesTheDirectory() throws {
        let directory = try makeTemporaryDirectory()
        for name in ["../../../tmp/evil.sh", "/etc/passwd", "a/../../b.txt", "x.\u{0}y", "..", "name.verylongextension123"] {
            let asset = try CKAsset(wire: Wire.Asset(fileName: name, content: .inlineData(Array(name.utf8))), contentDirectory: directory)
            let url = try #require(asset.fileURL)
            #expect(url.deletingLastPathComponent().standardizedFileURL == directory.standardizedFileURL)
            #expect(url.lastPathComponent.count <= 64 + 17)
        }
    }

    @Test func anAssetWithoutContentKeepsItsDownloadHandle() throws {
        let wire = Wire.Asset(
            sha256: CKAsset.sha256(of: [9]), size: 1, fileName: "f.bin", content: .downloadHandle("dl-1"))
        let asset = try CKAsset(wire: wire, contentDirectory: makeTemporaryDirectory())
        #expect(asset.fileURL == nil)
        #expect(asset.wireAsset == wire)
        #expect(try asset.wireAsset(inlineContent: true) == wire)
        let record = CKRecord(recordType: "T")
        record["a"] = asset
        let back = try roundTrip(record)
        #expect((back["a"] as? CKAsset)?.wireAsset == wire)
        #expect(throws: CKError.self) { try CKAsset(fileURL: nil, wireAsset: nil).wireAsset(inlineContent: true) }
    }

    @Test func metadataOnlyEncodingLeavesTheContentOut() throws {
        let directory = try makeTemporaryDirectory()
        let file = directory.appendingPathComponent("big.dat")
        try Data([1, 2, 3, 4]).write(to: file)
        let wire = try CKAsset(fileURL: file).wireAsset(inlineContent: false)
        #expect(wire.content == nil)
        #expect(wire.size == 4)
        #expect(wire.sha256 == CKAsset.sha256(of: [1, 2, 3, 4]))
        let large = directory.appendingPathComponent("large.dat")
        let content = Data((0..<10_017).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try content.write(to: large)
        let streamed = try CKAsset.digestOfFile(at: large, chunkSize: 1_000)
        #expect(streamed.size == UInt64(content.count))
        #expect(streamed.digest == CKAsset.sha256(of: content))
        #expect(throws: CKError.self) {
            try CKAsset(fileURL: directory.appendingPathComponent("missing")).wireAsset(inlineContent: false)
        }
    }
}
