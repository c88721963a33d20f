import CirrusWire
import Foundation

/// What CloudKit allows of shares (`CKShare` records) that needs no database: where one may
/// be saved, and the names and keys shares use.
package enum ShareRules {
    /// The record type of every share.
    package static let shareType = "cloudkit.share"
    /// The record name of a zone-wide share.
    package static let zoneShareName = "cloudkit.zoneshare"
    /// The field keys CloudKit defines for shares (title, thumbnail, type): allowed on shares
    /// although they are not valid field names.
    static let systemFieldKeys: Set<String> = ["cloudkit.title", "cloudkit.thumbnailImageData", "cloudkit.type"]
    /// The most participants a share may have, the owner included (CloudKit's limit).
    static let maximumParticipants = 100
    /// The path every share URL starts with; the server puts its address before it.
    static let urlPathPrefix = "/share/"

    /// Nil when a share may be saved where `record` is: only in a custom zone of a private
    /// database, and a zone-wide share only under the name `cloudkit.zoneshare`. Records that
    /// are not shares are always fine here.
    static func checkPlacement(of record: Wire.Record, zoneName: String, in key: DatabaseKey) -> ItemFailure? {
        guard record.recordType == shareType else { return nil }
        let name = record.recordID?.recordName ?? ""
        guard key.scope == .private else {
            return ItemFailure(
                .serverRejectedRequest, "share \(name): shares are saved in the owner's private database only")
        }
        guard zoneName != RecordCodec.defaultZoneName else {
            return ItemFailure(
                .serverRejectedRequest, "share \(name): the default zone cannot be shared; save the share in a custom zone")
        }
        if record.share != nil || record.parent != nil {
            return ItemFailure(.invalidArguments, "share \(name): a share has neither a parent nor a share")
        }
        return nil
    }

    /// A new secret for a share URL: 32 random bytes as lowercase hex.
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(format: "%02x", byte)
        }.joined()
    }

    /// The token a share URL carries (its last path component after `/share/<container>/`), or
    /// nil when `url` is no share URL.
    static func token(inURL url: String) -> String? {
        guard let range = url.range(of: urlPathPrefix) else { return nil }
        let parts = url[range.upperBound...].split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let token = parts.last, token.count == 64,
            token.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        else { return nil }
        return String(token)
    }

    /// The path of the URL of the share with `token` in `container` (the server adds its address).
    static func urlPath(container: String, token: String) -> String {
        let escaped = container.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? container
        return urlPathPrefix + escaped + "/" + token
    }
}
