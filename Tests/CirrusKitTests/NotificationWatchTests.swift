import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Dispatch
import Foundation
import Testing

/// `container.notifications(since:)` and `watchNotifications` against scripted
/// `WatchNotifications` streams: the Open, live tokens, reconnects from the last token,
/// errors that end it, cancellation and flow control.
@Suite("Pushed notifications")
struct NotificationWatchTests {
    static func container(_ peer: FakePeer, window: UInt32 = 32) -> CKContainer {
        var configuration = TestCertificates.client(port: peer.port)
        configuration.streamWindow = window
        return CKContainer(identifier: "iCloud.test", configuration: configuration)
    }

    static func live(_ position: UInt8) -> Wire.Event.Payload {
        .watchNotifications(.init(callback: .live(.init(opaque: [0, position]))))
    }

    static func pushed(_ id: String, _ position: UInt8) -> Wire.Event.Payload {
        let notification = Wire.PushNotification(
            notificationID: id,
            notificationType: .database,
            subscriptionID: "db",
            detail: .database(.init(databaseScope: .private))
        )
        return .watchNotifications(.init(callback: .notification(.init(notification: notification, changeToken: .init(opaque: [1, position])))))
    }

    static func token(_ position: UInt8) -> CKServerChangeToken { CKServerChangeToken(opaqueBytes: [1, position]) }

    static func since(_ open: Wire.Open) -> [UInt8]? {
        guard case .watchNotifications(let request) = open.request else { return nil }
        return request.since?.opaque
    }

    @Test("A container-level Open with since and scopes; notifications in order, each with its token", .timeLimit(.minutes(1)))
    func receives() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: [Self.live(0), Self.pushed("n1", 1), Self.pushed("n2", 2)], hang: true)
        }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        var iterator = container.notifications(since: CKServerChangeToken(opaqueBytes: [7]), databaseScopes: [.private, .shared])
            .makeAsyncIterator()
        let first = try #require(try await iterator.next())
        let second = try #require(try await iterator.next())
        #expect(first.notificationID?.rawValue == "n1")
        #expect(first.changeToken == Self.token(1))
        #expect(first is CKDatabaseNotification)
        #expect(second.notificationID?.rawValue == "n2")
        #expect(second.changeToken == Self.token(2))
        let open = try #require(peer.opens.first)
        #expect(open.databaseScope == .unspecified)
        #expect(open.containerIdentifier == "iCloud.test")
        #expect(open.configuration == nil || open.configuration?.isLongLived != true)
        #expect(open.request == .watchNotifications(.init(since: .init(opaque: [7]), databaseScopes: [.private, .shared])))
    }

    @Test("After the connection drops it reconnects with since = the last token and yields each notification once", .timeLimit(.minutes(1)))
    func reconnects() async throws {
        let peer = try await FakePeer.start { open, connection in
            switch connection {
            case 1:
                return FakeReply(payloads: [Self.live(0), Self.pushed("n1", 1), Self.pushed("n2", 2)], hang: true, closeAfterEvents: 3)
            case 2:
                // Dropped right after `.live`: the next stream starts from that token.
                return FakeReply(payloads: [Self.live(5)], hang: true, closeAfterEvents: 1)
            default:
                return FakeReply(payloads: [Self.live(6), Self.pushed("n3", 7)], hang: true)
            }
        }
        defer { Task { await peer.stop() } }
        var received: [CKNotification] = []
        for try await notification in Self.container(peer).notifications() {
            received.append(notification)
            if received.count == 3 { break }
        }
        #expect(received.map { $0.notificationID?.rawValue } == ["n1", "n2", "n3"])
        #expect(received.map(\.changeToken) == [Self.token(1), Self.token(2), Self.token(7)])
        let opens = peer.opens
        #expect(opens.count == 3)
        #expect(opens.map(Self.since) == [nil, [1, 2], [0, 5]])
        #expect(Set(opens.map(\.operationID)).count == 3)
        // Leaving the loop cancelled the third stream.
        try await eventually { peer.cancelFrames.count == 1 }
    }

    @Test("An error that will not pass ends the sequence with it, after what came before", .timeLimit(.minutes(1)))
    func nonRetryable() async throws {
        let peer = try await FakePeer.start { open, _ in
            if Self.since(open) != nil {
                return FakeReply(error: .init(code: .changeTokenExpired, message: "too old"))
            }
            return FakeReply(payloads: [Self.live(0), Self.pushed("n1", 1)], error: .init(code: .invalidArguments, message: "bad scopes"))
        }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        var iterator = container.notifications().makeAsyncIterator()
        #expect(try await iterator.next()?.notificationID?.rawValue == "n1")
        do {
            _ = try await iterator.next()
            Issue.record("the watch did not fail")
        } catch let error as CKError {
            #expect(error.code == .invalidArguments)
            #expect(error.message == "bad scopes")
        }
        #expect(try await iterator.next() == nil)

        do {
            for try await _ in container.notifications(since: CKServerChangeToken(opaqueBytes: [3])) {
                Issue.record("a notification arrived")
            }
            Issue.record("the watch did not fail")
        } catch let error as CKError {
            #expect(error.code == .changeTokenExpired)
        }
        #expect(peer.opens.count == 2)
    }

    @Test("Cancelling the consuming task sends Cancel and ends the sequence", .timeLimit(.minutes(1)))
    func cancellation() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: [Self.live(0), Self.pushed("n1", 1)], hang: true)
        }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let received = Recorder<String>()
        let task = Task {
            for try await notification in container.notifications() {
                received.append(notification.notificationID?.rawValue ?? "")
            }
        }
        try await eventually { received.count == 1 }
        task.cancel()
        try await task.value
        try await eventually { peer.cancelFrames.count == 1 }
        #expect(peer.opens.count == 1)
        #expect(received.values == ["n1"])
    }

    @Test("A slow consumer: the client never holds more than the window; credit follows consumption", .timeLimit(.minutes(1)))
    func backPressure() async throws {
        let window: UInt32 = 4
        let count = 40
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: [Self.live(0)] + (1...count).map { Self.pushed("n\($0)", UInt8($0)) }, hang: true)
        }
        defer { Task { await peer.stop() } }
        var iterator = Self.container(peer, window: window).notifications().makeAsyncIterator()
        var taken = 0
        var most = 0
        while taken < count {
            let notification = try #require(try await iterator.next())
            taken += 1
            #expect(notification.notificationID?.rawValue == "n\(taken)")
            try await Task.sleep(for: .milliseconds(5))
            // Sent but not yet taken: what the client holds (or what is on its way to it).
            let held = peer.log.withLockedValue { $0.eventsSent } - 1 - taken
            most = max(most, held)
            #expect(held <= Int(window))
        }
        #expect(most > 0)
        #expect(peer.log.withLockedValue { $0.eventsSent } == count + 1)
    }

    @Test("The handler style: serial calls on the queue, lastChangeToken, cancel and completion", .timeLimit(.minutes(1)))
    func handler() async throws {
        let peer = try await FakePeer.start { open, _ in
            if Self.since(open) == [9] {
                return FakeReply(error: .init(code: .notAuthenticated, message: "who are you"))
            }
            return FakeReply(payloads: [Self.live(0), Self.pushed("n1", 1), Self.pushed("n2", 2)], hang: true)
        }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let queue = DispatchQueue(label: "handler")
        let received = Recorder<String>()
        let endings = Recorder<CKError.Code?>()
        let watch = container.watchNotifications(queue: queue) { notification in
            dispatchPrecondition(condition: .onQueue(queue))
            received.append(notification.notificationID?.rawValue ?? "")
        } completion: { error in
            dispatchPrecondition(condition: .onQueue(queue))
            endings.append((error as? CKError)?.code)
        }
        try await eventually { received.count == 2 }
        try await eventually { watch.lastChangeToken == Self.token(2) }
        #expect(received.values == ["n1", "n2"])
        watch.cancel()
        #expect(watch.isCancelled)
        try await eventually { endings.count == 1 }
        #expect(endings.values == [nil])
        try await eventually { peer.cancelFrames.count == 1 }

        let failures = Recorder<CKError.Code?>()
        container.watchNotifications(since: CKServerChangeToken(opaqueBytes: [9])) { _ in
            Issue.record("a notification arrived")
        } completion: { error in
            failures.append((error as? CKError)?.code)
        }
        try await eventually { failures.count == 1 }
        #expect(failures.values == [.notAuthenticated])
    }
}
