import CirrusWire
import Foundation

extension CKError.Code {
    /// The CloudKit code for a wire error code.
    ///
    /// CloudKit codes (1 … 37) map to themselves. Protocol codes (1000+) and codes this
    /// version does not know map to the nearest CloudKit code:
    ///
    /// | wire | CKError.Code |
    /// |---|---|
    /// | frameTooLarge | limitExceeded |
    /// | malformedFrame, protocolViolation, flowControlViolation, unknownFrameKind, operationAlreadyAttached | serverRejectedRequest |
    /// | unsupportedVersion | incompatibleVersion |
    /// | tooManyStreams, rateLimited | requestRateLimited |
    /// | idleTimeout, handshakeTimeout | networkFailure |
    /// | shuttingDown | serviceUnavailable |
    /// | unknownOperation | unknownItem |
    /// | duplicateOperationID | invalidArguments |
    /// | unspecified, unrecognized | internalError |
    package init(wire: Wire.ErrorCode) {
        if let code = CKError.Code(rawValue: Int(wire.rawValue)) {
            self = code
            return
        }
        switch wire {
        case .frameTooLarge: self = .limitExceeded
        case .malformedFrame, .protocolViolation, .flowControlViolation, .unknownFrameKind, .operationAlreadyAttached:
            self = .serverRejectedRequest
        case .unsupportedVersion: self = .incompatibleVersion
        case .tooManyStreams, .rateLimited: self = .requestRateLimited
        case .idleTimeout, .handshakeTimeout: self = .networkFailure
        case .shuttingDown: self = .serviceUnavailable
        case .unknownOperation: self = .unknownItem
        case .duplicateOperationID: self = .invalidArguments
        default: self = .internalError
        }
    }

    /// The code as a wire error code (same number).
    package var wireCode: Wire.ErrorCode {
        Wire.ErrorCode(rawValue: Int32(rawValue))
    }
}

extension CKError {
    /// The error a wire message describes, with its per-item errors.
    ///
    /// A wire code that is not a CloudKit code is mapped (see `CKError.Code(wire:)`) and
    /// kept in `userInfo[CirrusWireErrorCodeKey]`. Records that do not convert are
    /// left out (their conversion error is in `userInfo["CirrusRecordConversionError"]`).
    /// A per-item error's key is the item's model ID (`CKRecord.ID`,
    /// `CKRecordZone.ID`, subscription ID `String`, share `URL`, notification ID
    /// `String`), or the wire value itself when it does not convert (an invalid ID, a
    /// `Wire.UserIdentityLookupInfo`); an entry that names no item is left out; an
    /// entry without an error gets `internalError`. Nested partial errors are ignored
    /// (the protocol allows depth 1).
    package init(wire: Wire.OperationError, assetDirectory: URL? = nil) {
        self.init(wire: wire, assetDirectory: assetDirectory, depth: 0)
    }

    private init(wire: Wire.OperationError, assetDirectory: URL?, depth: Int) {
        let code = Code(wire: wire.code)
        var userInfo: [String: any Sendable] = [:]
        if Int(wire.code.rawValue) != code.rawValue {
            userInfo[CirrusWireErrorCodeKey] = Int(wire.code.rawValue)
        }
        var conversionFailures: [String] = []
        func record(_ record: Wire.Record?) -> CKRecord? {
            guard let record else { return nil }
            do {
                return try CKRecord.decoded(wire: record, assetDirectory: assetDirectory)
            } catch {
                conversionFailures.append(error.message ?? "\(error)")
                return nil
            }
        }
        let server = record(wire.serverRecord)
        let client = record(wire.clientRecord)
        let ancestor = record(wire.ancestorRecord)
        var items: [ItemError] = []
        if depth == 0 {
            for item in wire.partialErrors {
                guard let key = Self.itemKey(item.item) else { continue }
                let error = item.error.map { CKError(wire: $0, assetDirectory: assetDirectory, depth: depth + 1) }
                    ?? CKError(.internalError, message: "the server gave no error for this item")
                items.append((itemID: key, error: error))
            }
        }
        if !conversionFailures.isEmpty {
            userInfo["CirrusRecordConversionError"] = conversionFailures.joined(separator: "; ")
        }
        self.init(
            code, message: wire.message.isEmpty ? nil : wire.message, retryAfterSeconds: wire.retryAfterSeconds,
            serverRecord: server, clientRecord: client, ancestorRecord: ancestor, partialErrors: items,
            userInfo: userInfo)
    }

    private static func itemKey(_ item: Wire.ItemError.Item?) -> (any Hashable & Sendable)? {
        switch item {
        case nil: return nil
        case .recordID(let id)?: return (try? CKRecord.ID(wire: id)) ?? id
        case .zoneID(let id)?: return (try? CKRecordZone.ID(wire: id)) ?? id
        case .subscriptionID(let id)?: return id
        case .shareURL(let url)?: return URL(string: url) ?? url
        case .lookupInfo(let info)?: return info
        case .notificationID(let id)?: return id
        }
    }

    /// The error as a wire message (for in-process servers and tests).
    ///
    /// The wire code is `userInfo[CirrusWireErrorCodeKey]` when present, else the
    /// CloudKit code. Records are sent without asset content; partial-error keys map
    /// back (`String` keys become subscription IDs); keys of other types are left out.
    package var wireError: Wire.OperationError {
        var wire = Wire.OperationError(
            code: (extraWireCode.map { Wire.ErrorCode(rawValue: Int32(truncatingIfNeeded: $0)) }) ?? code.wireCode,
            message: message ?? "", retryAfterSeconds: retryAfterSeconds)
        let noContent = { (asset: CKAsset) throws(CKError) -> Wire.Asset in
            (try? asset.wireAsset(inlineContent: false)) ?? asset.wireAsset ?? Wire.Asset()
        }
        wire.serverRecord = try? serverRecord?.wireRecord(changedKeysOnly: false, encodeAsset: noContent)
        wire.clientRecord = try? clientRecord?.wireRecord(changedKeysOnly: false, encodeAsset: noContent)
        wire.ancestorRecord = try? ancestorRecord?.wireRecord(changedKeysOnly: false, encodeAsset: noContent)
        for (key, error) in partialErrors {
            let item: Wire.ItemError.Item
            switch key {
            case let id as CKRecord.ID: item = .recordID(id.wireRecordID)
            case let id as CKRecordZone.ID: item = .zoneID(id.wireZoneID)
            case let id as String: item = .subscriptionID(id)
            case let url as URL: item = .shareURL(url.absoluteString)
            case let id as Wire.RecordID: item = .recordID(id)
            case let id as Wire.RecordZoneID: item = .zoneID(id)
            case let info as Wire.UserIdentityLookupInfo: item = .lookupInfo(info)
            default: continue
            }
            var itemError = (error as? CKError)?.wireError
                ?? Wire.OperationError(code: .internalError, message: "\(error)")
            itemError.partialErrors = []
            wire.partialErrors.append(Wire.ItemError(item: item, error: itemError))
        }
        return wire
    }

    private var extraWireCode: Int? {
        errorUserInfo[CirrusWireErrorCodeKey] as? Int
    }
}
