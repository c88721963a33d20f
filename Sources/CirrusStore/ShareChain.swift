import CirrusWire

/// The shares of one zone, as a write reads them.
package struct ZoneShares: Sendable {
    /// The name of the zone-wide share; nil when the zone is shared by hierarchy (or not at all).
    package var zoneWide: String?
    /// The share of each root of a hierarchy share, by the root's name.
    package var byRoot: [String: String] = [:]

    package init() {}

    /// The shares of rows (share record name, root name or nil for a zone-wide share).
    package init(_ rows: [(name: String, rootName: String?)]) {
        for row in rows {
            if let root = row.rootName { byRoot[root] = row.name } else { zoneWide = row.name }
        }
    }

    package var isEmpty: Bool { zoneWide == nil && byRoot.isEmpty }
}

/// Which shares a record is in: the zone-wide share; or the share of every root its parent
/// chain reaches (a parent deleted earlier in the same write counts with the shares it was
/// in); a share record is in its own share. The walk asks its engine for each parent's stored
/// record in turn (``parentToRead``, ``read(_:)``), so every engine follows chains alike,
/// reading its rows as suits it.
///
/// For example:
/// ```swift
/// var walk = try SharesReached(recordType: row.recordType, name: name, shares: shares, deleted: deleted) { try row.record() }
/// while let parent = walk.parentToRead { walk.read(try stored(parent)) }
/// print(walk.holding)
/// ```
package struct SharesReached {
    /// How far up a parent chain the walk looks for the roots of shares.
    package static let maximumDepth = 64

    /// The shares found so far; all of them once ``parentToRead`` is nil.
    package private(set) var holding: [String] = []
    /// The parent whose stored record the walk needs next; nil when it is done.
    package private(set) var parentToRead: String?
    private let shares: ZoneShares
    /// The shares of each record deleted earlier in the write, by name.
    private let deleted: [String: [String]]
    private var depth = 0

    /// Starts at the record `name` of type `recordType`; `record` decodes it, asked only when
    /// the chain is to be followed.
    package init(
        recordType: String, name: String, shares: ZoneShares, deleted: [String: [String]], record: () throws -> Wire.Record
    ) rethrows {
        self.shares = shares
        self.deleted = deleted
        if recordType == ShareRules.shareType {
            holding = [name]
        } else if let zoneWide = shares.zoneWide {
            holding = [zoneWide]
        } else if !shares.byRoot.isEmpty {
            visit(try record(), named: name)
        }
    }

    /// Goes on from ``parentToRead``, whose stored record is `parent` (nil: not stored).
    package mutating func read(_ parent: Wire.Record?) {
        guard let name = parentToRead else { return }
        parentToRead = nil
        guard let parent else {
            for share in deleted[name] ?? [] where !holding.contains(share) { holding.append(share) }
            return
        }
        if depth < Self.maximumDepth { visit(parent, named: name) }
    }

    /// Looks at one record of the chain (at most ``maximumDepth`` of them), then asks for its parent.
    private mutating func visit(_ record: Wire.Record, named name: String) {
        if let share = shares.byRoot[name], !holding.contains(share) { holding.append(share) }
        depth += 1
        parentToRead = record.parent?.recordID?.recordName
    }
}

extension ShareRules {
    /// The changes each accepted participant's shared database hears of: per participant (by
    /// the shares they take part in), every change whose record is in one of those shares.
    package static func changesByParticipant(
        _ changes: [(change: RecordChange, shares: [String])], sharesByUser: [String: Set<String>]
    ) -> [String: [RecordChange]] {
        var result: [String: [RecordChange]] = [:]
        for (user, shares) in sharesByUser {
            result[user, default: []] += changes.filter { !shares.isDisjoint(with: $0.shares) }.map(\.change)
        }
        return result
    }
}
