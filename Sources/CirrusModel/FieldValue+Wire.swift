import CirrusWire
import Foundation

extension FieldValue {
    /// The value as a wire field value; `encodeAsset` turns each asset into its wire form.
    ///
    /// - throws: `CKError` `.invalidArguments` for a string containing U+0000: the wire
    ///   layer (protobuf-c) carries strings as C strings and would cut it short.
    func wireKind(encodeAsset: (CKAsset) throws(CKError) -> Wire.Asset) throws(CKError) -> Wire.FieldValue.Kind {
        switch self {
        case .string(let v):
            try Self.checkWireString(v)
            return .stringValue(v)
        case .int64(let v): return .int64Value(v)
        case .double(let v): return .doubleValue(v)
        case .bytes(let v): return .bytesValue(v.withUnsafeBytes { [UInt8]($0) })
        case .date(let v): return .dateValue(v.wireTimestamp)
        case .reference(let v):
            try Self.checkWireID(v.recordID)
            return .referenceValue(v.wireReference)
        case .location(let v): return .locationValue(v.wireLocation)
        case .asset(let v): return .assetValue(try encodeAsset(v))
        case .stringList(let v):
            for string in v { try Self.checkWireString(string) }
            return .stringList(Wire.StringList(values: v))
        case .int64List(let v): return .int64List(Wire.Int64List(values: v))
        case .doubleList(let v): return .doubleList(Wire.DoubleList(values: v))
        case .bytesList(let v): return .bytesList(Wire.BytesList(values: v.map { $0.withUnsafeBytes { [UInt8]($0) } }))
        case .dateList(let v): return .dateList(Wire.TimestampList(values: v.map(\.wireTimestamp)))
        case .referenceList(let v):
            for reference in v { try Self.checkWireID(reference.recordID) }
            return .referenceList(Wire.ReferenceList(values: v.map(\.wireReference)))
        case .locationList(let v): return .locationList(Wire.LocationList(values: v.map(\.wireLocation)))
        case .assetList(let v):
            var assets: [Wire.Asset] = []
            assets.reserveCapacity(v.count)
            for asset in v { assets.append(try encodeAsset(asset)) }
            return .assetList(Wire.AssetList(values: assets))
        }
    }

    /// Refuses strings the wire layer would cut short: protobuf-c carries strings as
    /// C strings, so everything after a U+0000 would be lost silently.
    static func checkWireString(_ string: String, what: @autoclosure () -> String = "a string value") throws(CKError) {
        if containsNUL(string) {
            throw CKError(.invalidArguments, message: "\(what()) contains U+0000, which the wire cannot carry")
        }
    }

    /// Whether `string` has a U+0000 (a zero byte in UTF-8): `memchr` over its bytes where they
    /// are contiguous (every native string), a byte at a time otherwise. Every string of every
    /// record saved is checked, so this runs once per field and ID part of each.
    static func containsNUL(_ string: String) -> Bool {
        let found = string.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
        return found ?? string.utf8.contains(0)
    }

    static func checkWireID(_ id: CKRecord.ID) throws(CKError) {
        try checkWireString(id.recordName, what: "a record name")
        try checkWireString(id.zoneID.zoneName, what: "a zone name")
        try checkWireString(id.zoneID.ownerName, what: "an owner name")
    }

    /// The value of a wire field value.
    ///
    /// - throws: `CKError` `.invalidArguments` for a reference without a valid target,
    ///   `.assetFileModified` / `.internalError` for asset content (see `CKAsset(wire:)`).
    ///   Asset content goes to `assetDirectory`, nil = `CKAsset.defaultContentDirectory` (looked
    ///   up only for an asset: it costs a path lookup that most values never need).
    init(wire kind: Wire.FieldValue.Kind, assetDirectory: URL?, localAssetFiles: [[UInt8]: URL] = [:]) throws(CKError) {
        switch kind {
        case .stringValue(let v): self = .string(v)
        case .int64Value(let v): self = .int64(v)
        case .doubleValue(let v): self = .double(v)
        case .bytesValue(let v): self = .bytes(Data(v))
        case .dateValue(let v): self = .date(Date(wireTimestamp: v))
        case .referenceValue(let v): self = .reference(try CKRecord.Reference(wire: v))
        case .locationValue(let v): self = .location(CKLocation(wire: v))
        case .assetValue(let v):
            self = .asset(
                try CKAsset(
                    wire: v, contentDirectory: assetDirectory ?? CKAsset.defaultContentDirectory,
                    localFile: localAssetFiles[v.sha256]))
        case .stringList(let v): self = .stringList(v.values)
        case .int64List(let v): self = .int64List(v.values)
        case .doubleList(let v): self = .doubleList(v.values)
        case .bytesList(let v): self = .bytesList(v.values.map { Data($0) })
        case .dateList(let v): self = .dateList(v.values.map(Date.init(wireTimestamp:)))
        case .referenceList(let v):
            var references: [CKRecord.Reference] = []
            references.reserveCapacity(v.values.count)
            for reference in v.values { references.append(try CKRecord.Reference(wire: reference)) }
            self = .referenceList(references)
        case .locationList(let v): self = .locationList(v.values.map(CKLocation.init(wire:)))
        case .assetList(let v):
            var assets: [CKAsset] = []
            assets.reserveCapacity(v.values.count)
            let directory = assetDirectory ?? CKAsset.defaultContentDirectory
            for asset in v.values {
                assets.append(try CKAsset(wire: asset, contentDirectory: directory, localFile: localAssetFiles[asset.sha256]))
            }
            self = .assetList(assets)
        }
    }
}
