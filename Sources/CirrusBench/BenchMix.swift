import Foundation

/// The kinds of operation `cirrus bench` runs.
public enum BenchOperationKind: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    /// `CKModifyRecordsOperation` saving new records.
    case modify
    /// `CKFetchRecordsOperation` of existing records picked at random.
    case fetch
    /// `CKQueryOperation` on an indexed field, one page.
    case query
    /// `CKFetchRecordZoneChangesOperation`, one batch from the start of a zone.
    case changes
    /// One `Ping`/`Pong` round trip on stream 0: the TLS transport alone, no storage.
    case ping
    /// One `CKFetchRecordZoneChangesOperation` fetching all changes of a zone preloaded with
    /// `eventsPerStream` records: one operation streaming that many events.
    case stream
    /// `CKModifyRecordsOperation` saving one record whose asset is a file of `assetBytes`
    /// (uploaded in chunks).
    case upload
    /// `CKFetchRecordsOperation` of a record whose asset (`assetBytes`) is downloaded to a file.
    case download

    private var rank: Int {
        switch self {
        case .modify: 0
        case .fetch: 1
        case .query: 2
        case .changes: 3
        case .ping: 4
        case .stream: 5
        case .upload: 6
        case .download: 7
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// A weighted mix of operation kinds, e.g. `modify=20,fetch=70,query=10`.
public struct BenchMix: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Each kind with a positive weight, in `BenchOperationKind` order.
    public let weights: [BenchOperationKind: Int]
    private let total: Int
    private let order: [BenchOperationKind]

    /// Only `kind`.
    public init(single kind: BenchOperationKind) {
        self.init(checked: [kind: 1])
    }

    /// Parses `kind=weight,kind=weight…` (whitespace allowed). Kinds: modify, fetch, query,
    /// changes, ping, stream; weights are positive integers; each kind at most once.
    public init(parsing text: String) throws(BenchError) {
        var weights: [BenchOperationKind: Int] = [:]
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        for part in parts {
            let pair = part.split(separator: "=", omittingEmptySubsequences: false)
            guard pair.count == 2 else {
                throw BenchError.invalid("--mix: '\(part)' is not kind=weight (e.g. modify=20,fetch=80)")
            }
            let name = pair[0].trimmingCharacters(in: .whitespaces)
            guard let kind = BenchOperationKind(rawValue: name) else {
                throw BenchError.invalid(
                    "--mix: unknown operation '\(name)' (one of \(BenchOperationKind.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            guard let weight = Int(pair[1].trimmingCharacters(in: .whitespaces)), weight > 0 else {
                throw BenchError.invalid("--mix: the weight of \(name) must be a positive integer, not '\(pair[1])'")
            }
            guard weights.updateValue(weight, forKey: kind) == nil else {
                throw BenchError.invalid("--mix: \(name) is given twice")
            }
        }
        self.init(checked: weights)
    }

    private init(checked weights: [BenchOperationKind: Int]) {
        self.weights = weights
        self.order = weights.keys.sorted()
        self.total = weights.values.reduce(0, +)
    }

    /// The kind for a uniform draw `draw` in 0..<total weight.
    func pick(_ draw: UInt64) -> BenchOperationKind {
        var point = Int(draw % UInt64(max(self.total, 1)))
        for kind in self.order {
            let weight = self.weights[kind] ?? 0
            if point < weight { return kind }
            point -= weight
        }
        return self.order.last ?? .modify
    }

    /// Picks with `generator`.
    func pick(using generator: inout SplitMix64) -> BenchOperationKind {
        self.pick(generator.next())
    }

    /// Whether the mix reads records that must exist first in the `bench-N` zones.
    var reads: Bool { self.weights.keys.contains { [.fetch, .query, .changes].contains($0) } }

    /// Whether the mix streams a zone of its own (`stream`).
    public var streams: Bool { self.weights[.stream] != nil }

    /// Whether the mix moves asset files (`upload`, `download`).
    public var movesAssets: Bool { self.weights[.upload] != nil || self.weights[.download] != nil }

    public var description: String {
        self.order.map { "\($0.rawValue)=\(self.weights[$0] ?? 0)" }.joined(separator: ",")
    }

    enum CodingKeys: String, CodingKey { case weights }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let raw = try container.decode([String: Int].self, forKey: .weights)
        var weights: [BenchOperationKind: Int] = [:]
        for (name, weight) in raw {
            guard let kind = BenchOperationKind(rawValue: name) else {
                throw DecodingError.dataCorruptedError(forKey: .weights, in: container, debugDescription: "unknown kind \(name)")
            }
            weights[kind] = weight
        }
        self.init(checked: weights)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Dictionary(uniqueKeysWithValues: self.weights.map { ($0.key.rawValue, $0.value) }), forKey: .weights)
    }
}

/// A small, fast, seedable generator (Steele, Lea and Flood's SplitMix64).
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
