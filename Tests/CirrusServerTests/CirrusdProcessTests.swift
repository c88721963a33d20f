import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// Runs `openssl s_client` against `port` and returns what it printed.
private func sClient(port: Int, extraArguments: [String] = []) throws -> (status: Int32, output: String) {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments =
        [
            "openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost",
            "-CAfile", TestCertificates.path("ca.pem"),
            "-cert", TestCertificates.path("alice.pem"), "-key", TestCertificates.path("alice-key.pem"),
            "-alpn", "cirrus/1", "-verify_return_error",
        ] + extraArguments
    return try process.runCapturingOutput()
}

@Suite("cirrusd, the real process", .serialized)
struct CirrusdProcessTests {
    @Test func opensslClientNegotiatesTLS13AndALPN() async throws {
        let server = try await CirrusdProcess.launch()
        defer { server.stop() }
        let (_, output) = try sClient(port: server.port)
        #expect(output.contains("New, TLSv1.3,"), "\(output)")
        #expect(output.contains("ALPN protocol: cirrus/1"), "\(output)")
        #expect(output.contains("Verify return code: 0 (ok)"), "\(output)")
    }

    @Test func tls12OnlyClientIsRefused() async throws {
        let server = try await CirrusdProcess.launch()
        defer { server.stop() }
        let (status, output) = try sClient(port: server.port, extraArguments: ["-tls1_2"])
        #expect(status != 0)
        #expect(!output.contains("New, TLSv1.2,"), "\(output)")
    }

    @Test func tls12IsAcceptedWhenAllowed() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--allow-tls12"])
        defer { server.stop() }
        let (_, output) = try sClient(port: server.port, extraArguments: ["-tls1_2"])
        #expect(output.contains("New, TLSv1.2,"), "\(output)")
    }

    @Test func helloAndPingOverTheWire() async throws {
        let server = try await CirrusdProcess.launch()
        defer { server.stop() }
        let client = try await TestClient.connect(port: server.port, user: "alice")
        #expect(try await client.handshake().userRecordName == "_alice")
        try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 3))))
        #expect(try await client.nextFrame().kind == .pong(Wire.Pong(nonce: 3)))
        await client.close()
    }

    @Test func badFramesGetAnErrorAndTheServerKeepsServing() async throws {
        let server = try await CirrusdProcess.launch()
        defer { server.stop() }
        for bad in [[0xFF, 0xFF, 0xFF, 0xFF] as [UInt8], [0, 0, 0, 4, 0xFF, 0xFF, 0xFF, 0xFF]] {
            let raw = try await RawTLSClient.connect(port: server.port)
            try await raw.write(bad)
            let frames = try await raw.framesUntilClose()
            guard case .error(let error) = frames.last?.kind else {
                Issue.record("expected an Error frame, got \(frames)")
                continue
            }
            #expect([.frameTooLarge, .malformedFrame].contains(error.code))
        }
        let client = try await TestClient.connect(port: server.port)
        _ = try await client.handshake()
        await client.close()
    }

    @Test func requiredClientCertificateIsEnforced() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--client-auth", "required"])
        defer { server.stop() }
        let client = try await TestClient.connect(port: server.port, user: nil)
        // TLS 1.3: the client learns of the refusal when it next reads.
        try? await client.send(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))))
        var sawAck = false
        while true {
            switch try await client.next() {
            case .frame(let frame):
                if case .helloAck = frame.kind { sawAck = true }
            case .error:
                continue
            case .closed:
                #expect(!sawAck)
                return
            }
        }
    }

    @Test func sigtermShutsDownCleanly() async throws {
        let server = try await CirrusdProcess.launch()
        let client = try await TestClient.connect(port: server.port)
        _ = try await client.handshake()
        #expect(server.stop() == 0)
        // A connected client hears GoAway before the close.
        var sawGoAway = false
        while case .frame(let frame) = try await client.next() {
            if case .goAway(let goAway) = frame.kind {
                sawGoAway = true
                #expect(goAway.code == .shuttingDown)
            }
        }
        #expect(sawGoAway)
    }

    @Test func acknowledgedSavesSurviveSIGKILL() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-kill-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let records = (0..<50).map { note("k\($0)", title: "survives \($0)") }
        do {
            let server = try await CirrusdProcess.launch(arguments: ["--data-dir", directory])
            var client = try await OperationClient.connect(port: server.port, user: "alice")
            let (saves, complete) = try await client.save(records)
            #expect(complete.error == nil)
            #expect(saves.count == 50)
            await server.killed()  // right after the acknowledgement: no graceful shutdown
            await client.client.close()
        }
        let server = try await CirrusdProcess.launch(arguments: ["--data-dir", directory])
        defer { server.stop() }
        var client = try await OperationClient.connect(port: server.port, user: "alice")
        let (outcomes, complete) = try await client.fetch(records.compactMap(\.recordID))
        #expect(complete.error == nil)
        #expect(outcomes.compactMap { fetchedRecord($0)?.fields.first?.value?.kind } == records.map { $0.fields[0].value?.kind })
        await client.client.close()
    }

    @Test func worksWithNoFlagsFromTheCheckout() async throws {
        let checkout = (TestCertificates.directory as NSString).deletingLastPathComponent
        let server = try await CirrusdProcess.launch(workingDirectory: checkout)
        defer { server.stop() }
        #expect(server.port == 7443)
        let (_, output) = try sClient(port: server.port)
        #expect(output.contains("ALPN protocol: cirrus/1"), "\(output)")
    }
}
