import CirrusWire
import Foundation

/// What a query cursor says: which query, over which zone, as of which
/// change sequence, and where in the query's order the next page starts.
///
/// A cursor holds no rows and the store keeps nothing per cursor: the next
/// page reads, in the query's order, the records after ``position``
/// (``QueryKeyset``). The client holds it *sealed*: an HMAC-SHA-256 tag
/// (keyed by a secret kept in the store, `store_secrets`) over the cursor
/// and the database it belongs to (container, scope, owner), like a change
/// token. A cursor altered in any bit, presented in another database, or
/// older than the cursor lifetime is refused as unknown.
///
/// Layout: version 2 · zone row ID (8) · change sequence (8) · creation time
/// (8, milliseconds) · zone name · query (`Wire.Query`) · desired keys ·
/// position · tag (16). Lengths are big-endian; strings and messages carry a
/// 4-byte length first.
package struct QueryCursor: Sendable, Hashable {
    static let version: UInt8 = 2
    /// How every engine refuses a cursor it did not seal for the database, or that expired.
    package static let unknown = StoreError(.invalidArguments, "the query cursor is unknown or expired")
    static let tagLength = 16

    /// The zone's row ID: a zone deleted and made again is another zone.
    package var zoneID: Int64
    package var zoneName: String
    /// The zone's change sequence when the first page was read: records
    /// changed after it are ordered by their sort keys as of then.
    package var seq: Int64
    /// Milliseconds since the epoch when the first page was read.
    package var createdMilliseconds: Int64
    /// The query as the client sent it (compiled again on every page).
    package var query: [UInt8]
    /// nil = all fields; [] = system fields only; else these fields.
    package var desiredKeys: [String]?
    /// The last record returned so far.
    package var position: QueryKeyset.Position

    /// The sealed bytes a client holds.
    package func sealed(for database: DatabaseKey, secret: [UInt8]) -> [UInt8] {
        var body: [UInt8] = [Self.version]
        body.append(int64: zoneID)
        body.append(int64: seq)
        body.append(int64: createdMilliseconds)
        body.append(string: zoneName)
        body.append(bytes: query)
        if let desiredKeys {
            body.append(1)
            body.append(bytes: Wire.StringList(values: desiredKeys).serializedBytes())
        } else {
            body.append(0)
        }
        position.encode(into: &body)
        return body + Self.tag(body, database, secret)
    }

    /// The cursor `bytes` hold, when sealed by this store for `database`;
    /// nil for anything else.
    package init?(sealed bytes: [UInt8], for database: DatabaseKey, secret: [UInt8]) {
        guard bytes.count > Self.tagLength + 1, bytes[0] == Self.version else { return nil }
        let body = Array(bytes.dropLast(Self.tagLength))
        let expected = Self.tag(body, database, secret)
        var difference: UInt8 = 0
        for (a, b) in zip(expected, bytes.suffix(Self.tagLength)) { difference |= a ^ b }
        guard difference == 0 else { return nil }
        var reader = ByteReader(body, from: 1)
        guard let zoneID = reader.int64(), let seq = reader.int64(), let created = reader.int64(),
            let zoneName = reader.string(), let query = reader.bytes(), let hasKeys = reader.byte()
        else { return nil }
        var desiredKeys: [String]?
        if hasKeys == 1 {
            guard let keys = reader.bytes(), let list = try? Wire.StringList(serializedBytes: keys) else { return nil }
            desiredKeys = list.values
        }
        guard let position = QueryKeyset.Position(from: &reader), reader.isAtEnd else { return nil }
        self.init(
            zoneID: zoneID, zoneName: zoneName, seq: seq, createdMilliseconds: created, query: query,
            desiredKeys: desiredKeys, position: position)
    }

    package init(
        zoneID: Int64, zoneName: String, seq: Int64, createdMilliseconds: Int64, query: [UInt8],
        desiredKeys: [String]?, position: QueryKeyset.Position
    ) {
        self.zoneID = zoneID
        self.zoneName = zoneName
        self.seq = seq
        self.createdMilliseconds = createdMilliseconds
        self.query = query
        self.desiredKeys = desiredKeys
        self.position = position
    }

    private static func tag(_ body: [UInt8], _ database: DatabaseKey, _ secret: [UInt8]) -> [UInt8] {
        var message = Array("cirrus query cursor\u{0}".utf8)
        message += body
        for part in [database.container, String(database.scope.rawValue), database.owner] {
            message += Array(part.utf8) + [0]
        }
        return Array(Wire.SHA256.hmac(key: secret, message: message).prefix(tagLength))
    }

    /// A fresh random secret (the v6 migration stores one).
    static func randomSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

extension [UInt8] {
    mutating func append(int64 value: Int64) {
        for shift in stride(from: 56, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: value >> Int64(shift))) }
    }

    mutating func append(bytes value: [UInt8]) {
        append(int64: Int64(value.count))
        append(contentsOf: value)
    }

    mutating func append(string value: String) { append(bytes: Array(value.utf8)) }
}

/// Reads what `[UInt8].append(…)` wrote; nil past the end or on a bad length.
struct ByteReader {
    private let data: [UInt8]
    private var offset: Int

    init(_ data: [UInt8], from offset: Int) {
        self.data = data
        self.offset = offset
    }

    var isAtEnd: Bool { offset == data.count }

    mutating func byte() -> UInt8? {
        guard offset < data.count else { return nil }
        defer { offset += 1 }
        return data[offset]
    }

    mutating func int64() -> Int64? {
        guard data.count - offset >= 8 else { return nil }
        var value: UInt64 = 0
        for byte in data[offset..<(offset + 8)] { value = value << 8 | UInt64(byte) }
        offset += 8
        return Int64(bitPattern: value)
    }

    mutating func bytes() -> [UInt8]? {
        guard let count = int64(), count >= 0, count <= Int64(data.count - offset) else { return nil }
        defer { offset += Int(count) }
        return Array(data[offset..<(offset + Int(count))])
    }

    mutating func string() -> String? { bytes().map { String(decoding: $0, as: UTF8.self) } }
}
