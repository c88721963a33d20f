import CirrusWire

/// Puts download handles into the assets of records going out to one caller: the caller got the
/// record, so they may read its assets; the handle says so for them only.
struct AssetDownloadIssuer: Sendable {
    let assets: AssetStore
    let user: String

    /// `record` with a download handle in every asset whose content is a file (no inline bytes,
    /// a checksum and a size).
    func addingHandles(to record: Wire.Record) -> Wire.Record {
        var record = record
        for i in record.fields.indices {
            switch record.fields[i].value?.kind {
            case .assetValue(var asset):
                self.addHandle(&asset)
                record.fields[i].value = Wire.FieldValue(kind: .assetValue(asset))
            case .assetList(var list):
                for j in list.values.indices { self.addHandle(&list.values[j]) }
                record.fields[i].value = Wire.FieldValue(kind: .assetList(list))
            default:
                continue
            }
        }
        return record
    }

    private func addHandle(_ asset: inout Wire.Asset) {
        guard asset.sha256.count == 32 else { return }
        switch asset.content {
        case nil, .downloadHandle, .uploadHandle:
            asset.content = .downloadHandle(self.assets.downloadHandle(sha256: asset.sha256, size: asset.size, for: self.user))
        case .inlineData:
            break
        }
    }
}
