// Bytes → `Open` decode → a connection as cirrusd serves it: the server's ConnectionHandler
// (its state machine admits or refuses the stream) with the real StorageExecutor and the
// long-lived registry over a throwaway SQLite store — every request kind's decoding and
// validation, as far as a peer's `Open` reaches. The store lives in a temporary directory for
// the whole run, so requests meet the records, zones and subscriptions earlier ones saved.
//
// The handler runs on an NIOAsyncTestingChannel: its event loop takes work from the operation
// tasks on other threads, as a socket channel's does, with no socket and no TLS in the way.
import CirrusStore
import CirrusWire
import Foundation
import FuzzSupport
import NIOCore
import NIOEmbedded

@testable import CirrusServer

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: FuzzArgc, _ argv: FuzzArgv) -> CInt {
    SeedWriter.writeIfRequested { SampleRequests.opens.map { $0.serializedBytes() } }
    _ = RequestHarness.shared
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequest(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let open = try? Wire.Open(serializedBytes: FuzzInput.bytes(start, count)) else { return 0 }
    let harness = RequestHarness.shared
    runBlocking { await harness.run(open) }
    return 0
}

/// The server configuration (executor, store, long-lived registry), made once per process.
final class RequestHarness: Sendable {
    static let shared = RequestHarness()
    static let bearerToken = "fuzz"
    /// Credit granted after the `Open`, so no operation ever waits for a `Window`.
    static let credit: UInt32 = 1 << 20

    let directory: String
    let storage: SQLiteStorage
    let configuration: ServerConfiguration

    private init() {
        self.directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("cirrus-fuzz-request-\(ProcessInfo.processInfo.processIdentifier)").path
        do {
            self.storage = try SQLiteStorage(directory: self.directory)
        } catch {
            fatalError("cannot create the fuzzing store in \(self.directory): \(error)")
        }
        let executor = StorageExecutor(storage: self.storage, tokens: ChangeTokenSealer(secret: Array("fuzz".utf8)))
        var configuration = ServerConfiguration(tls: .server(certificateChainPath: "unused", privateKeyPath: "unused"))
        configuration.bearerTokens = [Self.bearerToken: "_fuzzer"]
        configuration.executor = executor
        configuration.longLivedOperations = LongLivedOperations(journal: self.storage, executor: executor, retentionSeconds: 3_600)
        // One connection per input, thousands a second: no per-user rate may refuse them.
        configuration.peerLimits = PeerLimits(configuration: .init(
            maximumConnectionsPerUser: .max, handshakesPerAddressPerSecond: .max, handshakeBurstPerAddress: .max,
            abandonedStreamsPerUserPerSecond: .max, abandonedStreamBurstPerUser: .max))
        self.configuration = configuration
        atexit { try? FileManager.default.removeItem(atPath: RequestHarness.shared.directory) }
    }

    /// Says `Hello`, sends `open` on stream 1 with ample credit, and waits for the stream's
    /// `Complete` or the connection's error; a watch is stopped by closing the connection.
    func run(_ open: Wire.Open) async {
        let channel = NIOAsyncTestingChannel()
        let configuration = self.configuration
        do {
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(ConnectionHandler(configuration: configuration, logger: .init(label: "fuzz")))
            }.get()
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
            try await channel.writeInbound(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(
                protocolVersion: Wire.protocolVersion, bearerToken: Self.bearerToken))))
            guard case .helloAck = try await channel.waitForOutboundWrite(as: Wire.Frame.self).kind else {
                fatalError("the fuzzing connection was not authenticated")
            }
            try await channel.writeInbound(Wire.Frame(streamID: 1, kind: .open(open)))
            try await channel.writeInbound(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: Self.credit))))
            // A watch streams until the client goes away (a `Cancel` gets no `Complete`): give it
            // a moment to validate and start, then close the connection, which stops it.
            let watchDeadline: ContinuousClock.Instant?
            if case .watchNotifications = open.request { watchDeadline = .now + .milliseconds(20) } else { watchDeadline = nil }
            while true {
                let frame: Wire.Frame
                if let watchDeadline {
                    guard let written = try await channel.readOutbound(as: Wire.Frame.self) else {
                        if ContinuousClock.now >= watchDeadline { break }
                        try await Task.sleep(for: .microseconds(200))
                        continue
                    }
                    frame = written
                } else {
                    frame = try await channel.waitForOutboundWrite(as: Wire.Frame.self)
                }
                switch frame.kind {
                case .complete where frame.streamID == 1, .error:
                    _ = try? await channel.close()
                    return
                default:
                    continue
                }
            }
            _ = try? await channel.close()
        } catch {
            _ = try? await channel.close()
        }
    }
}
