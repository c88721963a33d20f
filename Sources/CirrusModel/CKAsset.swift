import CirrusWire
import Foundation

/// A file attached to a record (`CKAsset`).
///
/// To save one, create it from a local file URL; CirrusKit's `CKModifyRecordsOperation`
/// streams the file to the server in chunks (a small one goes inline with its record). A
/// fetched asset's content is downloaded to a file named by its SHA-256 and `fileURL`
/// points at it. An asset whose content is not here (a download handle or only metadata
/// arrived) has `fileURL == nil` and keeps the server's description in `wireAsset`.
///
/// For example:
/// ```swift
/// photo["image"] = CKAsset(fileURL: URL(fileURLWithPath: "/tmp/cat.jpg"))
/// ```
public final class CKAsset: Hashable, Sendable, CustomStringConvertible {
    /// The local file holding the asset's content, or `nil` if it is not downloaded.
    public let fileURL: URL?
    /// Cirrus: the asset as the server described it (checksum, size, name, download
    /// handle), without inline bytes; `nil` for assets created locally.
    package let wireAsset: Wire.Asset?

    /// An asset whose content is the file at `fileURL`.
    public convenience init(fileURL: URL) {
        self.init(fileURL: fileURL, wireAsset: nil)
    }

    /// An asset with a file and/or the server's description of it.
    package init(fileURL: URL?, wireAsset: Wire.Asset?) {
        self.fileURL = fileURL
        if var wireAsset, case .inlineData = wireAsset.content {
            wireAsset.content = nil
            self.wireAsset = wireAsset
        } else {
            self.wireAsset = wireAsset
        }
    }

    /// Equal when they name the same file and the same server description.
    public static func == (lhs: CKAsset, rhs: CKAsset) -> Bool {
        lhs.fileURL == rhs.fileURL && lhs.wireAsset == rhs.wireAsset
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(fileURL)
        hasher.combine(wireAsset)
    }

    public var description: String {
        "<CKAsset: fileURL=\(fileURL?.path ?? "nil")>"
    }
}
