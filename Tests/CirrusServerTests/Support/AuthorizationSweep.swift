import CirrusWire
import Foundation
import Testing

/// Every identifier one user can put in a request: the ones bob really has, or a set shaped
/// the same way that exists for nobody.
struct SweepIdentifiers: Sendable {
    /// The zone owner name in zone IDs: bob's user record name, or a user that does not exist.
    var owner: String
    /// A custom zone of the owner's private database.
    var zoneName: String
    /// Records in the owner's private default zone, his custom zone, and the public database.
    var defaultRecord: String
    var customRecord: String
    var publicRecord: String
    /// Subscriptions in the private and the public database.
    var subscription: String
    var publicSubscription: String
    /// A long-lived operation.
    var operationID: String
    /// A pushed notification.
    var notificationID: String
    /// Change tokens: the custom zone's, the default zone's, the private database's, the
    /// notification feed's.
    var zoneToken: Wire.ServerChangeToken
    var defaultZoneToken: Wire.ServerChangeToken
    var databaseToken: Wire.ServerChangeToken
    var notificationToken: Wire.ServerChangeToken
    /// Cursors of a private and a public query with more results.
    var cursor: Wire.QueryCursor
    var publicCursor: Wire.QueryCursor

    var defaultZone: Wire.RecordZoneID { Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: owner) }
    var customZone: Wire.RecordZoneID { Wire.RecordZoneID(zoneName: zoneName, ownerName: owner) }

    /// The same shapes naming nothing: other names, and the tokens and cursors with one byte
    /// changed (a token of nobody's feed, a cursor nobody opened).
    var unknownCounterpart: SweepIdentifiers {
        var unknown = self
        unknown.owner = "_zed"
        unknown.zoneName = "GhostWork"
        unknown.defaultRecord = "ghost-default-note"
        unknown.customRecord = "ghost-work-note"
        unknown.publicRecord = "ghost-public-note"
        unknown.subscription = "ghost-subscription"
        unknown.publicSubscription = "ghost-public-subscription"
        unknown.operationID = UUID().uuidString
        unknown.notificationID = UUID().uuidString.lowercased()
        unknown.zoneToken = Self.flippingLastByte(zoneToken)
        unknown.defaultZoneToken = Self.flippingLastByte(defaultZoneToken)
        unknown.databaseToken = Self.flippingLastByte(databaseToken)
        unknown.notificationToken = Self.flippingLastByte(notificationToken)
        unknown.cursor = Self.flippingIDByte(cursor)
        unknown.publicCursor = Self.flippingIDByte(publicCursor)
        return unknown
    }

    /// The string identifiers and what they read as in a normalized answer, longest first so
    /// that no identifier is replaced inside a longer one.
    var placeholders: [(String, String)] {
        [
            (owner, "<owner>"), (zoneName, "<zone>"), (defaultRecord, "<default-record>"),
            (customRecord, "<custom-record>"), (publicRecord, "<public-record>"), (subscription, "<subscription>"),
            (publicSubscription, "<public-subscription>"), (operationID, "<operation>"),
            (notificationID, "<notification>"),
        ].sorted { $0.0.count > $1.0.count }
    }

    private static func flippingLastByte(_ token: Wire.ServerChangeToken) -> Wire.ServerChangeToken {
        var bytes = token.opaque
        if !bytes.isEmpty { bytes[bytes.count - 1] ^= 0x5a }
        return Wire.ServerChangeToken(opaque: bytes)
    }

    /// Byte 0 is the cursor format's version; 1 … 16 its ID.
    private static func flippingIDByte(_ cursor: Wire.QueryCursor) -> Wire.QueryCursor {
        var bytes = cursor.opaque
        if bytes.count > 1 { bytes[1] ^= 0x5a }
        return Wire.QueryCursor(opaque: bytes)
    }
}

/// Everything the server sent on one stream.
struct SweepAnswer: Sendable {
    var persisted = false
    var events: [Wire.Event.Payload?] = []
    /// A watch went live (the sweep then cancels it).
    var wentLive = false
    var complete: Wire.Complete?

    /// The answer as text with every identifier of `ids` replaced by its placeholder, and times
    /// and change tags set aside: two answers that differ only in the identifier they name read
    /// the same.
    func normalized(_ ids: SweepIdentifiers) -> String {
        var text = "persisted: \(persisted), live: \(wentLive), events: \(events), complete: \(String(describing: complete))"
        for (identifier, placeholder) in ids.placeholders {
            text = text.replacingOccurrences(of: identifier, with: placeholder)
        }
        // What differs between any two saves: when they happened and the change tag.
        for (pattern, replacement) in [
            (#"Timestamp\(seconds: [0-9]+, nanos: [0-9]+\)"#, "<time>"), (#"recordChangeTag: "[^"]*""#, "recordChangeTag: <tag>"),
        ] {
            text = text.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return text
    }

    /// Names of the records a fetch returned (not of those it refused).
    var fetchedRecordNames: [String] {
        events.compactMap { payload in
            guard case .fetchRecords(let event) = payload, case .perRecordResult(let outcome) = event.callback,
                case .record(let record) = outcome.outcome
            else { return nil }
            return record.recordID?.recordName
        }
    }

    /// The codes of the per-item errors, or of the operation's error when it has none.
    var errorCodes: [Wire.ErrorCode] {
        guard let error = complete?.error else { return [] }
        let items = error.partialErrors.compactMap { $0.error?.code }
        return items.isEmpty ? [error.code] : items
    }
}

/// One request of the sweep: how to build it from a set of identifiers, and what the answer
/// to another user's identifiers must be.
struct SweepProbe: Sendable {
    enum Expectation: Sendable {
        /// With bob's identifiers, alice gets exactly what she gets with identifiers of nobody.
        case indistinguishable
        /// Alice may legitimately reach this (public records, her own namespace) or the request
        /// names nobody's identifier at all; sent once with bob's identifiers, and `check`
        /// returns what is wrong with the answer, if anything.
        case legitimate(because: String, check: @Sendable (SweepAnswer, SweepIdentifiers) -> String?)
    }

    var name: String
    var scope: Wire.DatabaseScope
    var isLongLived = false
    /// The `Open.operation_id`; nil = a fresh one.
    var operationID: (@Sendable (SweepIdentifiers) -> String)?
    var expectation: Expectation = .indistinguishable
    var request: @Sendable (SweepIdentifiers) -> Wire.Open.Request

    init(
        _ name: String, scope: Wire.DatabaseScope = .private, isLongLived: Bool = false,
        operationID: (@Sendable (SweepIdentifiers) -> String)? = nil, expectation: Expectation = .indistinguishable,
        _ request: @escaping @Sendable (SweepIdentifiers) -> Wire.Open.Request
    ) {
        self.name = name
        self.scope = scope
        self.isLongLived = isLongLived
        self.operationID = operationID
        self.expectation = expectation
        self.request = request
    }
}

/// A connection that sends one request at a time and collects its answer.
struct SweepClient {
    let client: TestClient
    var nextStreamID: UInt64 = 1

    static func connect(port: Int, user: String) async throws -> SweepClient {
        let client = try await TestClient.connect(port: port, user: user)
        _ = try await client.handshake()
        return SweepClient(client: client)
    }

    mutating func send(_ probe: SweepProbe, with ids: SweepIdentifiers) async throws -> SweepAnswer {
        let open = Wire.Open(
            operationID: probe.operationID?(ids) ?? UUID().uuidString,
            databaseScope: probe.scope,
            containerIdentifier: container,
            configuration: probe.isLongLived ? Wire.OperationConfiguration(isLongLived: true) : nil,
            initialWindow: 1_000,
            request: probe.request(ids)
        )
        return try await self.exchange(.open(open))
    }

    mutating func run(_ request: Wire.Open.Request, scope: Wire.DatabaseScope = .private) async throws -> SweepAnswer {
        try await self.send(SweepProbe("", scope: scope) { _ in request }, with: SweepWorld.placeholderIdentifiers)
    }

    mutating func resume(_ operationID: String) async throws -> SweepAnswer {
        try await self.exchange(.resume(Wire.Resume(operationID: operationID, lastSeq: 0, initialWindow: 1_000)))
    }

    /// Sends `kind` on a new stream and reads that stream to its `Complete`. A watch that goes
    /// live is cancelled, so every answer ends.
    private mutating func exchange(_ kind: Wire.Frame.Kind) async throws -> SweepAnswer {
        let streamID = self.nextStreamID
        self.nextStreamID += 2
        try await self.client.send(Wire.Frame(streamID: streamID, kind: kind))
        var answer = SweepAnswer()
        while true {
            // (The server's keepalive Pings are answered by the client's collector.)
            let frame = try await self.client.nextFrame()
            guard frame.streamID == streamID else {
                Issue.record("a frame of another stream: \(frame)")
                continue
            }
            switch frame.kind {
            case .persisted:
                answer.persisted = true
            case .event(let event):
                if case .watchNotifications(let watch) = event.payload, case .live = watch.callback {
                    answer.wentLive = true
                    try await self.client.send(Wire.Frame(streamID: streamID, kind: .cancel(Wire.Cancel(reason: "sweep"))))
                } else {
                    answer.events.append(event.payload)
                }
            case .complete(let complete):
                answer.complete = complete
                return answer
            default:
                Issue.record("unexpected \(frame)")
            }
        }
    }
}
