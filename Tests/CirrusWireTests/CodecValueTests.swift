import CirrusWire
import Testing

@Suite("Codec values")
struct CodecValueTests {
    @Test func hotMessagesStaySmall() {
        // Large payloads live out of line; a Frame copy must stay cheap.
        #expect(MemoryLayout<Wire.Frame>.size <= 256)
        #expect(MemoryLayout<Wire.Event>.size <= 256)
    }

    @Test func aFrameFitsAnExistentialsInlineStorage() {
        // Every frame crosses the channel pipeline as an `NIOAny` (an `Any` inside): a value of
        // up to three words is kept inline there, a larger one costs an allocation per handler.
        #expect(MemoryLayout<Wire.Frame>.size <= 3 * MemoryLayout<Int>.size)
        let frame = Wire.Frame(streamID: 9, kind: .event(Wire.Event(seq: 4)))
        var copy = frame
        copy.kind = .ping(Wire.Ping(nonce: 1))
        #expect(frame.kind == .event(Wire.Event(seq: 4)))
        #expect(copy.kind == .ping(Wire.Ping(nonce: 1)))
    }

    @Test func anEventIsOnePointerAndItsCopiesChangeApart() throws {
        // `Event` is copy on write too: a copy (out of a frame, into a queue, to an operation)
        // retains one storage. (A copy-on-write message is one pointer already, so a frame's event
        // case and a save's record case hold it directly, without a box of their own.)
        #expect(MemoryLayout<Wire.Event>.size == MemoryLayout<Int>.size)
        let record = Wire.Record(recordID: .init(recordName: "r"), recordType: "Note")
        let save = Wire.ModifyRecordsPerRecordSave(recordID: .init(recordName: "r"), outcome: .record(record))
        let original = Wire.Event(seq: 7, payload: .modifyRecords(.init(callback: .perRecordSave(save))))
        var copy = original
        #expect(copy == original && copy.hashValue == original.hashValue)
        copy.seq = 8
        if case .modifyRecords(var event)? = copy.payload, case .perRecordSave(var changed)? = event.callback {
            changed.fieldsAsSent = true
            event.callback = .perRecordSave(changed)
            copy.payload = .modifyRecords(event)
        }
        #expect(original.seq == 7 && copy.seq == 8)
        #expect(original.payload == .modifyRecords(.init(callback: .perRecordSave(save))))
        #expect(copy != original)
        let frame = Wire.Frame(streamID: 3, kind: .event(original))
        #expect(try Wire.Frame(serializedBytes: frame.serializedBytes()) == frame)
        #expect(try Wire.Event(serializedBytes: copy.serializedBytes()) == copy)
    }

    @Test func aRecordsNameAndLinksReadInPlace() {
        let plain = Wire.Record(recordID: .init(recordName: "r", zoneID: .init(zoneName: "z")), recordType: "Note")
        #expect(plain.recordName == "r" && !plain.hasParentOrShare)
        #expect(Wire.Record().recordName == "" && !Wire.Record().hasParentOrShare)
        let parented = Wire.Record(recordType: "Note", parent: .init(recordID: .init(recordName: "p")))
        let root = Wire.Record(recordType: "Note", share: .init(recordID: .init(recordName: "s")))
        #expect(parented.hasParentOrShare && root.hasParentOrShare && parented.recordName == "")

        func record(_ kinds: [Wire.FieldValue.Kind?]) -> Wire.Record {
            Wire.Record(fields: kinds.enumerated().map { .init(key: "f\($0.offset)", value: $0.element.map { .init(kind: $0) }) })
        }
        let reference = Wire.Reference(recordID: .init(recordName: "t"))
        let asset = Wire.Asset(sha256: [UInt8](repeating: 1, count: 32), size: 1)
        let plainFields = record([.stringValue("a"), nil, .int64Value(1)])
        #expect(!plainFields.hasAssets && !plainFields.hasReferences && !Wire.Record().hasAssets)
        #expect(record([.stringValue("a"), .referenceValue(reference)]).hasReferences)
        #expect(record([.referenceList(.init(values: [reference]))]).hasReferences)
        #expect(!record([.referenceValue(reference)]).hasAssets)
        #expect(record([nil, .assetValue(asset)]).hasAssets)
        #expect(record([.assetList(.init(values: [asset]))]).hasAssets && !record([.assetValue(asset)]).hasReferences)
    }

    @Test func outOfLineFieldsKeepValueSemantics() {
        let original = Wire.NotPredicate(operand: .init(format: "a"))
        var copy = original
        copy.operand?.format = "b"
        #expect(original.operand?.format == "a")
        #expect(copy.operand?.format == "b")
        #expect(original != copy)
        copy.operand?.format = "a"
        #expect(original == copy)
        #expect(original.hashValue == copy.hashValue)
    }

    @Test func aRecordIsOnePointerAndItsCopiesChangeApart() throws {
        // `Record` keeps its fields in one copy-on-write storage (the generator's COPY_ON_WRITE).
        #expect(MemoryLayout<Wire.Record>.size == MemoryLayout<Int>.size)
        let original = Wire.Record(
            recordID: .init(recordName: "r", zoneID: .init(zoneName: "z", ownerName: "o")), recordType: "Note",
            fields: [.init(key: "title", value: .init(kind: .stringValue("a")))], changedKeys: ["title"])
        var copy = original
        #expect(copy == original && copy.hashValue == original.hashValue)
        copy.fields[0].value = .init(kind: .stringValue("b"))
        copy.recordID?.zoneID?.zoneName = "y"
        copy.changedKeys.append("body")
        #expect(original.fields[0].value?.kind == .stringValue("a"))
        #expect(original.recordID?.zoneID?.zoneName == "z")
        #expect(original.changedKeys == ["title"])
        #expect(copy.fields[0].value?.kind == .stringValue("b") && copy.recordID?.zoneID?.zoneName == "y")
        #expect(copy != original)

        // Equal fields are equal records, and hash alike, whatever storage holds them.
        var rebuilt = try Wire.Record(serializedBytes: original.serializedBytes())
        #expect(rebuilt == original && rebuilt.hashValue == original.hashValue)
        #expect(Set([original, rebuilt, copy]).count == 2)
        // A record changed while another shares its storage leaves the other alone.
        let shared = rebuilt
        rebuilt.recordType = "Other"
        #expect(shared.recordType == "Note" && rebuilt.recordType == "Other")
        #expect(try Wire.Record(serializedBytes: copy.serializedBytes()) == copy)
    }

    @Test func theCurrentUsersOwnerNameAndItsNeighboursDecodeAsSent() throws {
        for owner in ["__defaultOwner__", "__defaultOwner_", "__defaultOwner__x", "__defaultOwneR__", "_defaultOwner__", ""] {
            let id = Wire.RecordID(recordName: "r", zoneID: Wire.RecordZoneID(zoneName: "Z", ownerName: owner))
            let back = try Wire.RecordID(serializedBytes: id.serializedBytes())
            #expect(back == id)
            #expect(back.zoneID?.ownerName.utf8.elementsEqual(owner.utf8) == true)
        }
    }

    @Test func presenceFieldsDistinguishZeroFromAbsent() throws {
        let absent = Wire.Hello(clientName: "x")
        let empty = Wire.Hello(clientName: "x", bearerToken: "")
        #expect(absent.serializedBytes() != empty.serializedBytes())
        #expect(try Wire.Hello(serializedBytes: empty.serializedBytes()).bearerToken == "")
        #expect(try Wire.Hello(serializedBytes: absent.serializedBytes()).bearerToken == nil)
    }

    @Test func convenienceAPIsAreSafeAcrossTasks() async {
        let frames = GeneratedSamples.oneofCases.compactMap { $0.value as? Wire.Frame }
        let failures = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var failures = 0
                    for round in 0..<500 {
                        let frame = frames[(task + round) % frames.count]
                        let decoded = try? Wire.Frame(serializedBytes: frame.serializedBytes())
                        if decoded != frame || frame.serializedSize != frame.serializedBytes().count {
                            failures += 1
                        }
                    }
                    return failures
                }
            }
            return await group.reduce(0, +)
        }
        #expect(failures == 0)
    }
}
